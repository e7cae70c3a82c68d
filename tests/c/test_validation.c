/* One test per validation rule: the status, the key words of the message (argument, expected,
 * actual), err->status, and that a refused call writes nothing. */
#include "testutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A valid base problem: levels 8x9, 4x5, 2x3 (L = 98, starts 0, 72, 92). */
static int64_t shapes[6], starts[3];

static msda_problem base(void)
{
    static const int64_t s[6] = {8, 9, 4, 5, 2, 3}, st[3] = {0, 72, 92};
    memcpy(shapes, s, sizeof s);
    memcpy(starts, st, sizeof st);
    msda_problem p;
    msda_problem_init(&p);
    p.batch = 2; p.num_queries = 3; p.num_heads = 2; p.channels = 4; p.num_levels = 3; p.num_points = 2;
    p.value_length = 98;
    p.spatial_shapes = shapes;
    p.level_start_index = starts;
    return p;
}

/* Checks status, err->status and that every NULL-terminated key word is in the message. */
static void expect(const char *rule, msda_status got, const msda_error *err, msda_status want, ...)
{
    int ok = got == want && err->status == want;
    const char *missing = NULL;
    va_list ap;
    va_start(ap, want);
    for (const char *key; (key = va_arg(ap, const char *)) != NULL;)
        if (!strstr(err->message, key) && !missing) missing = key;
    va_end(ap);
    tu_check(ok && !missing, "%s: got %s (err->status %s) message \"%s\"; expected %s%s%s%s", rule,
             msda_status_string(got), msda_status_string(err->status), err->message, msda_status_string(want),
             missing ? " with \"" : "", missing ? missing : "", missing ? "\" in the message" : "");
}

static void reset(msda_error *err)
{
    err->status = MSDA_OK;
    strcpy(err->message, "(untouched)");
}

/* Validates through msda_validate; the tensor-level entry points share the same checks. */
static msda_status validate(const msda_problem *p, msda_error *err)
{
    reset(err);
    return msda_validate(p, err);
}

static void test_valid_base(void)
{
    msda_error err;
    msda_problem p = base();
    tu_check(validate(&p, &err) == MSDA_OK, "base problem refused: %s", err.message);
    tu_check(msda_value_elements(&p) == 2 * 98 * 2 * 4 && msda_locations_elements(&p) == 2 * 3 * 2 * 3 * 2 * 2 &&
             msda_weights_elements(&p) == 2 * 3 * 2 * 3 * 2 && msda_output_elements(&p) == 2 * 3 * 2 * 4,
             "element counts of the base problem");
    tu_check(msda_validate(&p, NULL) == MSDA_OK, "validate with err NULL");
}

static void test_problem_init(void)
{
    msda_problem p;
    memset(&p, 0x5A, sizeof p);
    msda_problem_init(&p);
    tu_check(p.value_layout == MSDA_VALUE_BLNC && p.locations_layout == MSDA_LOCATIONS_BQHLP2 &&
             p.align_corners == 0 && p.padding == MSDA_PADDING_ZEROS && p.threads == 1 && p.batch == 0 &&
             p.spatial_shapes == NULL && p.level_start_index == NULL && p.value_dtype == MSDA_FLOAT32,
             "msda_problem_init defaults");
    msda_error err;
    expect("msda_problem_init leaves sizes to fill in", validate(&p, &err), &err, MSDA_ERR_INVALID_SIZE, "batch",
           NULL);
    msda_problem_init(NULL);   /* must not crash */
}

static void test_sizes(void)
{
    static const char *names[] = {"batch", "num_queries", "num_heads", "channels", "num_levels", "num_points",
                                  "value_length"};
    for (int i = 0; i < 7; i++) {
        static const int64_t bad[] = {0, -3};
        for (int k = 0; k < 2; k++) {
            msda_problem p = base();
            int64_t *field[] = {&p.batch, &p.num_queries, &p.num_heads, &p.channels, &p.num_levels,
                                &p.num_points, &p.value_length};
            *field[i] = bad[k];
            char rule[64], actual[32];
            snprintf(rule, sizeof rule, "%s = %lld", names[i], (long long)bad[k]);
            snprintf(actual, sizeof actual, "%lld", (long long)bad[k]);
            msda_error err;
            expect(rule, validate(&p, &err), &err, MSDA_ERR_INVALID_SIZE, names[i], actual, ">= 1", NULL);
            tu_check(msda_value_elements(&p) == 0 && msda_output_elements(&p) == 0,
                     "%s: element counts of an invalid problem are not 0", rule);
        }
    }
}

