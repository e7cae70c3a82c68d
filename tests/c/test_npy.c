/* The .npy reader and writer: round trips in every accepted dtype and version, the exact header
 * NumPy writes, the Python-literal forms NumPy accepts, and one test per malformed class, each
 * checking the refusal and the words of its message. */
#define _POSIX_C_SOURCE 200809L
#include "npy.h" /* the CLI library (libmsdacli.a): the CLI is not part of libmsda */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/msda-test-npy-XXXXXX";

/* A .npy file image: magic, version, header length, dict (padded to 64 with a newline when
 * pad), then data. */
typedef struct image { unsigned char bytes[8192]; size_t len; } image;

static void build(image *im, int major, int minor, const char *dict, int pad, const void *data, size_t data_len)
{
    size_t prefix = major == 1 ? 10 : 12, n = strlen(dict), hl = n;
    if (pad) hl = (prefix + n + 1 + 63) / 64 * 64 - prefix;
    memcpy(im->bytes, "\x93NUMPY", 6);
    im->bytes[6] = (unsigned char)major;
    im->bytes[7] = (unsigned char)minor;
    for (size_t k = 0; k < prefix - 8; k++) im->bytes[8 + k] = (unsigned char)(hl >> (8 * k));
    memcpy(im->bytes + prefix, dict, n);
    if (pad) {
        memset(im->bytes + prefix + n, ' ', hl - n - 1);
        im->bytes[prefix + hl - 1] = '\n';
    }
    memcpy(im->bytes + prefix + hl, data, data_len);
    im->len = prefix + hl + data_len;
}

static const float SIX[6] = {1.5f, -2.0f, 0.0f, 3.25f, -0.0f, 1e-30f};

static int parses(const image *im, npy_array *a, char *err, size_t errlen)
{
    return npy_parse(im->bytes, im->len, a, err, errlen) == 0;
}

/* Refused, with `words` in the message. */
static void refused(const char *what, const image *im, const char *words)
{
    char err[320] = "";
    npy_array a;
    int ok = parses(im, &a, err, sizeof err);
    tu_check(!ok && strstr(err, words) != NULL, "%s: expected refusal mentioning \"%s\", got %s \"%s\"", what, words,
             ok ? "acceptance" : "refusal", err);
}

static void accepted(const char *what, const image *im, npy_dtype dtype, int ndim, const int64_t *shape)
{
    char err[320] = "";
    npy_array a;
    int ok = parses(im, &a, err, sizeof err);
    int same = ok && a.dtype == dtype && a.ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = a.shape[i] == shape[i];
    tu_check(same, "%s: expected acceptance as %s ndim %d, got %s", what, npy_dtype_name(dtype), ndim,
             ok ? "a different dtype/shape" : err);
}

static void test_numpy_header_bytes(void)
{
    /* What np.save writes for np.zeros((2, 3), '<f4'): header length 118 ('v'), data at 128. */
    unsigned char h[NPY_HEADER_MAX];
    const int64_t shape[2] = {2, 3};
    size_t n = npy_write_header(h, sizeof h, NPY_F4, 2, shape);
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    int ok = n == 128 && memcmp(h, "\x93NUMPY\x01\x00\x76\x00", 10) == 0 && memcmp(h + 10, dict, strlen(dict)) == 0 &&
             h[127] == '\n' && h[126] == ' ';
    tu_check(ok, "header for (2, 3) <f4: expected NumPy's 128 bytes, got %zu", n);
    const int64_t one = 3;
    n = npy_write_header(h, sizeof h, NPY_I8, 1, &one);
    tu_check(n % 64 == 0 && strstr((char *)h + 10, "'shape': (3,), }") && strstr((char *)h + 10, "'<i8'"),
             "header for (3,) <i8 is NumPy's form and 64-aligned");
    n = npy_write_header(h, sizeof h, NPY_F4, 0, NULL);
    tu_check(n == 128 && strstr((char *)h + 10, "'shape': (), }"), "header for () is 128 bytes with ()");
    int64_t many[NPY_MAX_DIMS];
    for (int i = 0; i < NPY_MAX_DIMS; i++) many[i] = INT64_MAX;
    n = npy_write_header(h, sizeof h, NPY_F4, NPY_MAX_DIMS, many);
    tu_check(n > 0 && n % 64 == 0, "header with %d dimensions of 19 digits fits NPY_HEADER_MAX", NPY_MAX_DIMS);
}

