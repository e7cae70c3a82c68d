/* libFuzzer target: the .npy reader (src/cli/npy.c) on arbitrary bytes.
 *
 * Beyond "no crash, no leak" (ASan, UBSan, LeakSanitizer) it checks what a caller relies on:
 *   - a refusal is one non-empty line, NUL-terminated in any errlen (also 0 or tiny), and the
 *     same whether or not err and out are given;
 *   - an accepted file is described exactly: count is the product of the shape, the data is
 *     exactly the bytes after the header, and the header NumPy's writer would emit for that
 *     dtype and shape parses back to the same array;
 *   - the file loaders (npy_load_f32 / npy_load_i64) agree with npy_parse on the same bytes and
 *     decode every element to the value its little-endian bytes hold ('<f2' and 'bfloat16'
 *     widened exactly). */
#define _POSIX_C_SOURCE 200809L   /* strnlen, getpid, access */
#include "npy.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char file_path[64];

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_npy: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

static void remove_scratch(void)
{
    unlink(file_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(file_path, sizeof file_path, "%s/fuzz_npy.%ld.npy", dir, (long)getpid());
    atexit(remove_scratch);
    return 0;
}

static void check_message(const char *err, size_t errlen)
{
    if (errlen == 0) return;
    const size_t n = strnlen(err, errlen);
    if (n == errlen) die("error message not NUL-terminated", NULL);
    if (errlen > 1 && n == 0) die("empty error message", NULL);
    if (strchr(err, '\n')) die("error message spans lines", err);
}

static void same_array(const npy_array *a, const npy_array *b, const char *what)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim || a->count != b->count || a->data_bytes != b->data_bytes ||
        memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]) != 0)
        die("arrays differ", what);
}

