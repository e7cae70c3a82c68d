/* Strict .npy reader and writer; see npy.h for what is accepted. */
#define _POSIX_C_SOURCE 200809L
#include "npy.h"
#include "texts.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const unsigned char MAGIC[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
#define NPY_EXPECTED "'<f4', '<f2', 'bfloat16', '<i4' or '<i8'"

static int fail(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

const char *npy_dtype_name(npy_dtype dtype)
{
    switch (dtype) {
    case NPY_F4: return "<f4";
    case NPY_I4: return "<i4";
    case NPY_I8: return "<i8";
    case NPY_F2: return "<f2";
    case NPY_BF16: return "bfloat16";
    }
    return "?";
}

size_t npy_dtype_size(npy_dtype dtype)
{
    return dtype == NPY_I8 ? 8 : dtype == NPY_F2 || dtype == NPY_BF16 ? 2 : 4;
}

uint32_t npy_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return sign | 0x7f800000u | man << 13;
    if (exp == 0) {
        if (!man) return sign;
        uint32_t e = 113; /* 2^-14 with the implicit bit at 0x400 once normalised */
        while (!(man & 0x400u)) { man <<= 1; e--; }
        return sign | e << 23 | (man & 0x3ffu) << 13;
    }
    return sign | (exp + 112) << 23 | man << 13;
}

uint32_t npy_bf16_to_f32(uint16_t h)
{
    return (uint32_t)h << 16;
}

uint16_t npy_f32_to_bf16(uint32_t f)
{
    if ((f & 0x7f800000u) == 0x7f800000u && (f & 0x7fffffu)) return (uint16_t)((f >> 16) | 0x40u);
    uint32_t rest = f & 0xffffu, keep = f >> 16;
    return (uint16_t)(rest > 0x8000u || (rest == 0x8000u && (keep & 1)) ? keep + 1 : keep);
}

uint16_t npy_f32_to_f16(uint32_t f)
{
    uint32_t sign = (f >> 16) & 0x8000u, exp = (f >> 23) & 0xffu, man = f & 0x7fffffu;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | man >> 13 : 0));
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 0x1f) return (uint16_t)(sign | 0x7c00u);
    uint32_t m, shift;
    if (e <= 0) { /* subnormal (or zero) in binary16: the implicit bit joins the shifted mantissa */
        if (e < -10) return (uint16_t)sign;
        m = man | 0x800000u;
        shift = (uint32_t)(14 - e);
    } else {
        m = man;
        shift = 13;
    }
    uint32_t keep = m >> shift, rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (keep & 1))) keep++; /* may carry into the exponent: right */
    return (uint16_t)(sign | ((e > 0 ? (uint32_t)e << 10 : 0) + keep));
}

char *npy_format_shape(int ndim, const int64_t *shape, char *buf, size_t buflen)
{
    size_t used = 0;
    if (!buflen) return buf;
    buf[0] = '\0';
#define APPEND(...)                                                            \
    do {                                                                       \
        int n_ = snprintf(buf + used, buflen - used, __VA_ARGS__);             \
        if (n_ < 0 || (size_t)n_ >= buflen - used) return buf;                 \
        used += (size_t)n_;                                                    \
    } while (0)
    APPEND("(");
    for (int i = 0; i < ndim; i++) APPEND(i ? ", %lld" : "%lld", (long long)shape[i]);
    APPEND(ndim == 1 ? ",)" : ")");
#undef APPEND
    return buf;
}

/* ---- the header: a Python dict literal ------------------------------------------------- */

typedef struct cursor {
    const char *s;
    size_t pos, len;
} cursor;

static void skip_space(cursor *c)
{
    while (c->pos < c->len &&
           (c->s[c->pos] == ' ' || c->s[c->pos] == '\t' || c->s[c->pos] == '\n' || c->s[c->pos] == '\r'))
        c->pos++;
}

/* Peeks the next non-space character; -1 at the end. */
static int peek(cursor *c)
{
    skip_space(c);
    return c->pos < c->len ? (unsigned char)c->s[c->pos] : -1;
}