static void test_round_trips(void)
{
    char path[256], err[320];
    snprintf(path, sizeof path, "%s/a.npy", tmpdir);
    /* float32 in several shapes, including () and a zero-sized one */
    const struct { int ndim; int64_t shape[3]; } shapes[] = {{2, {2, 3}}, {1, {6}}, {3, {1, 2, 3}}, {0, {0}}, {1, {0}}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int ndim = shapes[s].ndim;
        int64_t count = 1;
        for (int i = 0; i < ndim; i++) count *= shapes[s].shape[i];
        int rc = npy_save(path, NPY_F4, ndim, shapes[s].shape, SIX, err, sizeof err);
        npy_array a;
        float *back = NULL;
        int io = 0;
        int rc2 = rc ? -1 : npy_load_f32(path, &a, &back, &io, err, sizeof err);
        int ok = rc == 0 && rc2 == 0 && a.ndim == ndim && a.count == count && a.data_offset % 64 == 0;
        for (int i = 0; ok && i < ndim; i++) ok = a.shape[i] == shapes[s].shape[i];
        if (ok && count) ok = memcmp(back, SIX, (size_t)count * 4) == 0;
        tu_check(ok, "round trip <f4 shape %d-d #%zu: %s", ndim, s, rc || rc2 ? err : "data or shape differ");
        free(back);
    }
    /* int32 and int64 come back as int64, sign included */
    const int32_t i4[4] = {0, -1, 2147483647, -2147483647 - 1};
    const int64_t i8[4] = {0, -1, INT64_MAX, INT64_MIN};
    const int64_t four = 4;
    for (int k = 0; k < 2; k++) {
        int rc = npy_save(path, k ? NPY_I8 : NPY_I4, 1, &four, k ? (const void *)i8 : (const void *)i4, err, sizeof err);
        npy_array a;
        int64_t *back = NULL;
        int rc2 = rc ? -1 : npy_load_i64(path, &a, &back, NULL, err, sizeof err);
        int ok = rc == 0 && rc2 == 0 && a.count == 4 && a.dtype == (k ? NPY_I8 : NPY_I4);
        for (int i = 0; ok && i < 4; i++) ok = back[i] == (k ? i8[i] : i4[i]);
        tu_check(ok, "round trip %s: %s", k ? "<i8" : "<i4", rc || rc2 ? err : "values differ");
        free(back);
    }
    /* the loaders refuse the other kind of dtype */
    npy_array a;
    float *f = NULL;
    int64_t *ints = NULL;
    npy_save(path, NPY_I8, 1, &four, i8, err, sizeof err);
    int rc = npy_load_f32(path, &a, &f, NULL, err, sizeof err);
    tu_check(rc == -1 && f == NULL && strstr(err, "dtype '<i8', expected '<f4'"), "load_f32 refuses <i8: %s", err);
    npy_save(path, NPY_F4, 1, &four, SIX, err, sizeof err);
    rc = npy_load_i64(path, &a, &ints, NULL, err, sizeof err);
    tu_check(rc == -1 && ints == NULL && strstr(err, "dtype '<f4', expected '<i8' or '<i4'"), "load_i64 refuses <f4: %s",
             err);
    /* missing file: not an I/O error (bad input), message from errno */
    int io = 7;
    snprintf(path, sizeof path, "%s/missing.npy", tmpdir);
    rc = npy_load_f32(path, &a, &f, &io, err, sizeof err);
    tu_check(rc == -1 && io == 0 && strstr(err, "cannot open: No such file"), "missing file refused: %s", err);
    rc = npy_load_f32(tmpdir, &a, &f, &io, err, sizeof err);
    tu_check(rc == -1 && strstr(err, "not a regular file"), "a directory refused: %s", err);
    /* unwritable path */
    snprintf(path, sizeof path, "%s/no/such/dir/a.npy", tmpdir);
    rc = npy_save(path, NPY_F4, 1, &four, SIX, err, sizeof err);
    tu_check(rc == -1 && strstr(err, "cannot create"), "save into a missing directory refused: %s", err);
}