/* The loaders on the same bytes through a file. */
static void check_loaders(const uint8_t *data, size_t size, int parsed, const npy_array *arr)
{
    FILE *f = fopen(file_path, "wb");
    if (!f) die("cannot write the scratch file", file_path);
    if (size && fwrite(data, 1, size, f) != size) die("cannot write the scratch file", file_path);
    fclose(f);

    char err[256];
    npy_array got;
    float *floats = NULL;
    int64_t *ints = NULL;
    int io_error = -1;
    const int rf = npy_load_f32(file_path, &got, &floats, &io_error, err, sizeof err);
    const int is_float = arr->dtype == NPY_F4 || arr->dtype == NPY_F2 || arr->dtype == NPY_BF16;
    const int want_f = parsed == 0 && is_float ? 0 : -1;
    if (rf != want_f) die("npy_load_f32 disagrees with npy_parse", rf ? err : "accepted");
    if (rf == 0) {
        same_array(arr, &got, "npy_load_f32");
        if (!floats) die("npy_load_f32 returned no data", NULL);
        /* host order is little-endian here (x86-64), so the bits must equal the file's bytes, or
         * for half precision their exact widening (npy_f16_to_f32 is checked on all 65536 values
         * by tests/c/test_npy.c) */
        if (arr->dtype == NPY_F4 && arr->count && memcmp(floats, data + arr->data_offset, arr->data_bytes) != 0)
            die("npy_load_f32 decoded different bits", NULL);
        for (int64_t i = 0; arr->dtype != NPY_F4 && i < arr->count; i++) {
            const uint8_t *h = data + arr->data_offset + 2 * i;
            const uint16_t bits = (uint16_t)(h[0] | h[1] << 8);
            const uint32_t want = arr->dtype == NPY_F2 ? npy_f16_to_f32(bits) : npy_bf16_to_f32(bits);
            uint32_t got_bits;
            memcpy(&got_bits, &floats[i], 4);
            if (got_bits != want) die("npy_load_f32 widened a half-precision value wrongly", NULL);
        }
    } else {
        if (floats) die("npy_load_f32 failed but returned data", NULL);
        if (io_error != 0) die("npy_load_f32 reported an I/O error for bad content", err);
        check_message(err, sizeof err);
    }
    free(floats);

    const int ri = npy_load_i64(file_path, &got, &ints, &io_error, err, sizeof err);
    const int want_i = parsed == 0 && (arr->dtype == NPY_I4 || arr->dtype == NPY_I8) ? 0 : -1;
    if (ri != want_i) die("npy_load_i64 disagrees with npy_parse", ri ? err : "accepted");
    if (ri == 0) {
        same_array(arr, &got, "npy_load_i64");
        if (!ints) die("npy_load_i64 returned no data", NULL);
        const uint8_t *src = data + arr->data_offset;
        for (int64_t i = 0; i < arr->count; i++) {
            int64_t want;
            if (arr->dtype == NPY_I8) {
                memcpy(&want, src + 8 * i, 8);
            } else {
                int32_t v;
                memcpy(&v, src + 4 * i, 4);
                want = v;
            }
            if (ints[i] != want) die("npy_load_i64 decoded a different integer", NULL);
        }
    } else {
        if (ints) die("npy_load_i64 failed but returned data", NULL);
        if (io_error != 0) die("npy_load_i64 reported an I/O error for bad content", err);
        check_message(err, sizeof err);
    }
    free(ints);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy: ASan then flags any read past the end of the "file". */
    uint8_t *bytes = malloc(size ? size : 1);
    if (!bytes) abort();
    if (size) memcpy(bytes, data, size);

    char err[256];
    npy_array arr;
    memset(err, 'x', sizeof err);
    const int rc = npy_parse(bytes, size, &arr, err, sizeof err);
    if (rc != 0 && rc != -1) die("npy_parse returned neither 0 nor -1", NULL);

    /* The same answer without err, without out, and with tiny message buffers. */
    npy_array other;
    if (npy_parse(bytes, size, &other, NULL, 0) != rc) die("result depends on err", NULL);
    if (npy_parse(bytes, size, NULL, err, sizeof err) != rc) die("result depends on out", NULL);
    for (size_t errlen = 0; errlen < 4; errlen++) {
        char tiny[4] = {'x', 'x', 'x', 'x'};
        if (npy_parse(bytes, size, &other, tiny, errlen) != rc) die("result depends on errlen", NULL);
        if (rc != 0) check_message(tiny, errlen);
        for (size_t k = errlen; k < 4; k++)
            if (tiny[k] != 'x') die("wrote past errlen", NULL);
    }

    if (rc != 0) {
        check_message(err, sizeof err);
    } else {
        if (arr.version_major < 1 || arr.version_major > 3) die("version out of range", NULL);
        if (arr.dtype != NPY_F4 && arr.dtype != NPY_I4 && arr.dtype != NPY_I8 && arr.dtype != NPY_F2 && arr.dtype != NPY_BF16)
            die("dtype out of range", NULL);
        if (arr.ndim < 0 || arr.ndim > NPY_MAX_DIMS) die("ndim out of range", NULL);
        __int128 count = 1;
        int zero = 0;
        for (int i = 0; i < arr.ndim; i++) {
            if (arr.shape[i] < 0) die("negative dimension accepted", NULL);
            zero |= arr.shape[i] == 0;
        }
        for (int i = 0; !zero && i < arr.ndim; i++) {
            count *= arr.shape[i];
            if (count > INT64_MAX) die("shape product overflows but was accepted", NULL);
        }
        if (zero) count = 0;
        if ((__int128)arr.count != count) die("count is not the product of the shape", NULL);
        if ((__int128)arr.data_bytes != count * (__int128)npy_dtype_size(arr.dtype)) die("data_bytes is wrong", NULL);
        if (arr.data_offset < 10 || arr.data_offset > size || arr.data_offset + arr.data_bytes != size)
            die("data is not exactly the bytes after the header", NULL);
        /* the format: magic (6), version (2), header length (2 bytes in 1.0, 4 after), header */
        const size_t header_len = arr.version_major == 1
            ? (size_t)bytes[8] | (size_t)bytes[9] << 8
            : (size_t)bytes[8] | (size_t)bytes[9] << 8 | (size_t)bytes[10] << 16 | (size_t)bytes[11] << 24;
        if (bytes[6] != arr.version_major || bytes[7] != 0) die("version differs from the file's bytes", NULL);
        if (arr.data_offset != (arr.version_major == 1 ? 10u : 12u) + header_len)
            die("data does not start right after the header the file declares", NULL);

        /* What NumPy's writer would emit for this array parses back to the same array. */
        unsigned char header[NPY_HEADER_MAX];
        const size_t hl = npy_write_header(header, sizeof header, arr.dtype, arr.ndim, arr.shape);
        if (hl == 0) die("npy_write_header cannot encode an accepted shape", NULL);
        uint8_t *again = malloc(hl + arr.data_bytes);
        if (!again) abort();
        memcpy(again, header, hl);
        memcpy(again + hl, bytes + arr.data_offset, arr.data_bytes);
        npy_array round;
        if (npy_parse(again, hl + arr.data_bytes, &round, err, sizeof err) != 0) die("rewritten header refused", err);
        same_array(&arr, &round, "after rewriting the header");
        free(again);

        char shape_text[8];
        npy_format_shape(arr.ndim, arr.shape, shape_text, sizeof shape_text);
        if (strnlen(shape_text, sizeof shape_text) == sizeof shape_text) die("npy_format_shape overran", NULL);
    }
    check_loaders(bytes, size, rc, &arr);
    free(bytes);
    return 0;
}