/* Describes the character at the cursor for messages. */
static const char *found(cursor *c, char *buf, size_t buflen)
{
    int ch = peek(c);
    if (ch < 0) snprintf(buf, buflen, "the end of the header");
    else if (ch >= 0x20 && ch < 0x7f) snprintf(buf, buflen, "'%c' at byte %zu", ch, c->pos);
    else snprintf(buf, buflen, "byte 0x%02x at byte %zu", ch, c->pos);
    return buf;
}

/* A quoted string without escapes, at most outlen-1 characters. */
static int parse_string(cursor *c, char *out, size_t outlen, const char *what, char *err, size_t errlen)
{
    char f[48];
    int q = peek(c);
    if (q != '\'' && q != '"')
        return fail(err, errlen, "header: expected a quoted string for %s, found %s", what, found(c, f, sizeof f));
    size_t start = ++c->pos, n = 0;
    while (c->pos < c->len && c->s[c->pos] != (char)q) {
        unsigned char ch = (unsigned char)c->s[c->pos];
        if (ch == '\\' || ch < 0x20 || ch >= 0x7f)
            return fail(err, errlen, "header: unsupported character 0x%02x in the string for %s at byte %zu",
                        ch, what, c->pos);
        if (n + 1 >= outlen)
            return fail(err, errlen, "header: the string for %s starting at byte %zu is too long", what, start);
        out[n++] = (char)ch;
        c->pos++;
    }
    if (c->pos >= c->len)
        return fail(err, errlen, "header: unterminated string for %s starting at byte %zu", what, start - 1);
    c->pos++;
    out[n] = '\0';
    return 0;
}

static int expect_char(cursor *c, int ch, const char *context, char *err, size_t errlen)
{
    char f[48];
    if (peek(c) != ch)
        return fail(err, errlen, "header: expected '%c' %s, found %s", ch, context, found(c, f, sizeof f));
    c->pos++;
    return 0;
}

static int parse_bool(cursor *c, int *out, char *err, size_t errlen)
{
    char f[48];
    peek(c);
    size_t rest = c->len - c->pos;
    const char *p = c->s + c->pos;
    size_t n = 0;
    if (rest >= 4 && memcmp(p, "True", 4) == 0) { *out = 1; n = 4; }
    else if (rest >= 5 && memcmp(p, "False", 5) == 0) { *out = 0; n = 5; }
    if (!n || (n < rest && (p[n] == '_' || (p[n] >= 'a' && p[n] <= 'z') || (p[n] >= 'A' && p[n] <= 'Z') ||
                            (p[n] >= '0' && p[n] <= '9'))))
        return fail(err, errlen, "header: expected True or False for 'fortran_order', found %s",
                    found(c, f, sizeof f));
    c->pos += n;
    return 0;
}

/* A non-negative decimal integer (Python 2's 'L' suffix tolerated), no leading zeros. */
static int parse_dim(cursor *c, int64_t *out, char *err, size_t errlen)
{
    char f[48];
    int ch = peek(c);
    if (ch == '-')
        return fail(err, errlen, "header: negative dimension in 'shape' at byte %zu, expected integers >= 0", c->pos);
    if (ch < '0' || ch > '9')
        return fail(err, errlen, "header: expected an integer in 'shape', found %s", found(c, f, sizeof f));
    size_t start = c->pos;
    uint64_t v = 0;
    while (c->pos < c->len && c->s[c->pos] >= '0' && c->s[c->pos] <= '9') {
        unsigned d = (unsigned)(c->s[c->pos] - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10)
            return fail(err, errlen, "header: dimension starting at byte %zu in 'shape' exceeds %lld", start,
                        (long long)INT64_MAX);
        v = v * 10 + d;
        c->pos++;
    }
    if (c->pos - start > 1 && c->s[start] == '0')
        return fail(err, errlen, "header: dimension with a leading zero at byte %zu in 'shape'", start);
    if (c->pos < c->len && (c->s[c->pos] == 'L' || c->s[c->pos] == 'l')) c->pos++;
    *out = (int64_t)v;
    return 0;
}