static void test_versions_and_forms(void)
{
    image im;
    const int64_t s23[2] = {2, 3}, s6[1] = {6}, s3[1] = {3};
    const char *d23 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    build(&im, 1, 0, d23, 1, SIX, 24);
    accepted("version 1.0", &im, NPY_F4, 2, s23);
    build(&im, 2, 0, d23, 1, SIX, 24);
    accepted("version 2.0", &im, NPY_F4, 2, s23);
    build(&im, 3, 0, d23, 1, SIX, 24);
    accepted("version 3.0", &im, NPY_F4, 2, s23);
    build(&im, 1, 0, d23, 0, SIX, 24);
    accepted("no padding, no newline", &im, NPY_F4, 2, s23);
    build(&im, 1, 0, "{\"shape\":(6,),\"fortran_order\":False,\"descr\":\"<f4\"}", 1, SIX, 24);
    accepted("double quotes, other key order, no trailing comma", &im, NPY_F4, 1, s6);
    build(&im, 1, 0, "{\n  'descr' : '<i4' ,\n  'fortran_order' : False ,\n  'shape' : ( 6 , ) ,\n}", 1, SIX, 24);
    accepted("whitespace and newlines between tokens", &im, NPY_I4, 1, s6);
    build(&im, 1, 0, "{'descr': '<i8', 'fortran_order': False, 'shape': (3L,), }", 1, SIX, 24);
    accepted("Python 2 long suffix", &im, NPY_I8, 1, s3);
    build(&im, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 1, SIX, 4);
    accepted("scalar shape ()", &im, NPY_F4, 0, s3);
    build(&im, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3,), }", 1, SIX, 24);
    accepted("trailing comma in a 2-d shape", &im, NPY_F4, 2, s23);
}

