/* NumPy .npy files: a strict reader and a small writer, for the command line.
 *
 * Accepted: format versions 1.0, 2.0 and 3.0; dtypes '<f4', '<f2', 'bfloat16', '<i4', '<i8'; C order; any shape
 * (including () and zero-sized dimensions) whose element count and byte size fit in 64 bits
 * and size_t. Everything else is refused with a one-line message: wrong magic, unsupported
 * version, big-endian or '|' byte order on a multi-byte type, Fortran order, another dtype, a
 * header that is not a well-formed Python dict literal with exactly the keys 'descr',
 * 'fortran_order' and 'shape', a shape whose size overflows, a truncated file, or bytes after
 * the data. These files come from other people's programs, so the parser never trusts a length.
 * 'bfloat16' is the descr str(ml_dtypes.bfloat16) gives, as written by a hand-made header; plain
 * np.save writes ml_dtypes' bfloat16 as '<V2', a 2-byte void that says nothing about its bits,
 * so '<V2' is refused (see npy_void2_hint).
 *
 * npy_parse works on a memory buffer and never allocates (it is the fuzz target); the
 * load/save wrappers do the file I/O and the conversion to host floats and int64.
 */
#ifndef MSDA_NPY_H
#define MSDA_NPY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NPY_MAX_DIMS 32

/* Room for any message this reader writes into err, whole: they never hold a path, and at most a
 * 32-dimension shape, a descr and a key (the CLIs print messages whole, never cut). */
enum { NPY_ERR_MAX = 2048 };

typedef enum npy_dtype {
    NPY_F4 = 0,   /* '<f4' little-endian float32 */
    NPY_I4 = 1,   /* '<i4' little-endian int32 */
    NPY_I8 = 2,   /* '<i8' little-endian int64 */
    NPY_F2 = 3,   /* '<f2' little-endian IEEE binary16 */
    NPY_BF16 = 4  /* 'bfloat16' little-endian bfloat16 (the top half of a float32) */
} npy_dtype;

typedef struct npy_array {
    int version_major;           /* 1, 2 or 3 */
    npy_dtype dtype;
    int ndim;                    /* 0 .. NPY_MAX_DIMS */
    int64_t shape[NPY_MAX_DIMS];
    int64_t count;               /* product of shape (1 for shape ()) */
    size_t data_offset;          /* where the data starts in the parsed bytes */
    size_t data_bytes;           /* count * item size, exactly the bytes after the header */
    char descr[32];              /* the header's 'descr' as written */
    int bad_dtype;               /* set (with descr) when the file was refused for its dtype alone:
                                  * by npy_parse, or by a load_* that wants another kind */
} npy_array;

/* Parses a whole .npy file held in bytes[0..len). Returns 0 and fills *out, or -1 with a
 * one-line message in err (which may be NULL; errlen bytes, always NUL-terminated). */
int npy_parse(const unsigned char *bytes, size_t len, npy_array *out, char *err, size_t errlen);

/* "'<f4'", "'<f2'", "'bfloat16'", "'<i4'", "'<i8'" without quotes; the bytes per element. */
const char *npy_dtype_name(npy_dtype dtype);
size_t npy_dtype_size(npy_dtype dtype);

/* Formats a shape the way NumPy prints it: "()", "(3,)", "(2, 3)". Returns buf. */
char *npy_format_shape(int ndim, const int64_t *shape, char *buf, size_t buflen);

/* Reads and parses a file. On success *data is a malloc'd array of arr->count elements
 * (at least one byte allocated), converted to host order: float for '<f4', '<f2' or 'bfloat16'
 * (load_f32 refuses other dtypes; the half-precision ones are widened exactly by
 * npy_f16_to_f32 / npy_bf16_to_f32), int64_t for '<i4' or '<i8' (load_i64 refuses floats); the caller
 * frees it. On failure returns -1, *data is NULL and err says what is wrong, without the
 * file name (callers prefix it). Sets *io_error to 1 when the failure was an I/O or memory
 * problem rather than bad content (may be NULL). */
int npy_load_f32(const char *path, npy_array *arr, float **data, int *io_error, char *err, size_t errlen);
int npy_load_i64(const char *path, npy_array *arr, int64_t **data, int *io_error, char *err, size_t errlen);
/* A whole regular file into a malloc'd buffer (as the loaders read: a FIFO is not waited on).
 * 0, or -1 with err ("cannot open: ...") and *io_error. */
int npy_read_whole(const char *path, unsigned char **bytes, size_t *len, int *io_error, char *err, size_t errlen);

/* The header NumPy writes for version 1.0: magic, version, length, the dict, padded with
 * spaces and a final '\n' so the data starts at a multiple of 64 bytes. Returns the header
 * length written into buf, or 0 if it does not fit in buflen (NPY_HEADER_MAX always does)
 * or ndim is outside 0 .. NPY_MAX_DIMS. */
#define NPY_HEADER_MAX 1024
size_t npy_write_header(unsigned char *buf, size_t buflen, npy_dtype dtype, int ndim, const int64_t *shape);

/* Writes a version 1.0 .npy file to an open descriptor (the caller opens and closes it, with
 * whatever flags it needs). Returns 0, or -1 with errno-based text in err. */
int npy_write_fd(int fd, npy_dtype dtype, int ndim, const int64_t *shape, const void *data, char *err, size_t errlen);

/* Exact widening of a half-precision value's bits to float32's bits, by integer operations
 * (subnormals normalised, infinities kept, a NaN keeps its sign and payload, not quietened). */
uint32_t npy_f16_to_f32(uint16_t h);
uint32_t npy_bf16_to_f32(uint16_t h);
/* float32 bits to binary16 bits, rounded to nearest, ties to even (overflow to infinity; a NaN
 * keeps its sign and the top of its payload, quiet). */
uint16_t npy_f32_to_f16(uint32_t f);
/* float32 bits to bfloat16 bits, rounded to nearest, ties to even (a NaN stays a quiet NaN). */
uint16_t npy_f32_to_bf16(uint32_t f);

/* Writes a version 1.0 file of dtype with the given shape from host-order data (float,
 * int32_t or int64_t per dtype; uint16_t bits for '<f2' and 'bfloat16'). Returns 0, or -1 with errno-based text in err. */
int npy_save(const char *path, npy_dtype dtype, int ndim, const int64_t *shape, const void *data,
             char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