/* '(' [dim (',' dim)* [',']] ')', where a single dim needs its comma to be a tuple. */
static int parse_shape(cursor *c, npy_array *a, char *err, size_t errlen)
{
    char f[48];
    if (expect_char(c, '(', "to open the tuple of 'shape'", err, errlen)) return -1;
    a->ndim = 0;
    if (peek(c) == ')') { c->pos++; return 0; }
    for (;;) {
        if (a->ndim == NPY_MAX_DIMS)
            return fail(err, errlen, "header: 'shape' has more than %d dimensions", NPY_MAX_DIMS);
        if (parse_dim(c, &a->shape[a->ndim], err, errlen)) return -1;
        a->ndim++;
        int ch = peek(c);
        if (ch == ')') {
            if (a->ndim == 1)
                return fail(err, errlen, "header: 'shape' (%lld) is not a tuple, expected (%lld,)",
                            (long long)a->shape[0], (long long)a->shape[0]);
            c->pos++;
            return 0;
        }
        if (ch != ',')
            return fail(err, errlen, "header: expected ',' or ')' in 'shape', found %s", found(c, f, sizeof f));
        c->pos++;
        if (peek(c) == ')') { c->pos++; return 0; }
    }
}

static int parse_dtype(const char *descr, npy_dtype *out, char *err, size_t errlen)
{
    if (strcmp(descr, "<f4") == 0) { *out = NPY_F4; return 0; }
    if (strcmp(descr, "<i4") == 0) { *out = NPY_I4; return 0; }
    if (strcmp(descr, "<i8") == 0) { *out = NPY_I8; return 0; }
    if (strcmp(descr, "<f2") == 0) { *out = NPY_F2; return 0; }
    if (strcmp(descr, "bfloat16") == 0) { *out = NPY_BF16; return 0; }
    const char *what = "unsupported dtype";
    if (descr[0] == '>') what = "big-endian dtype";
    else if (descr[0] == '|' && (strcmp(descr + 1, "f4") == 0 || strcmp(descr + 1, "i4") == 0 ||
                                 strcmp(descr + 1, "i8") == 0 || strcmp(descr + 1, "f2") == 0))
        what = "dtype without byte order ('|' is for 1-byte types)";
    else if (strcmp(descr, "<V2") == 0 || strcmp(descr, "|V2") == 0)
        what = "2-byte void dtype (np.save writes ml_dtypes' bfloat16 so; its bits cannot be told from any other 2-byte record)";
    return fail(err, errlen, "%s '%s', expected " NPY_EXPECTED, what, descr);
}

static int parse_header(const char *s, size_t len, npy_array *a, char *err, size_t errlen)
{
    cursor c = {s, 0, len};
    char f[48], key[32], descr[32];
    int seen_descr = 0, seen_fortran = 0, seen_shape = 0, fortran = 0;
    if (expect_char(&c, '{', "at the start of the header dict", err, errlen)) return -1;
    while (peek(&c) != '}') {
        if (parse_string(&c, key, sizeof key, "a key", err, errlen)) return -1;
        if (expect_char(&c, ':', "after a key", err, errlen)) return -1;
        int *seen;
        if (strcmp(key, "descr") == 0) {
            seen = &seen_descr;
            if (peek(&c) != '\'' && peek(&c) != '"')
                return fail(err, errlen, "header: 'descr' is not a string (found %s); structured dtypes are not "
                            "supported, expected " NPY_EXPECTED, found(&c, f, sizeof f));
            if (parse_string(&c, descr, sizeof descr, "'descr'", err, errlen)) return -1;
        } else if (strcmp(key, "fortran_order") == 0) {
            seen = &seen_fortran;
            if (parse_bool(&c, &fortran, err, errlen)) return -1;
        } else if (strcmp(key, "shape") == 0) {
            seen = &seen_shape;
            if (parse_shape(&c, a, err, errlen)) return -1;
        } else {
            return fail(err, errlen, "header: unexpected key '%s', expected only 'descr', 'fortran_order' and 'shape'",
                        key);
        }
        if (*seen) return fail(err, errlen, "header: key '%s' appears twice", key);
        *seen = 1;
        int ch = peek(&c);
        if (ch == ',') c.pos++;
        else if (ch != '}')
            return fail(err, errlen, "header: expected ',' or '}' after the value of '%s', found %s", key,
                        found(&c, f, sizeof f));
    }
    c.pos++;
    if (peek(&c) != -1)
        return fail(err, errlen, "header: unexpected %s after the closing '}'", found(&c, f, sizeof f));
    if (!seen_descr || !seen_fortran || !seen_shape)
        return fail(err, errlen, "header: missing key '%s'",
                    !seen_descr ? "descr" : !seen_fortran ? "fortran_order" : "shape");
    memcpy(a->descr, descr, sizeof a->descr);
    if (parse_dtype(descr, &a->dtype, err, errlen)) {
        a->bad_dtype = 1;
        return -1;
    }
    if (fortran)
        return fail(err, errlen, "Fortran-order (column-major) arrays are not supported, expected fortran_order False: "
                    "save np.ascontiguousarray(tensor)");
    return 0;
}