static void test_spatial_shapes(void)
{
    static const int64_t bad[][2] = {{0, 5}, {4, 0}, {-1, 5}, {4, -7}};
    for (int k = 0; k < 4; k++) {
        msda_problem p = base();
        shapes[2] = bad[k][0];
        shapes[3] = bad[k][1];
        char rule[64], actual[48];
        snprintf(rule, sizeof rule, "spatial_shapes[1] = (%lld, %lld)", (long long)bad[k][0], (long long)bad[k][1]);
        snprintf(actual, sizeof actual, "(%lld, %lld)", (long long)bad[k][0], (long long)bad[k][1]);
        msda_error err;
        expect(rule, validate(&p, &err), &err, MSDA_ERR_INVALID_SIZE, "spatial_shapes[1]", actual, ">= 1", NULL);
    }
}

static void test_level_start_index(void)
{
    msda_error err;
    msda_problem p = base();
    starts[2] = 70;
    msda_status st = validate(&p, &err);
    tu_check(st == MSDA_ERR_SHAPE_MISMATCH &&
             strcmp(err.message, "level_start_index[2] is 70, expected 92 (sum of H*W over levels 0..1)") == 0,
             "level_start_index[2] = 70: got %s \"%s\"", msda_status_string(st), err.message);

    p = base();
    starts[0] = 1;
    expect("level_start_index[0] = 1", validate(&p, &err), &err, MSDA_ERR_SHAPE_MISMATCH, "level_start_index[0]",
           "is 1", "expected 0", NULL);
    p = base();
    starts[1] = 73;
    expect("level_start_index[1] = 73", validate(&p, &err), &err, MSDA_ERR_SHAPE_MISMATCH,
           "level_start_index[1]", "73", "72", NULL);
}

static void test_value_length(void)
{
    msda_error err;
    msda_problem p = base();
    p.value_length = 97;
    expect("value_length = 97", validate(&p, &err), &err, MSDA_ERR_SHAPE_MISMATCH, "value_length", "97", "98", NULL);
    p.value_length = 99;
    expect("value_length = 99", validate(&p, &err), &err, MSDA_ERR_SHAPE_MISMATCH, "value_length", "99", "98", NULL);
}

static void test_options(void)
{
    msda_error err;
    msda_problem p = base();
    p.value_layout = (msda_value_layout)2;
    expect("value_layout = 2", validate(&p, &err), &err, MSDA_ERR_INVALID_OPTION, "value_layout", "2", "BLNC",
           "BNLC", NULL);
    p = base();
    p.value_layout = (msda_value_layout)-1;
    expect("value_layout = -1", validate(&p, &err), &err, MSDA_ERR_INVALID_OPTION, "value_layout", "-1", NULL);
    p = base();
    p.locations_layout = (msda_locations_layout)7;
    expect("locations_layout = 7", validate(&p, &err), &err, MSDA_ERR_INVALID_OPTION, "locations_layout", "7",
           "BQHLP2", "B2QHLP", NULL);
    p = base();
    p.align_corners = 2;
    expect("align_corners = 2", validate(&p, &err), &err, MSDA_ERR_INVALID_OPTION, "align_corners", "2",
           "0 or 1", NULL);
    p = base();
    p.align_corners = -1;
    expect("align_corners = -1", validate(&p, &err), &err, MSDA_ERR_INVALID_OPTION, "align_corners", "-1", NULL);
    p = base();
    p.padding = (msda_padding)3;
    expect("padding = 3", validate(&p, &err), &err, MSDA_ERR_INVALID_OPTION, "padding", "3", "ZEROS", "BORDER",
           NULL);
    p = base();
    p.threads = 0;
    expect("threads = 0", validate(&p, &err), &err, MSDA_ERR_INVALID_OPTION, "threads", "0", ">= 1", NULL);
    p = base();
    p.threads = -4;
    expect("threads = -4", validate(&p, &err), &err, MSDA_ERR_INVALID_OPTION, "threads", "-4", ">= 1", NULL);
    p = base();
    p.value_dtype = (msda_dtype)3;
    expect("value_dtype = 3", validate(&p, &err), &err, MSDA_ERR_INVALID_OPTION, "value_dtype", "3", "FLOAT32",
           "FLOAT16", "BFLOAT16", NULL);
    p = base();
    p.value_dtype = (msda_dtype)-1;
    expect("value_dtype = -1", validate(&p, &err), &err, MSDA_ERR_INVALID_OPTION, "value_dtype", "-1", NULL);
}