static void test_malformed(void)
{
    image im;
    const char *d23 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    /* magic, version and preamble */
    im.len = 0;
    refused("empty file", &im, "empty file");
    build(&im, 1, 0, d23, 1, SIX, 24);
    im.bytes[1] = 'n';
    refused("wrong magic", &im, "does not start with the magic string");
    memcpy(im.bytes, "PK\x03\x04", 4);
    refused("a zip (npz) file", &im, "not a .npy file");
    build(&im, 1, 0, d23, 1, SIX, 24);
    im.len = 7;
    refused("cut inside the version", &im, "truncated: 7 bytes");
    im.len = 9;
    refused("cut inside the header length", &im, "too short for the version 1.0 preamble");
    build(&im, 4, 0, d23, 1, SIX, 24);
    refused("version 4.0", &im, "unsupported .npy format version 4.0");
    build(&im, 1, 1, d23, 1, SIX, 24);
    refused("version 1.1", &im, "unsupported .npy format version 1.1");
    build(&im, 1, 0, d23, 1, SIX, 24);
    im.len = 100;
    refused("cut inside the header", &im, "truncated: the header is 118 bytes but only 90");
    build(&im, 2, 0, d23, 1, SIX, 24);
    im.bytes[11] = 0x7f; /* header length 2 GB */
    refused("v2 header length past the end", &im, "truncated: the header is");

    /* dtypes and order */
    build(&im, 1, 0, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", 1, SIX, 24);
    refused("big-endian", &im, "big-endian dtype '>f4'");
    build(&im, 1, 0, "{'descr': '>i8', 'fortran_order': False, 'shape': (3,), }", 1, SIX, 24);
    refused("big-endian int64", &im, "big-endian dtype '>i8'");
    build(&im, 1, 0, "{'descr': '|f4', 'fortran_order': False, 'shape': (2, 3), }", 1, SIX, 24);
    refused("'|' byte order on a 4-byte type", &im, "'|' is for 1-byte types");
    build(&im, 1, 0, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", 1, SIX, 24);
    refused("float64", &im, "unsupported dtype '<f8', expected '<f4', '<f2', 'bfloat16', '<i4' or '<i8'");
    build(&im, 1, 0, "{'descr': '<V2', 'fortran_order': False, 'shape': (3,), }", 1, SIX, 6);
    refused("2-byte void (np.save of ml_dtypes.bfloat16)", &im, "2-byte void dtype (np.save writes ml_dtypes' bfloat16 so");
    build(&im, 1, 0, "{'descr': '>f2', 'fortran_order': False, 'shape': (3,), }", 1, SIX, 6);
    refused("big-endian float16", &im, "big-endian dtype '>f2'");
    build(&im, 1, 0, "{'descr': '|f2', 'fortran_order': False, 'shape': (3,), }", 1, SIX, 6);
    refused("'|' byte order on float16", &im, "'|' is for 1-byte types");
    build(&im, 1, 0, "{'descr': '|u1', 'fortran_order': False, 'shape': (24,), }", 1, SIX, 24);
    refused("uint8", &im, "unsupported dtype '|u1'");
    build(&im, 1, 0, "{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (6,), }", 1, SIX, 24);
    refused("structured dtype", &im, "structured dtypes are not supported");
    build(&im, 1, 0, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 1, SIX, 24);
    refused("Fortran order", &im, "Fortran-order");
    build(&im, 1, 0, "{'descr': '<f4', 'fortran_order': Tru, 'shape': (2, 3), }", 1, SIX, 24);
    refused("fortran_order not a bool", &im, "expected True or False");
    build(&im, 1, 0, "{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2, 3), }", 1, SIX, 24);
    refused("fortran_order an identifier starting with False", &im, "expected True or False");
    build(&im, 1, 0, "{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }", 1, SIX, 24);
    refused("fortran_order 0", &im, "expected True or False");

    /* the dict itself */
    build(&im, 1, 0, "", 0, SIX, 24);
    refused("empty header", &im, "expected '{' at the start");
    build(&im, 1, 0, "['descr', '<f4']", 1, SIX, 24);
    refused("a list, not a dict", &im, "expected '{'");
    build(&im, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ", 1, SIX, 24);
    refused("no closing brace", &im, "header: expected a quoted string for a key, found the end");
    build(&im, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}}", 1, SIX, 24);
    refused("garbage after the dict", &im, "after the closing '}'");
    build(&im, 1, 0, "{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3), }", 1, SIX, 24);
    refused("missing comma", &im, "expected ',' or '}' after the value of 'descr'");
    build(&im, 1, 0, "{'descr' '<f4', 'fortran_order': False, 'shape': (2, 3), }", 1, SIX, 24);
    refused("missing colon", &im, "expected ':' after a key");
    build(&im, 1, 0, "{descr: '<f4', 'fortran_order': False, 'shape': (2, 3), }", 1, SIX, 24);
    refused("unquoted key", &im, "expected a quoted string for a key, found 'd'");
    build(&im, 1, 0, "{'descr: '<f4', 'fortran_order': False, 'shape': (2, 3), }", 1, SIX, 24);
    refused("unterminated string", &im, "expected ':' after a key");
    build(&im, 1, 0, "{'descr': '<f4", 0, SIX, 24);
    refused("string cut by the end of the header", &im, "unterminated string");
    build(&im, 1, 0, "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2, 3), }", 1, SIX, 24);
    refused("escape in a string", &im, "unsupported character 0x5c");
    build(&im, 1, 0, "{'fortran_order': False, 'shape': (2, 3), }", 1, SIX, 24);
    refused("missing descr", &im, "missing key 'descr'");
    build(&im, 1, 0, "{'descr': '<f4', 'shape': (2, 3), }", 1, SIX, 24);
    refused("missing fortran_order", &im, "missing key 'fortran_order'");
    build(&im, 1, 0, "{'descr': '<f4', 'fortran_order': False, }", 1, SIX, 24);
    refused("missing shape", &im, "missing key 'shape'");
    build(&im, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1, }", 1, SIX, 24);
    refused("extra key", &im, "unexpected key 'extra'");
    build(&im, 1, 0, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 1, SIX, 24);
    refused("duplicate key", &im, "key 'descr' appears twice");

    /* shapes */
    build(&im, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", 1, SIX, 24);
    refused("shape (6) is an int, not a tuple", &im, "'shape' (6) is not a tuple, expected (6,)");
    build(&im, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", 1, SIX, 24);
    refused("shape as a list", &im, "expected '(' to open the tuple");
    build(&im, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", 1, SIX, 24);
    refused("negative dimension", &im, "negative dimension");
    build(&im, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3.0), }", 1, SIX, 24);
    refused("float dimension", &im, "expected ',' or ')' in 'shape', found '.'");
    build(&im, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 03), }", 1, SIX, 24);
    refused("leading zero", &im, "leading zero");
    build(&im, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (,), }", 1, SIX, 24);
    refused("(,)", &im, "expected an integer in 'shape', found ','");
    build(&im, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, }", 1, SIX, 24);
    refused("unclosed tuple", &im, "expected an integer in 'shape'");
    build(&im, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 1, SIX, 24);
    refused("dimension past int64", &im, "exceeds 9223372036854775807");
    build(&im, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 1, SIX, 24);
    refused("element count overflows", &im, "more elements than fit");
    build(&im, 1, 0, "{'descr': '<i8', 'fortran_order': False, 'shape': (2305843009213693952,), }", 1, SIX, 24);
    refused("byte size overflows", &im, "more elements than fit");
    char many[512] = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
    for (int i = 0; i < NPY_MAX_DIMS + 1; i++) strcat(many, "1, ");
    strcat(many, "), }");
    build(&im, 1, 0, many, 1, SIX, 4);
    refused("too many dimensions", &im, "more than 32 dimensions");

    /* data length */
    build(&im, 1, 0, d23, 1, SIX, 20);
    refused("truncated data", &im, "truncated: shape (2, 3) of '<f4' needs 24 data bytes, the file has 20");
    build(&im, 1, 0, d23, 1, SIX, 0);
    refused("no data", &im, "needs 24 data bytes, the file has 0");
    build(&im, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", 1, SIX, 24);
    refused("trailing garbage", &im, "4 bytes of trailing data after the 20 that shape (5,)");
    build(&im, 1, 0, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }", 1, SIX, 24);
    refused("shape disagrees with the data length for <i8", &im, "needs 48 data bytes, the file has 24");
    build(&im, 1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", 1, SIX, 4);
    refused("zero-sized array with data after it", &im, "4 bytes of trailing data after the 0");
}

static uint32_t bits_of(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static float float_of(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

/* The value of binary16 bits by their definition, in double (independent of the bit tricks). */
static double f16_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

/* Widening: all 65,536 binary16 values against their definition, NaN payloads kept; bfloat16 is
 * the top half; narrowing is the nearest binary16, ties to even, checked against the neighbours
 * of its result on a million seeded floats and on every tie just above and below each value. */
static void test_half_conversions(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t u = npy_f16_to_f32((uint16_t)h);
        double want = f16_value((uint16_t)h);
        float got = float_of(u);
        if (isnan(want) ? !(isnan(got) && (u & 0x7fffff) == (h & 0x3ffu) << 13 && (u >> 31) == (h >> 15))
                        : (double)got != want || !signbit(got) != !signbit(want))
            bad++;
        if (!isnan(want) && npy_f32_to_f16(u) != h) bad++; /* exact values narrow to themselves */
        if (npy_bf16_to_f32((uint16_t)h) != h << 16) bad++;
    }
    tu_check(bad == 0, "binary16 -> float32 exact on all 65536 bit patterns, and back (%d wrong)", bad);

    uint64_t seed = 12345;
    int wrong = 0;
    for (int i = 0; i < 1000000; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t f = (uint32_t)(seed >> 32);
        /* exponents around binary16's range, where narrowing does something */
        f = (f & 0x807fffffu) | (uint32_t)(100 + (seed >> 20) % 48) << 23;
        double x = float_of(f);
        uint16_t h = npy_f32_to_f16(f);
        double got = f16_value(h), err = fabs(got - x);
        for (int d = -1; d <= 1 && (h & 0x7fff) != 0x7c00; d += 2) {
            uint16_t n = (uint16_t)(h + d);
            if (((n ^ h) & 0x8000) || ((n >> 10) & 0x1f) == 31 || ((h & 0x7fff) == 0 && d < 0)) continue;
            double other = fabs(f16_value(n) - x);
            if (other < err || (other == err && (h & 1))) wrong++;
        }
        if (fabs(x) >= 65520.0 && (h & 0x7fff) != 0x7c00) wrong++; /* past the largest half-way point: infinity */
    }
    tu_check(wrong == 0, "float32 -> binary16 is the nearest, ties to even, on 10^6 floats (%d wrong)", wrong);
    /* ties: 1 + 2^-11 is half-way between 1 and 1 + 2^-10, rounds to even 1; 1 + 3*2^-11 up */
    tu_check(npy_f32_to_f16(bits_of(1.0f + 0x1p-11f)) == 0x3c00 && npy_f32_to_f16(bits_of(1.0f + 3 * 0x1p-11f)) == 0x3c02,
             "float32 -> binary16 ties go to even");
    tu_check(npy_f32_to_f16(bits_of(0x1p-25f)) == 0 && npy_f32_to_f16(bits_of(0x1.000002p-25f)) == 1 &&
             npy_f32_to_f16(bits_of(65504.0f)) == 0x7bff && npy_f32_to_f16(bits_of(65520.0f)) == 0x7c00,
             "float32 -> binary16 at the ends: 2^-25 ties to 0, just above rounds to the smallest subnormal, 65520 to infinity");

    /* '<f2' and 'bfloat16' files load as exactly those float32 values */
    const uint16_t halves[6] = {0x3c00, 0xc000, 0x0001, 0x7c00, 0x7e01, 0x8000};
    char path[512], err[320] = "";
    const char *names[2] = {"<f2", "bfloat16"};
    for (int k = 0; k < 2; k++) {
        image im;
        char dict[128];
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (2, 3), }", names[k]);
        build(&im, 1, 0, dict, 1, halves, sizeof halves);
        snprintf(path, sizeof path, "%s/half%d.npy", tmpdir, k);
        FILE *fp = fopen(path, "wb");
        fwrite(im.bytes, 1, im.len, fp);
        fclose(fp);
        npy_array a;
        float *data = NULL;
        int io = 0, rc = npy_load_f32(path, &a, &data, &io, err, sizeof err);
        int same = rc == 0 && a.count == 6 && a.dtype == (k ? NPY_BF16 : NPY_F2);
        for (int i = 0; same && i < 6; i++)
            same = bits_of(data[i]) == (k ? npy_bf16_to_f32(halves[i]) : npy_f16_to_f32(halves[i]));
        tu_check(same, "npy_load_f32 widens a '%s' file exactly (%s)", names[k], rc ? err : "values differ");
        free(data);
        int64_t *ints = NULL;
        rc = npy_load_i64(path, &a, &ints, &io, err, sizeof err);
        tu_check(rc != 0 && a.bad_dtype && strstr(err, names[k]), "npy_load_i64 refuses '%s' (%s)", names[k], err);
        free(ints);
    }
    /* written as '<f2' and read back, bit for bit */
    snprintf(path, sizeof path, "%s/written.npy", tmpdir);
    const int64_t shape[1] = {6};
    int rc = npy_save(path, NPY_F2, 1, shape, halves, err, sizeof err);
    npy_array a;
    float *data = NULL;
    int io = 0;
    rc = rc ? rc : npy_load_f32(path, &a, &data, &io, err, sizeof err);
    tu_check(rc == 0 && a.dtype == NPY_F2 && a.data_offset == 128 && bits_of(data[2]) == npy_f16_to_f32(1),
             "npy_save writes '<f2' that loads back (%s)", rc ? err : "ok");
    free(data);
}

/* The library's widening (msda_widen_half, vector lanes and a scalar tail) gives npy's bits for
 * all 65,536 patterns of both formats, apart and in place (src in the upper half of dst's bytes),
 * at every tail length. */
static void test_library_widening(void)
{
    enum { N = 65536 };
    uint16_t *halves = malloc(N * sizeof *halves);
    float *out = malloc(N * sizeof *out);
    for (uint32_t h = 0; h < N; h++) halves[h] = (uint16_t)h;
    for (int bf = 0; bf <= 1; bf++) {
        int bad = 0;
        for (int in_place = 0; in_place <= 1; in_place++) {
            for (int64_t n = N - 3; n <= N; n++) {
                const uint16_t *src = halves + (N - n);
                if (in_place) {
                    memcpy((uint16_t *)(out + n) - n, src, (size_t)n * sizeof *src);
                    src = (const uint16_t *)(out + n) - n;
                }
                uint16_t first = halves[N - n];
                msda_widen_half(src, out, n, bf);
                for (int64_t i = 0; i < n; i++) {
                    uint16_t h = (uint16_t)(first + i);
                    if (bits_of(out[i]) != (bf ? npy_bf16_to_f32(h) : npy_f16_to_f32(h))) bad++;
                }
            }
        }
        tu_check(bad == 0, "msda_widen_half (%s) gives npy's bits for every pattern, apart and in place (%d wrong)",
                 bf ? "bfloat16" : "float16", bad);
    }
    free(halves);
    free(out);
}

/* Every prefix of a valid file is refused (never a crash or a read past the end). */
static void test_every_prefix(void)
{
    image im;
    build(&im, 2, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 1, SIX, 24);
    int accepted_prefixes = 0;
    for (size_t n = 0; n < im.len; n++) {
        /* a heap copy of exactly n bytes so ASan sees any over-read */
        unsigned char *copy = malloc(n ? n : 1);
        memcpy(copy, im.bytes, n);
        npy_array a;
        if (npy_parse(copy, n, &a, NULL, 0) == 0) accepted_prefixes++;
        free(copy);
    }
    tu_check(accepted_prefixes == 0, "every proper prefix of a valid file is refused (%d accepted)", accepted_prefixes);
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_numpy_header_bytes();
    test_round_trips();
    test_versions_and_forms();
    test_malformed();
    test_every_prefix();
    test_half_conversions();
    test_library_widening();
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return tu_finish();
}