/* ---- the file layout ------------------------------------------------------------------- */

int npy_parse(const unsigned char *bytes, size_t len, npy_array *out, char *err, size_t errlen)
{
    npy_array a;
    memset(&a, 0, sizeof a);
    if (out) memset(out, 0, sizeof *out);
    if (!bytes || len == 0) return fail(err, errlen, "empty file, expected a .npy file");
    size_t m = len < 6 ? len : 6;
    if (memcmp(bytes, MAGIC, m) != 0)
        return fail(err, errlen, "not a .npy file: it does not start with the magic string \\x93NUMPY");
    if (len < 8)
        return fail(err, errlen, "truncated: %zu bytes, too short for the .npy magic and version", len);
    int major = bytes[6], minor = bytes[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0)
        return fail(err, errlen, "unsupported .npy format version %d.%d, expected 1.0, 2.0 or 3.0", major, minor);
    size_t prefix = major == 1 ? 10 : 12;
    if (len < prefix)
        return fail(err, errlen, "truncated: %zu bytes, too short for the version %d.0 preamble of %zu bytes",
                    len, major, prefix);
    uint64_t header_len = (uint64_t)bytes[8] | (uint64_t)bytes[9] << 8;
    if (major != 1) header_len |= (uint64_t)bytes[10] << 16 | (uint64_t)bytes[11] << 24;
    if (header_len > len - prefix)
        return fail(err, errlen, "truncated: the header is %llu bytes but only %zu follow the preamble",
                    (unsigned long long)header_len, len - prefix);
    a.version_major = major;
    if (parse_header((const char *)bytes + prefix, (size_t)header_len, &a, err, errlen)) {
        if (a.bad_dtype && out) {
            memcpy(out->descr, a.descr, sizeof out->descr);
            out->bad_dtype = 1;
        }
        return -1;
    }

    char shape[NPY_MAX_DIMS * 22 + 4];
    npy_format_shape(a.ndim, a.shape, shape, sizeof shape);
    int64_t count = 1;
    int overflow = 0;
    for (int i = 0; i < a.ndim; i++)
        if (__builtin_mul_overflow(count, a.shape[i], &count)) overflow = 1;
    int has_zero = 0;
    for (int i = 0; i < a.ndim; i++) has_zero |= a.shape[i] == 0;
    if (has_zero) { count = 0; overflow = 0; }
    size_t item = npy_dtype_size(a.dtype), data_bytes = 0;
    if (overflow || __builtin_mul_overflow((uint64_t)count, (uint64_t)item, &data_bytes) ||
        data_bytes > (size_t)INT64_MAX)
        return fail(err, errlen, "shape %s of '%s' has more elements than fit in 64-bit byte sizes", shape,
                    npy_dtype_name(a.dtype));
    size_t data_offset = prefix + (size_t)header_len, have = len - data_offset;
    if (have < data_bytes)
        return fail(err, errlen, "truncated: shape %s of '%s' needs %zu data bytes, the file has %zu", shape,
                    npy_dtype_name(a.dtype), data_bytes, have);
    if (have > data_bytes)
        return fail(err, errlen, "%zu bytes of trailing data after the %zu that shape %s of '%s' needs",
                    have - data_bytes, data_bytes, shape, npy_dtype_name(a.dtype));
    a.count = count;
    a.data_offset = data_offset;
    a.data_bytes = data_bytes;
    if (out) *out = a;
    return 0;
}

/* ---- files ----------------------------------------------------------------------------- */