static void test_null_problem_and_arrays(void)
{
    msda_error err;
    float x[1] = {0};
    expect("problem NULL (validate)", validate(NULL, &err), &err, MSDA_ERR_NULL_POINTER, "problem", "NULL", NULL);
    reset(&err);
    expect("problem NULL (forward)", msda_forward(NULL, x, x, x, x, &err), &err, MSDA_ERR_NULL_POINTER, "problem",
           NULL);
    reset(&err);
    expect("problem NULL (backward)", msda_backward(NULL, x, x, x, x, x, x, x, &err), &err, MSDA_ERR_NULL_POINTER,
           "problem", NULL);
    tu_check(msda_validate(NULL, NULL) == MSDA_ERR_NULL_POINTER && msda_value_elements(NULL) == 0,
             "NULL problem with NULL err");
    msda_problem p = base();
    p.spatial_shapes = NULL;
    expect("spatial_shapes NULL", validate(&p, &err), &err, MSDA_ERR_NULL_POINTER, "spatial_shapes", "NULL", NULL);
    p = base();
    p.level_start_index = NULL;
    expect("level_start_index NULL", validate(&p, &err), &err, MSDA_ERR_NULL_POINTER, "level_start_index", "NULL",
           NULL);
}

/* Separate, adjacent buffers inside one arena, so overlap tests can alias them at will. */
typedef struct buffers {
    float *arena;
    float *grad_output, *value, *locations, *weights, *output, *grad_value, *grad_locations, *grad_weights;
    int64_t n_output, n_value, n_locations, n_weights;
} buffers;

static void buffers_init(buffers *b, const msda_problem *p)
{
    b->n_output = msda_output_elements(p);
    b->n_value = msda_value_elements(p);
    b->n_locations = msda_locations_elements(p);
    b->n_weights = msda_weights_elements(p);
    const int64_t total = 2 * (b->n_output + b->n_value + b->n_locations + b->n_weights);
    b->arena = tu_floats(total);
    for (int64_t i = 0; i < total; i++) b->arena[i] = 0.25f;
    float *next = b->arena;
    b->grad_output = next; next += b->n_output;
    b->value = next; next += b->n_value;
    b->locations = next; next += b->n_locations;
    b->weights = next; next += b->n_weights;
    b->output = next; next += b->n_output;
    b->grad_value = next; next += b->n_value;
    b->grad_locations = next; next += b->n_locations;
    b->grad_weights = next;
}

static void test_null_tensors(void)
{
    msda_problem p = base();
    buffers b;
    buffers_init(&b, &p);
    msda_error err;
    const char *fwd_names[] = {"value", "sampling_locations", "attention_weights", "output"};
    for (int i = 0; i < 4; i++) {
        const float *in[3] = {b.value, b.locations, b.weights};
        float *out = b.output;
        if (i < 3) in[i] = NULL; else out = NULL;
        for (int64_t k = 0; k < b.n_output; k++) b.output[k] = -7.0f;
        char rule[64];
        snprintf(rule, sizeof rule, "forward with %s NULL", fwd_names[i]);
        reset(&err);
        expect(rule, msda_forward(&p, in[0], in[1], in[2], out, &err), &err, MSDA_ERR_NULL_POINTER, fwd_names[i],
               "NULL", NULL);
        int untouched = 1;
        for (int64_t k = 0; k < b.n_output; k++) untouched &= b.output[k] == -7.0f;
        tu_check(untouched, "%s: output written by a refused call", rule);
    }
    const char *bwd_names[] = {"grad_output", "value", "sampling_locations", "attention_weights", "grad_value",
                               "grad_sampling_locations", "grad_attention_weights"};
    for (int i = 0; i < 7; i++) {
        const float *in[4] = {b.grad_output, b.value, b.locations, b.weights};
        float *out[3] = {b.grad_value, b.grad_locations, b.grad_weights};
        if (i < 4) in[i] = NULL; else out[i - 4] = NULL;
        char rule[64];
        snprintf(rule, sizeof rule, "backward with %s NULL", bwd_names[i]);
        reset(&err);
        expect(rule, msda_backward(&p, in[0], in[1], in[2], in[3], out[0], out[1], out[2], &err), &err,
               MSDA_ERR_NULL_POINTER, bwd_names[i], "NULL", NULL);
        tu_check(msda_backward(&p, in[0], in[1], in[2], in[3], out[0], out[1], out[2], NULL) ==
                 MSDA_ERR_NULL_POINTER, "%s with err NULL", rule);
    }
    free(b.arena);
}

