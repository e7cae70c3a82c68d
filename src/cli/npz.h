/* NumPy .npz archives for the command line: zip files of .npy members, stored (np.savez) or
 * deflated (np.savez_compressed), read strictly (the twin of bindings/cli/npz.js: the same
 * refusals in the same words). The central directory (zip64 too), each local header and each
 * member's CRC-32 are checked; nothing in the file is trusted as a length. Deflate is decoded
 * here (RFC 1951), so the CLI needs no library for it. */
#ifndef MSDA_NPZ_H
#define MSDA_NPZ_H

#include <stddef.h>
#include <stdint.h>

typedef struct npz_member {
    char *name;
    int deflated;
    uint32_t crc;
    uint64_t csize, usize, start;
} npz_member;

typedef struct npz {
    const unsigned char *bytes;
    size_t len;
    int count;
    npz_member *members;
} npz;

/* The most bytes a member may hold: 4 GiB less one, what a wasm32 heap (the JS CLI) could. */
#define NPZ_MAX_MEMBER 0xffffffffu

/* Does the buffer start like a zip archive ("PK\3\4")? */
int npz_looks_like_zip(const unsigned char *bytes, size_t len);

/* Parses the archive's directory (bytes must outlive z). 0, or -1 with a message in err and
 * nothing left allocated. */
int npz_parse(const unsigned char *bytes, size_t len, npz *z, char *err, size_t errlen);

/* The member called name, or NULL. */
const npz_member *npz_find(const npz *z, const char *name);

/* A malloc'd copy of the member's bytes (inflated, size and CRC checked). 0, or -1 with a
 * message in err (*io_error set when the failure is memory). */
int npz_read(const npz *z, const npz_member *m, unsigned char **out, size_t *outlen, int *io_error, char *err,
             size_t errlen);

void npz_free(npz *z);

/* name as messages show it: bytes outside printable ASCII and backslashes as \\xNN, cut to 200
 * characters and "..." (bindings/cli/npz.js shown). */
enum { NPZ_SHOWN = 256 };
const char *npz_shown(const char *name, char buf[NPZ_SHOWN]);

/* Raw deflate (RFC 1951) of in[0..inlen) into out[0..outcap): the bytes written, or -1 for
 * damaged data, -2 for more than outcap bytes. */
long long npz_inflate(const unsigned char *in, size_t inlen, unsigned char *out, size_t outcap);

uint32_t npz_crc32(const unsigned char *bytes, size_t len);

#endif