static int read_file(const char *path, unsigned char **bytes, size_t *len, int *io_error, char *err, size_t errlen)
{
    *bytes = NULL;
    *len = 0;
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever;
     * it changes nothing for the regular files accepted below. */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        if (io_error) *io_error = 0;
        return fail(err, errlen, TEXT_CANNOT_OPEN, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fail(err, errlen, TEXT_CANNOT_STAT, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return fail(err, errlen, TEXT_NOT_REGULAR_FILE);
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX - 1) {
        close(fd);
        return fail(err, errlen, "file of %lld bytes is too large", (long long)st.st_size);
    }
    size_t size = (size_t)st.st_size, got = 0;
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf) {
        close(fd);
        if (io_error) *io_error = 1;
        return fail(err, errlen, TEXT_OUT_OF_MEMORY_READING, size);
    }
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int e = errno;
            free(buf);
            close(fd);
            if (io_error) *io_error = 1;
            return fail(err, errlen, TEXT_READ_ERROR, strerror(e));
        }
        if (n == 0) break; /* shrank while reading: parse what is there */
        got += (size_t)n;
    }
    close(fd);
    *bytes = buf;
    *len = got;
    return 0;
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static int load(const char *path, npy_array *arr, unsigned char **bytes, int *io_error, char *err, size_t errlen)
{
    size_t len;
    if (io_error) *io_error = 0;
    if (read_file(path, bytes, &len, io_error, err, errlen)) return -1;
    if (npy_parse(*bytes, len, arr, err, errlen)) {
        free(*bytes);
        *bytes = NULL;
        return -1;
    }
    return 0;
}

int npy_read_whole(const char *path, unsigned char **bytes, size_t *len, int *io_error, char *err, size_t errlen)
{
    if (io_error) *io_error = 0;
    return read_file(path, bytes, len, io_error, err, errlen);
}

static int decode_f32(unsigned char *bytes, npy_array *arr, float **data, int *io_error, char *err, size_t errlen);
static int decode_i64(unsigned char *bytes, npy_array *arr, int64_t **data, int *io_error, char *err, size_t errlen);

int npy_load_f32(const char *path, npy_array *arr, float **data, int *io_error, char *err, size_t errlen)
{
    unsigned char *bytes;
    *data = NULL;
    if (load(path, arr, &bytes, io_error, err, errlen)) return -1;
    return decode_f32(bytes, arr, data, io_error, err, errlen);
}

int npy_load_i64(const char *path, npy_array *arr, int64_t **data, int *io_error, char *err, size_t errlen)
{
    unsigned char *bytes;
    *data = NULL;
    if (load(path, arr, &bytes, io_error, err, errlen)) return -1;
    return decode_i64(bytes, arr, data, io_error, err, errlen);
}

/* Takes over bytes (parsed into arr): the floats, or -1 with err. */
static int decode_f32(unsigned char *bytes, npy_array *arr, float **data, int *io_error, char *err, size_t errlen)
{
    if (arr->dtype == NPY_I4 || arr->dtype == NPY_I8) {
        arr->bad_dtype = 1;
        free(bytes);
        return fail(err, errlen, "dtype '%s', expected '<f4', '<f2' or 'bfloat16'", npy_dtype_name(arr->dtype));
    }
    const unsigned char *src = bytes + arr->data_offset;
    if (arr->dtype != NPY_F4) {
        float *out = (uint64_t)arr->count > SIZE_MAX / 4 ? NULL : malloc(arr->count ? (size_t)arr->count * 4 : 1);
        if (!out) {
            free(bytes);
            if (io_error) *io_error = 1;
            return fail(err, errlen, "out of memory for %lld floats", (long long)arr->count);
        }
        for (int64_t i = 0; i < arr->count; i++) {
            uint16_t h = (uint16_t)(src[2 * i] | src[2 * i + 1] << 8);
            uint32_t u = arr->dtype == NPY_F2 ? npy_f16_to_f32(h) : npy_bf16_to_f32(h);
            memcpy(out + i, &u, 4);
        }
        free(bytes);
        *data = out;
        return 0;
    }
    /* Decode in place, moving the data to the start of the block so it is float-aligned;
     * element i is read before anything at or after its source is written. */
    for (int64_t i = 0; i < arr->count; i++) {
        uint32_t u = le32(src + 4 * i);
        memcpy(bytes + 4 * i, &u, 4);
    }
    unsigned char *shrunk = realloc(bytes, arr->data_bytes ? arr->data_bytes : 1);
    *data = (float *)(void *)(shrunk ? shrunk : bytes);
    return 0;
}