/* Overflow of H*W, of the sum over levels, and of each tensor's element count or byte size. */
static void test_overflow(void)
{
    msda_error err;
    float x[1] = {0};
    msda_problem p = base();
    shapes[2] = (int64_t)1 << 32;
    shapes[3] = (int64_t)1 << 32;
    expect("H*W overflows", validate(&p, &err), &err, MSDA_ERR_OVERFLOW, "spatial_shapes", "overflow", NULL);

    p = base();
    shapes[0] = (int64_t)1 << 31;  /* level 0: 2^62 pixels; level 1 would push the sum past 2^63 */
    shapes[1] = (int64_t)1 << 31;
    shapes[2] = (int64_t)1 << 31;
    shapes[3] = (int64_t)1 << 31;
    starts[1] = (int64_t)1 << 62;
    expect("sum of H*W overflows", validate(&p, &err), &err, MSDA_ERR_OVERFLOW, "spatial_shapes", "overflow", NULL);

    p = base();
    p.channels = INT64_MAX / 2;    /* B*L*N_h*C overflows int64 */
    expect("value element count overflows", validate(&p, &err), &err, MSDA_ERR_OVERFLOW, "value", NULL);
    reset(&err);
    expect("value element count overflows (forward)", msda_forward(&p, x, x, x, x, &err), &err, MSDA_ERR_OVERFLOW,
           "value", NULL);

    /* One 1x1 level: value = B*N_h*C = 2^61 floats (2^63 bytes: does not fit ptrdiff_t). */
    static const int64_t one[2] = {1, 1}, zero[1] = {0};
    p = base();
    p.num_levels = 1; p.spatial_shapes = one; p.level_start_index = zero; p.value_length = 1;
    p.batch = 1; p.num_heads = 1; p.channels = (int64_t)1 << 61;
    expect("value byte size overflows", validate(&p, &err), &err, MSDA_ERR_OVERFLOW, "value", NULL);

    p.channels = (int64_t)1 << 60; p.num_queries = 2;   /* value fits (2^62 bytes), output is 2^63 bytes */
    expect("output byte size overflows", validate(&p, &err), &err, MSDA_ERR_OVERFLOW, "output", NULL);

    p = base();
    p.num_points = (int64_t)1 << 58;   /* 2*3*2*3*2^58*2 floats */
    expect("sampling_locations count overflows", validate(&p, &err), &err, MSDA_ERR_OVERFLOW, "sampling_locations",
           NULL);
    reset(&err);
    expect("sampling_locations count overflows (backward)", msda_backward(&p, x, x, x, x, x, x, x, &err), &err,
           MSDA_ERR_OVERFLOW, "sampling_locations", NULL);
}

/* One call whose output `out` overlaps tensor `other` by exactly one element (the output
 * starting on other's last element, or ending on its first); every other tensor is a separate
 * allocation, so the only overlap is the one under test. */
static void overlap_case(const msda_problem *p, int backward, int out, int other, int at_end)
{
    static const char *fwd_names[] = {"value", "sampling_locations", "attention_weights", "output"};
    static const char *bwd_names[] = {"grad_output", "value", "sampling_locations", "attention_weights",
                                      "grad_value", "grad_sampling_locations", "grad_attention_weights"};
    const char **names = backward ? bwd_names : fwd_names;
    const int count = backward ? 7 : 4;
    int64_t n[7];
    if (backward) {
        const int64_t sizes[7] = {msda_output_elements(p), msda_value_elements(p), msda_locations_elements(p),
                                  msda_weights_elements(p), msda_value_elements(p), msda_locations_elements(p),
                                  msda_weights_elements(p)};
        memcpy(n, sizes, sizeof sizes);
    } else {
        const int64_t sizes[4] = {msda_value_elements(p), msda_locations_elements(p), msda_weights_elements(p),
                                  msda_output_elements(p)};
        memcpy(n, sizes, sizeof sizes);
    }
    float *ptr[7] = {0}, *owned[7] = {0};
    for (int i = 0; i < count; i++)
        if (i != out && i != other) ptr[i] = owned[i] = tu_floats(n[i]);
    float *region = tu_floats(n[out] + n[other] - 1);
    if (at_end) {
        ptr[out] = region;
        ptr[other] = region + n[out] - 1;
    } else {
        ptr[other] = region;
        ptr[out] = region + n[other] - 1;
    }
    msda_error err;
    reset(&err);
    const msda_status st = backward
        ? msda_backward(p, ptr[0], ptr[1], ptr[2], ptr[3], ptr[4], ptr[5], ptr[6], &err)
        : msda_forward(p, ptr[0], ptr[1], ptr[2], ptr[3], &err);
    char rule[128];
    snprintf(rule, sizeof rule, "%s: %s %s %s by one element", backward ? "backward" : "forward", names[out],
             at_end ? "ends on the first element of" : "starts on the last element of", names[other]);
    expect(rule, st, &err, MSDA_ERR_OVERLAP, names[out], names[other], NULL);
    for (int i = 0; i < count; i++) free(owned[i]);
    free(region);
}

