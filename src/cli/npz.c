/* .npz archives: see npz.h. */
#define _POSIX_C_SOURCE 200809L
#include "npz.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int npz_fail(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int npz_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

uint32_t npz_crc32(const unsigned char *bytes, size_t len)
{
    static uint32_t table[256];
    static int ready;
    if (!ready) {
        for (uint32_t n = 0; n < 256; n++) {
            uint32_t c = n;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
            table[n] = c;
        }
        ready = 1;
    }
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < len; i++) c = table[(c ^ bytes[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

/* ---- inflate (RFC 1951), after the structure of zlib's puff.c ---------------------------- */

typedef struct inf {
    const unsigned char *in;
    size_t inlen, incnt;
    unsigned char *out;
    size_t outcap, outcnt;
    uint32_t bitbuf;
    int bitcnt;
    int error; /* -1 damaged, -2 too long */
} inf;

static int bits(inf *s, int need)
{
    uint32_t val = s->bitbuf;
    while (s->bitcnt < need) {
        if (s->incnt == s->inlen) {
            s->error = -1;
            return 0;
        }
        val |= (uint32_t)s->in[s->incnt++] << s->bitcnt;
        s->bitcnt += 8;
    }
    s->bitbuf = val >> need;
    s->bitcnt -= need;
    return (int)(val & ((1u << need) - 1));
}

static int stored(inf *s)
{
    s->bitbuf = 0;
    s->bitcnt = 0;
    if (s->incnt + 4 > s->inlen) return s->error = -1;
    unsigned len = s->in[s->incnt] | (unsigned)s->in[s->incnt + 1] << 8;
    unsigned nlen = s->in[s->incnt + 2] | (unsigned)s->in[s->incnt + 3] << 8;
    s->incnt += 4;
    if (len != (~nlen & 0xffff)) return s->error = -1;
    if (s->incnt + len > s->inlen) return s->error = -1;
    if (s->outcnt + len > s->outcap) return s->error = -2;
    memcpy(s->out + s->outcnt, s->in + s->incnt, len);
    s->outcnt += len;
    s->incnt += len;
    return 0;
}

typedef struct huffman {
    short count[16];
    short symbol[288];
} huffman;

static int decode(inf *s, const huffman *h)
{
    int code = 0, first = 0, index = 0;
    for (int len = 1; len < 16; len++) {
        code |= bits(s, 1);
        if (s->error) return -1;
        int count = h->count[len];
        if (code - count < first) return h->symbol[index + (code - first)];
        index += count;
        first += count;
        first <<= 1;
        code <<= 1;
    }
    s->error = -1;
    return -1;
}

/* Canonical code from lengths: 0 complete, > 0 incomplete, < 0 over-subscribed. */
static int construct(huffman *h, const short *length, int n)
{
    short offs[16];
    for (int len = 0; len < 16; len++) h->count[len] = 0;
    for (int symbol = 0; symbol < n; symbol++) h->count[length[symbol]]++;
    if (h->count[0] == n) return 0;
    int left = 1;
    for (int len = 1; len < 16; len++) {
        left <<= 1;
        left -= h->count[len];
        if (left < 0) return left;
    }
    offs[1] = 0;
    for (int len = 1; len < 15; len++) offs[len + 1] = (short)(offs[len] + h->count[len]);
    for (int symbol = 0; symbol < n; symbol++)
        if (length[symbol] != 0) h->symbol[offs[length[symbol]]++] = (short)symbol;
    return left;
}

static int codes(inf *s, const huffman *lencode, const huffman *distcode)
{
    static const short lbase[29] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
    static const short lext[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
    static const short dbase[30] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
    static const short dext[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
    for (;;) {
        int symbol = decode(s, lencode);
        if (s->error) return -1;
        if (symbol < 256) {
            if (s->outcnt == s->outcap) return s->error = -2;
            s->out[s->outcnt++] = (unsigned char)symbol;
        } else if (symbol == 256) {
            return 0;
        } else {
            symbol -= 257;
            if (symbol >= 29) return s->error = -1;
            size_t len = (size_t)(lbase[symbol] + bits(s, lext[symbol]));
            symbol = decode(s, distcode);
            if (s->error) return -1;
            if (symbol >= 30) return s->error = -1;
            size_t dist = (size_t)(dbase[symbol] + bits(s, dext[symbol]));
            if (s->error) return -1;
            if (dist > s->outcnt) return s->error = -1;
            if (s->outcnt + len > s->outcap) return s->error = -2;
            for (size_t k = 0; k < len; k++, s->outcnt++) s->out[s->outcnt] = s->out[s->outcnt - dist];
        }
    }
}

static int fixed(inf *s)
{
    static huffman lencode, distcode;
    static int ready;
    if (!ready) {
        short lengths[288];
        int symbol = 0;
        for (; symbol < 144; symbol++) lengths[symbol] = 8;
        for (; symbol < 256; symbol++) lengths[symbol] = 9;
        for (; symbol < 280; symbol++) lengths[symbol] = 7;
        for (; symbol < 288; symbol++) lengths[symbol] = 8;
        construct(&lencode, lengths, 288);
        for (symbol = 0; symbol < 30; symbol++) lengths[symbol] = 5;
        construct(&distcode, lengths, 30);
        ready = 1;
    }
    return codes(s, &lencode, &distcode);
}

static int dynamic(inf *s)
{
    static const short order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    short lengths[320];
    huffman lencode, distcode;
    int nlen = bits(s, 5) + 257, ndist = bits(s, 5) + 1, ncode = bits(s, 4) + 4;
    if (s->error) return -1;
    if (nlen > 286 || ndist > 30) return s->error = -1;
    int index;
    for (index = 0; index < ncode; index++) lengths[order[index]] = (short)bits(s, 3);
    for (; index < 19; index++) lengths[order[index]] = 0;
    if (s->error) return -1;
    if (construct(&lencode, lengths, 19) != 0) return s->error = -1;
    index = 0;
    while (index < nlen + ndist) {
        int symbol = decode(s, &lencode);
        if (s->error) return -1;
        if (symbol < 16) {
            lengths[index++] = (short)symbol;
        } else {
            int len = 0;
            if (symbol == 16) {
                if (index == 0) return s->error = -1;
                len = lengths[index - 1];
                symbol = 3 + bits(s, 2);
            } else if (symbol == 17) {
                symbol = 3 + bits(s, 3);
            } else {
                symbol = 11 + bits(s, 7);
            }
            if (s->error) return -1;
            if (index + symbol > nlen + ndist) return s->error = -1;
            while (symbol--) lengths[index++] = (short)len;
        }
    }
    if (lengths[256] == 0) return s->error = -1;
    /* an incomplete code only as one code of one bit (zlib's rule, so both CLIs accept the same) */
    int err = construct(&lencode, lengths, nlen);
    if (err < 0 || (err > 0 && !(nlen - lencode.count[0] == 1 && lencode.count[1] == 1))) return s->error = -1;
    err = construct(&distcode, lengths + nlen, ndist);
    if (err < 0 || (err > 0 && !(ndist - distcode.count[0] == 1 && distcode.count[1] == 1))) return s->error = -1;
    return codes(s, &lencode, &distcode);
}

long long npz_inflate(const unsigned char *in, size_t inlen, unsigned char *out, size_t outcap)
{
    inf s = {in, inlen, 0, out, outcap, 0, 0, 0, 0};
    int last;
    do {
        last = bits(&s, 1);
        int type = bits(&s, 2);
        if (s.error) break;
        if (type == 0) stored(&s);
        else if (type == 1) fixed(&s);
        else if (type == 2) dynamic(&s);
        else s.error = -1;
    } while (!last && !s.error);
    return s.error ? s.error : (long long)s.outcnt;
}

/* ---- the archive ------------------------------------------------------------------------- */

int npz_looks_like_zip(const unsigned char *bytes, size_t len)
{
    return len >= 4 && bytes[0] == 0x50 && bytes[1] == 0x4b && bytes[2] == 3 && bytes[3] == 4;
}

/* A member's name as messages show it: bytes outside printable ASCII and backslashes as \\xNN,
 * cut to 200 characters and "..." (the JS CLI shows names the same way). */
static const char *shown(const char *name, char *buf)
{
    size_t n = 0;
    for (const unsigned char *c = (const unsigned char *)name; *c && n <= 200; c++) {
        if (*c < 0x20 || *c >= 0x7f || *c == '\\') n += (size_t)sprintf(buf + n, "\\x%02x", *c);
        else buf[n++] = (char)*c;
    }
    if (n > 200) strcpy(buf + 200, "...");
    else buf[n] = '\0';
    return buf;
}

const char *npz_shown(const char *name, char buf[NPZ_SHOWN]) { return shown(name, buf); }

static uint32_t rd16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t rd32(const unsigned char *p) { return rd16(p) | rd16(p + 2) << 16; }
static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

void npz_free(npz *z)
{
    for (int k = 0; k < z->count; k++) free(z->members[k].name);
    free(z->members);
    z->members = NULL;
    z->count = 0;
}

static int parse_directory(const unsigned char *bytes, size_t len, npz *z, char *err, size_t errlen);

int npz_parse(const unsigned char *bytes, size_t len, npz *z, char *err, size_t errlen)
{
    memset(z, 0, sizeof *z);
    const int rc = parse_directory(bytes, len, z, err, errlen);
    if (rc) npz_free(z); /* nothing is left allocated after a refusal */
    return rc;
}

/* Orders members by name, then by place in the directory. */
static int by_name(const void *a, const void *b)
{
    const npz_member *x = *(const npz_member *const *)a, *y = *(const npz_member *const *)b;
    const int c = strcmp(x->name, y->name);
    return c ? c : (x > y) - (x < y);
}

/* The first member (in directory order) whose name an earlier one has, or NULL: O(n log n). */
static const npz_member *first_repeat(const npz *z, int *oom)
{
    const npz_member **order = malloc((size_t)(z->count ? z->count : 1) * sizeof *order);
    *oom = !order;
    if (!order) return NULL;
    for (int k = 0; k < z->count; k++) order[k] = &z->members[k];
    qsort(order, (size_t)z->count, sizeof *order, by_name);
    const npz_member *first = NULL;
    for (int k = 1; k < z->count; k++)
        if (!strcmp(order[k - 1]->name, order[k]->name) && (k < 2 || strcmp(order[k - 2]->name, order[k]->name)) &&
            (!first || order[k] < first))
            first = order[k];
    free(order);
    return first;
}

static int parse_directory(const unsigned char *bytes, size_t len, npz *z, char *err, size_t errlen)
{
    char show[256];
    z->bytes = bytes;
    z->len = len;
    size_t eocd = (size_t)-1;
    if (len >= 22)
        for (size_t p = len - 22;; p--) {
            if (rd32(bytes + p) == 0x06054b50u && p + 22 + rd16(bytes + p + 20) == len) {
                eocd = p;
                break;
            }
            if (p == 0 || p + 65535 + 22 == len) break;
        }
    if (eocd == (size_t)-1) return npz_fail(err, errlen, "not a valid .npz: no zip end-of-central-directory record");
    uint64_t entries = rd16(bytes + eocd + 10), cd_size = rd32(bytes + eocd + 12), cd_offset = rd32(bytes + eocd + 16);
    if (rd16(bytes + eocd + 4) != 0 || rd16(bytes + eocd + 6) != 0 || rd16(bytes + eocd + 8) != entries)
        return npz_fail(err, errlen, "not a valid .npz: a multi-part zip archive");
    if (entries == 0xffff || cd_size == 0xffffffffu || cd_offset == 0xffffffffu) {
        if (eocd < 20 || rd32(bytes + eocd - 20) != 0x07064b50u)
            return npz_fail(err, errlen, "not a valid .npz: zip64 fields without a zip64 locator");
        const size_t loc = eocd - 20;
        const uint64_t zr = rd64(bytes + loc + 8);
        if (zr > loc || loc - zr < 56 || rd32(bytes + zr) != 0x06064b50u)
            return npz_fail(err, errlen, "not a valid .npz: the zip64 end record is not where its locator says");
        entries = rd64(bytes + zr + 32);
        cd_size = rd64(bytes + zr + 40);
        cd_offset = rd64(bytes + zr + 48);
    }
    if (cd_offset > eocd || cd_size > eocd - cd_offset)
        return npz_fail(err, errlen, "not a valid .npz: the central directory lies outside the file");
    /* each entry takes at least 46 bytes */
    if (entries > cd_size / 46)
        return npz_fail(err, errlen, "not a valid .npz: the central directory says it holds %llu entries, more than its %llu bytes can",
                        (unsigned long long)entries, (unsigned long long)cd_size);
    const uint64_t cd_end = cd_offset + cd_size;
    z->members = calloc((size_t)(entries ? entries : 1), sizeof *z->members);
    if (!z->members) return npz_fail(err, errlen, "out of memory");
    uint64_t p = cd_offset;
    for (uint64_t k = 0; k < entries; k++) {
        if (p + 46 > cd_end || rd32(bytes + p) != 0x02014b50u)
            return npz_fail(err, errlen, "not a valid .npz: central directory entry %llu is damaged", (unsigned long long)k);
        const uint32_t flags = rd16(bytes + p + 8), method = rd16(bytes + p + 10), crc = rd32(bytes + p + 16);
        uint64_t csize = rd32(bytes + p + 20), usize = rd32(bytes + p + 24), offset = rd32(bytes + p + 42);
        const uint32_t name_len = rd16(bytes + p + 28), extra_len = rd16(bytes + p + 30), comment_len = rd16(bytes + p + 32);
        if (p + 46 + name_len + extra_len + comment_len > cd_end)
            return npz_fail(err, errlen, "not a valid .npz: central directory entry %llu is damaged", (unsigned long long)k);
        char *name = malloc(name_len + 1);
        if (!name) return npz_fail(err, errlen, "out of memory");
        memcpy(name, bytes + p + 46, name_len);
        name[name_len] = '\0';
        z->members[z->count].name = name;
        z->count++;
        if (memchr(bytes + p + 46, 0, name_len))
            return npz_fail(err, errlen, "not a valid .npz: the name of central directory entry %llu holds a NUL byte",
                            (unsigned long long)k);
        /* extra fields, each inside the entry's extra area; zip64's holds the 64-bit values of the
         * 32-bit fields that are 0xffffffff, in order */
        const uint64_t extra_end = p + 46 + name_len + extra_len;
        for (uint64_t e = p + 46 + name_len; e + 4 <= extra_end;) {
            const uint32_t id = rd16(bytes + e), size = rd16(bytes + e + 2);
            if (e + 4 + size > extra_end)
                return npz_fail(err, errlen, "not a valid .npz: an extra field of %s runs past the end of its entry", shown(name, show));
            if (id == 1) {
                uint64_t q = e + 4;
                uint64_t *fields[3] = {&usize, &csize, &offset};
                for (int f = 0; f < 3; f++) {
                    if (*fields[f] != 0xffffffffu) continue;
                    if (q + 8 > e + 4 + size)
                        return npz_fail(err, errlen, "not a valid .npz: the zip64 field of %s is too short", shown(name, show));
                    *fields[f] = rd64(bytes + q);
                    q += 8;
                }
            }
            e += 4 + size;
        }
        p += 46 + name_len + extra_len + comment_len;
        if (flags & 1) return npz_fail(err, errlen, "%s: encrypted, which .npz files never are", shown(name, show));
        if (method != 0 && method != 8)
            return npz_fail(err, errlen, "%s: zip compression method %u, expected stored (np.savez) or deflated (np.savez_compressed)",
                            shown(name, show), method);
        if (offset > cd_offset || cd_offset - offset < 30 || rd32(bytes + offset) != 0x04034b50u)
            return npz_fail(err, errlen, "not a valid .npz: the local header of %s is damaged", shown(name, show));
        const uint64_t start = offset + 30 + rd16(bytes + offset + 26) + rd16(bytes + offset + 28);
        if (start > cd_offset || csize > cd_offset - start)
            return npz_fail(err, errlen, "not a valid .npz: the data of %s lies outside the file", shown(name, show));
        if (method == 0 && csize != usize)
            return npz_fail(err, errlen, "not a valid .npz: %s is stored with %llu bytes but says it holds %llu", shown(name, show),
                            (unsigned long long)csize, (unsigned long long)usize);
        /* claims checked before anything is allocated for them: a member fits a wasm32 heap, and
         * deflate gives at most 1032 bytes per byte (258 per 2-bit match) */
        if (usize > NPZ_MAX_MEMBER)
            return npz_fail(err, errlen, "%s: holds %llu bytes, more than the %llu a member may (4 GiB, what WebAssembly memory can hold)",
                            shown(name, show), (unsigned long long)usize, (unsigned long long)NPZ_MAX_MEMBER);
        if (method == 8 && usize > csize * 1032)
            return npz_fail(err, errlen, "not a valid .npz: %s says it inflates to %llu bytes, more than its %llu deflated bytes can (1032 each)",
                            shown(name, show), (unsigned long long)usize, (unsigned long long)csize);
        npz_member *m = &z->members[z->count - 1];
        m->deflated = method == 8;
        m->crc = crc;
        m->csize = csize;
        m->usize = usize;
        m->start = start;
    }
    int oom;
    const npz_member *repeat = first_repeat(z, &oom);
    if (oom) return npz_fail(err, errlen, "out of memory");
    if (repeat) return npz_fail(err, errlen, "not a valid .npz: %s appears twice", shown(repeat->name, show));
    return 0;
}

const npz_member *npz_find(const npz *z, const char *name)
{
    for (int k = 0; k < z->count; k++)
        if (!strcmp(z->members[k].name, name)) return &z->members[k];
    return NULL;
}

int npz_read(const npz *z, const npz_member *m, unsigned char **out, size_t *outlen, int *io_error, char *err,
             size_t errlen)
{
    *out = NULL;
    *outlen = 0;
    if (io_error) *io_error = 0;
    unsigned char *buf = malloc(m->usize ? (size_t)m->usize : 1);
    if (!buf) {
        if (io_error) *io_error = 1;
        return npz_fail(err, errlen, "out of memory for %llu bytes", (unsigned long long)m->usize);
    }
    if (!m->deflated) {
        memcpy(buf, z->bytes + m->start, (size_t)m->usize);
    } else {
        /* damaged and longer are one verdict: zlib (the JS CLI's inflate) may see damage past the
         * declared size before it sees the size exceeded */
        long long n = npz_inflate(z->bytes + m->start, (size_t)m->csize, buf, (size_t)m->usize);
        if (n < 0 || (uint64_t)n != m->usize) {
            free(buf);
            return n < 0 ? npz_fail(err, errlen, "the deflated data is damaged or longer than the %llu bytes the archive says",
                                    (unsigned long long)m->usize)
                         : npz_fail(err, errlen, "inflates to %lld bytes, the archive says %llu", n, (unsigned long long)m->usize);
        }
    }
    if (npz_crc32(buf, (size_t)m->usize) != m->crc) {
        free(buf);
        return npz_fail(err, errlen, "CRC-32 mismatch: the archive is damaged");
    }
    *out = buf;
    *outlen = (size_t)m->usize;
    return 0;
}