static int decode_i64(unsigned char *bytes, npy_array *arr, int64_t **data, int *io_error, char *err, size_t errlen)
{
    if (arr->dtype != NPY_I4 && arr->dtype != NPY_I8) {
        arr->bad_dtype = 1;
        free(bytes);
        return fail(err, errlen, "dtype '%s', expected '<i8' or '<i4'", npy_dtype_name(arr->dtype));
    }
    /* count * 8 fits: count * item size <= the file size, and item size >= 4 */
    int64_t *out = malloc(arr->count ? (size_t)arr->count * 8 : 1);
    if (!out) {
        free(bytes);
        if (io_error) *io_error = 1;
        return fail(err, errlen, "out of memory for %lld integers", (long long)arr->count);
    }
    const unsigned char *src = bytes + arr->data_offset;
    for (int64_t i = 0; i < arr->count; i++)
        out[i] = arr->dtype == NPY_I8 ? (int64_t)le64(src + 8 * i) : (int64_t)(int32_t)le32(src + 4 * i);
    free(bytes);
    *data = out;
    return 0;
}

size_t npy_write_header(unsigned char *buf, size_t buflen, npy_dtype dtype, int ndim, const int64_t *shape)
{
    char dict[NPY_HEADER_MAX], sh[NPY_MAX_DIMS * 22 + 4];
    if (ndim < 0 || ndim > NPY_MAX_DIMS) return 0;
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                     npy_dtype_name(dtype), npy_format_shape(ndim, shape, sh, sizeof sh));
    if (n < 0 || (size_t)n >= sizeof dict) return 0;
    size_t total = 10 + (size_t)n + 1;
    total = (total + 63) / 64 * 64;
    if (total > buflen || total - 10 > 65535) return 0;
    memcpy(buf, MAGIC, 6);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (unsigned char)((total - 10) & 0xff);
    buf[9] = (unsigned char)((total - 10) >> 8);
    memcpy(buf + 10, dict, (size_t)n);
    memset(buf + 10 + n, ' ', total - 10 - (size_t)n - 1);
    buf[total - 1] = '\n';
    return total;
}

static int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int npy_write_fd(int fd, npy_dtype dtype, int ndim, const int64_t *shape, const void *data, char *err, size_t errlen)
{
    unsigned char header[NPY_HEADER_MAX], chunk[1 << 16];
    size_t hl = npy_write_header(header, sizeof header, dtype, ndim, shape);
    if (!hl) return fail(err, errlen, "cannot encode a header for %d dimensions", ndim);
    int64_t count = 1;
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0 || __builtin_mul_overflow(count, shape[i], &count))
            return fail(err, errlen, "invalid shape");
    int ok = write_all(fd, header, hl) == 0;
    size_t item = npy_dtype_size(dtype), used = 0;
    const unsigned char *src = data;
    for (int64_t i = 0; ok && i < count; i++) {
        uint64_t u = 0;
        if (item == 2) { uint16_t v; memcpy(&v, src + 2 * i, 2); u = v; }
        else if (item == 4) { uint32_t v; memcpy(&v, src + 4 * i, 4); u = v; }
        else memcpy(&u, src + 8 * i, 8);
        for (size_t k = 0; k < item; k++) chunk[used++] = (unsigned char)(u >> (8 * k));
        if (used == sizeof chunk) { ok = write_all(fd, chunk, used) == 0; used = 0; }
    }
    if (ok && used) ok = write_all(fd, chunk, used) == 0;
    if (!ok) return fail(err, errlen, "write error: %s", strerror(errno ? errno : EIO));
    return 0;
}

int npy_save(const char *path, npy_dtype dtype, int ndim, const int64_t *shape, const void *data, char *err,
             size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) return fail(err, errlen, "cannot create: %s", strerror(errno));
    int rc = npy_write_fd(fd, dtype, ndim, shape, data, err, errlen);
    if (close(fd) != 0 && rc == 0) rc = fail(err, errlen, "write error: %s", strerror(errno));
    return rc;
}