/* A half-precision value spans 2 bytes an element: an output just past its bytes passes, one on
 * its last element overlaps; a NULL one names its elements. */
static void test_half_value_buffers(void)
{
    msda_problem p = base();
    p.value_dtype = MSDA_BFLOAT16;
    const int64_t nv = msda_value_elements(&p), nl = msda_locations_elements(&p), nw = msda_weights_elements(&p),
                  no = msda_output_elements(&p);
    float *loc = tu_floats(nl), *w = tu_floats(nw);
    memset(loc, 0, (size_t)nl * sizeof *loc);
    memset(w, 0, (size_t)nw * sizeof *w);
    char *region = tu_xmalloc((size_t)(2 * nv + 4 * no));
    memset(region, 0, (size_t)(2 * nv + 4 * no));
    msda_error err;
    reset(&err);
    tu_check(msda_forward(&p, region, loc, w, (float *)(void *)(region + 2 * nv), &err) == MSDA_OK,
             "an output just past a half value's bytes refused: %s", err.message);
    reset(&err);
    expect("forward: output starts on the last element of a half value",
           msda_forward(&p, region, loc, w, (float *)(void *)(region + 2 * nv - 2), &err), &err, MSDA_ERR_OVERLAP,
           "output", "value", NULL);
    reset(&err);
    expect("forward: half value NULL", msda_forward(&p, NULL, loc, w, (float *)(void *)(region + 2 * nv), &err),
           &err, MSDA_ERR_NULL_POINTER, "value", "half-precision", NULL);
    free(region); free(loc); free(w);
}

/* Each output overlapping each input and each other output; buffers that only touch pass. */
static void test_overlap(void)
{
    msda_problem p = base();
    buffers b;
    buffers_init(&b, &p);
    msda_error err;
    reset(&err);
    tu_check(msda_forward(&p, b.value, b.locations, b.weights, b.output, &err) == MSDA_OK &&
             msda_backward(&p, b.grad_output, b.value, b.locations, b.weights, b.grad_value, b.grad_locations,
                           b.grad_weights, &err) == MSDA_OK,
             "adjacent, non-overlapping buffers refused: %s", err.message);
    free(b.arena);

    for (int other = 0; other < 3; other++)
        for (int at_end = 0; at_end < 2; at_end++) overlap_case(&p, 0, 3, other, at_end);
    for (int out = 4; out < 7; out++)
        for (int other = 0; other < 7; other++)
            if (other != out)
                for (int at_end = 0; at_end < 2; at_end++) overlap_case(&p, 1, out, other, at_end);
}

static void test_status_string(void)
{
    static const struct { msda_status status; const char *name; } all[] = {
        {MSDA_OK, "MSDA_OK"},
        {MSDA_ERR_NULL_POINTER, "MSDA_ERR_NULL_POINTER"},
        {MSDA_ERR_INVALID_SIZE, "MSDA_ERR_INVALID_SIZE"},
        {MSDA_ERR_SHAPE_MISMATCH, "MSDA_ERR_SHAPE_MISMATCH"},
        {MSDA_ERR_INVALID_OPTION, "MSDA_ERR_INVALID_OPTION"},
        {MSDA_ERR_OVERFLOW, "MSDA_ERR_OVERFLOW"},
        {MSDA_ERR_OVERLAP, "MSDA_ERR_OVERLAP"},
        {MSDA_ERR_THREADS, "MSDA_ERR_THREADS"},
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *s = msda_status_string(all[i].status);
        tu_check(s && strcmp(s, all[i].name) == 0, "msda_status_string(%d) is \"%s\", expected \"%s\"",
                 (int)all[i].status, s ? s : "(null)", all[i].name);
    }
    const char *s = msda_status_string((msda_status)99);
    tu_check(s && strcmp(s, "MSDA_UNKNOWN_STATUS") == 0, "msda_status_string(99) is \"%s\"", s ? s : "(null)");
    s = msda_status_string((msda_status)-1);
    tu_check(s && strcmp(s, "MSDA_UNKNOWN_STATUS") == 0, "msda_status_string(-1) is \"%s\"", s ? s : "(null)");
}

int main(void)
{
    test_problem_init();
    test_valid_base();
    test_sizes();
    test_spatial_shapes();
    test_level_start_index();
    test_value_length();
    test_options();
    test_null_problem_and_arrays();
    test_null_tensors();
    test_overflow();
    test_overlap();
    test_half_value_buffers();
    test_status_string();
    return tu_finish();
}
