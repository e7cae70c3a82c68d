/* The entry points of src/msda.h: validation, layout strides, and dispatch to the kernels. */
#include "internal.h"
#include "options.h"
#include "threads.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

void msda_problem_init(msda_problem *problem)
{
    if (!problem) return;
    memset(problem, 0, sizeof *problem);
    for (int id = 0; id < MSDA_OPTION_COUNT; id++) msda_option_set(problem, id, 0);   /* value 0: the default */
    problem->threads = 1;
    problem->value_dtype = MSDA_FLOAT32;
}

static int mul_ok(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

/* Product of up to six positive factors; 0 on overflow. */
static int64_t count_of(int n, const int64_t *factors)
{
    int64_t acc = 1;
    for (int i = 0; i < n; i++)
        if (!mul_ok(acc, factors[i], &acc)) return 0;
    return acc;
}

/* Byte size of n floats fits in size_t and ptrdiff_t (the latter bounds pointer arithmetic). */
static int bytes_fit(int64_t n)
{
    uint64_t max = (uint64_t)PTRDIFF_MAX < (uint64_t)SIZE_MAX ? (uint64_t)PTRDIFF_MAX : (uint64_t)SIZE_MAX;
    return n > 0 && (uint64_t)n <= max / sizeof(float);
}

msda_status msda__plan(const msda_problem *pr, msda_plan *plan, msda_error *err)
{
    if (!pr) {
        msda__set_error(err, MSDA_ERR_NULL_POINTER, "problem is NULL, expected a msda_problem");
        return MSDA_ERR_NULL_POINTER;
    }
    const struct { const char *name; int64_t value; } sizes[] = {
        {"batch", pr->batch},           {"num_queries", pr->num_queries},
        {"num_heads", pr->num_heads},   {"channels", pr->channels},
        {"num_levels", pr->num_levels}, {"num_points", pr->num_points},
        {"value_length", pr->value_length},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (sizes[i].value < 1) {
            msda__set_error(err, MSDA_ERR_INVALID_SIZE, "%s is %lld, expected >= 1",
                            sizes[i].name, (long long)sizes[i].value);
            return MSDA_ERR_INVALID_SIZE;
        }
    }
    for (int id = 0; id < MSDA_OPTION_COUNT; id++) {
        const msda_option_info *o = &msda_options[id];
        const int v = msda_option_get(pr, id);
        if (v >= 0 && v < o->count) continue;
        /* "padding is 7, expected MSDA_PADDING_ZEROS (0) or MSDA_PADDING_BORDER (1)"; a switch's
         * constants are its numbers: "align_corners is 2, expected 0 or 1" */
        char expected[192];
        int n = 0;
        for (int i = 0; i < o->count && n < (int)sizeof expected; i++) {
            const char *sep = i == 0 ? "" : i == o->count - 1 ? " or " : ", ";
            if (o->constants[i][0] >= '0' && o->constants[i][0] <= '9')
                n += snprintf(expected + n, sizeof expected - (size_t)n, "%s%s", sep, o->constants[i]);
            else
                n += snprintf(expected + n, sizeof expected - (size_t)n, "%s%s (%d)", sep, o->constants[i], i);
        }
        msda__set_error(err, MSDA_ERR_INVALID_OPTION, "%s is %d, expected %s", o->field, v, expected);
        return MSDA_ERR_INVALID_OPTION;
    }
    if (pr->value_dtype != MSDA_FLOAT32 && pr->value_dtype != MSDA_FLOAT16 && pr->value_dtype != MSDA_BFLOAT16) {
        msda__set_error(err, MSDA_ERR_INVALID_OPTION,
                        "value_dtype is %d, expected MSDA_FLOAT32 (0), MSDA_FLOAT16 (1) or MSDA_BFLOAT16 (2)",
                        (int)pr->value_dtype);
        return MSDA_ERR_INVALID_OPTION;
    }
    if (pr->threads < 1) {
        msda__set_error(err, MSDA_ERR_INVALID_OPTION, "threads is %d, expected >= 1", pr->threads);
        return MSDA_ERR_INVALID_OPTION;
    }
    if (!pr->spatial_shapes) {
        msda__set_error(err, MSDA_ERR_NULL_POINTER, "spatial_shapes is NULL, expected %lld (H, W) pairs",
                        (long long)pr->num_levels);
        return MSDA_ERR_NULL_POINTER;
    }
    if (!pr->level_start_index) {
        msda__set_error(err, MSDA_ERR_NULL_POINTER, "level_start_index is NULL, expected %lld entries",
                        (long long)pr->num_levels);
        return MSDA_ERR_NULL_POINTER;
    }
    int64_t total = 0;
    for (int64_t l = 0; l < pr->num_levels; l++) {
        int64_t h = pr->spatial_shapes[2 * l], w = pr->spatial_shapes[2 * l + 1], hw;
        if (h < 1 || w < 1) {
            msda__set_error(err, MSDA_ERR_INVALID_SIZE,
                            "spatial_shapes[%lld] is (%lld, %lld), expected H >= 1 and W >= 1",
                            (long long)l, (long long)h, (long long)w);
            return MSDA_ERR_INVALID_SIZE;
        }
        if (pr->level_start_index[l] != total) {
            if (l == 0)
                msda__set_error(err, MSDA_ERR_SHAPE_MISMATCH, "level_start_index[0] is %lld, expected 0",
                                (long long)pr->level_start_index[0]);
            else
                msda__set_error(err, MSDA_ERR_SHAPE_MISMATCH,
                                "level_start_index[%lld] is %lld, expected %lld (sum of H*W over levels 0..%lld)",
                                (long long)l, (long long)pr->level_start_index[l], (long long)total,
                                (long long)(l - 1));
            return MSDA_ERR_SHAPE_MISMATCH;
        }
        if (!mul_ok(h, w, &hw) || __builtin_add_overflow(total, hw, &total)) {
            msda__set_error(err, MSDA_ERR_OVERFLOW,
                            "spatial_shapes: sum of H*W over levels 0..%lld overflows 64 bits", (long long)l);
            return MSDA_ERR_OVERFLOW;
        }
    }
    if (pr->value_length != total) {
        msda__set_error(err, MSDA_ERR_SHAPE_MISMATCH,
                        "value_length is %lld, expected %lld (sum of H*W over all %lld levels)",
                        (long long)pr->value_length, (long long)total, (long long)pr->num_levels);
        return MSDA_ERR_SHAPE_MISMATCH;
    }

    const int64_t B = pr->batch, Q = pr->num_queries, H = pr->num_heads, C = pr->channels,
                  NL = pr->num_levels, P = pr->num_points, L = pr->value_length;
    const struct { const char *name; int n; int64_t f[6]; } counts[] = {
        {"value", 4, {B, L, H, C, 1, 1}},
        {"sampling_locations", 6, {B, Q, H, NL, P, 2}},
        {"attention_weights", 5, {B, Q, H, NL, P, 1}},
        {"output", 4, {B, Q, H, C, 1, 1}},
    };
    int64_t n[4];
    for (int i = 0; i < 4; i++) {
        n[i] = count_of(counts[i].n, counts[i].f);
        if (!bytes_fit(n[i])) {
            msda__set_error(err, MSDA_ERR_OVERFLOW,
                            "%s: the byte size of %lld x %lld x %lld x %lld x %lld x %lld floats does not fit in memory addresses",
                            counts[i].name, (long long)counts[i].f[0], (long long)counts[i].f[1],
                            (long long)counts[i].f[2], (long long)counts[i].f[3], (long long)counts[i].f[4],
                            (long long)counts[i].f[5]);
            return MSDA_ERR_OVERFLOW;
        }
    }
    if (!plan) return MSDA_OK;

    memset(plan, 0, sizeof *plan);
    plan->batch = B; plan->num_queries = Q; plan->num_heads = H; plan->channels = C;
    plan->num_levels = NL; plan->num_points = P; plan->value_length = L;
    plan->spatial_shapes = pr->spatial_shapes;
    plan->level_start_index = pr->level_start_index;
    plan->align_corners = pr->align_corners;
    plan->padding = pr->padding;
    plan->value_dtype = (int)pr->value_dtype;
    if (pr->value_layout == MSDA_VALUE_BLNC) {
        plan->value_stride_head = C;
        plan->value_stride_pixel = H * C;
    } else {
        plan->value_stride_pixel = C;
        plan->value_stride_head = L * C;
    }
    plan->value_stride_batch = L * H * C;
    if (pr->locations_layout == MSDA_LOCATIONS_BQHLP2) {
        plan->loc_stride_xy = 1;
        plan->loc_stride_point = 2;
        plan->loc_stride_level = P * 2;
        plan->loc_stride_head = NL * P * 2;
        plan->loc_stride_query = H * NL * P * 2;
        plan->loc_stride_batch = Q * H * NL * P * 2;
    } else {
        plan->loc_stride_point = 1;
        plan->loc_stride_level = P;
        plan->loc_stride_head = NL * P;
        plan->loc_stride_query = H * NL * P;
        plan->loc_stride_xy = Q * H * NL * P;
        plan->loc_stride_batch = 2 * Q * H * NL * P;
    }
    plan->value_elements = n[0];
    plan->locations_elements = n[1];
    plan->weights_elements = n[2];
    plan->output_elements = n[3];
    return MSDA_OK;
}

msda_status msda_validate(const msda_problem *problem, msda_error *err)
{
    return msda__plan(problem, NULL, err);
}

static int64_t elements_or_zero(const msda_problem *problem, int which)
{
    msda_plan plan;
    if (msda__plan(problem, &plan, NULL) != MSDA_OK) return 0;
    switch (which) {
    case 0: return plan.value_elements;
    case 1: return plan.locations_elements;
    case 2: return plan.weights_elements;
    default: return plan.output_elements;
    }
}

int64_t msda_value_elements(const msda_problem *problem) { return elements_or_zero(problem, 0); }
int64_t msda_locations_elements(const msda_problem *problem) { return elements_or_zero(problem, 1); }
int64_t msda_weights_elements(const msda_problem *problem) { return elements_or_zero(problem, 2); }
int64_t msda_output_elements(const msda_problem *problem) { return elements_or_zero(problem, 3); }

typedef struct buffer_ref {
    const char *name;
    const void *ptr;
    int64_t elements;
    int is_output;
    int half;   /* 2-byte elements (a half-precision value), else float32 */
} buffer_ref;

static uintptr_t buffer_end(const buffer_ref *b)
{
    return (uintptr_t)b->ptr + (uintptr_t)b->elements * (b->half ? sizeof(uint16_t) : sizeof(float));
}

/* Every pointer present, and no output overlapping any other buffer. */
static msda_status check_buffers(const buffer_ref *bufs, int n, msda_error *err)
{
    for (int i = 0; i < n; i++) {
        if (!bufs[i].ptr) {
            msda__set_error(err, MSDA_ERR_NULL_POINTER, "%s is NULL, expected a buffer of %lld %s",
                            bufs[i].name, (long long)bufs[i].elements, bufs[i].half ? "half-precision values" : "floats");
            return MSDA_ERR_NULL_POINTER;
        }
    }
    for (int i = 0; i < n; i++) {
        if (!bufs[i].is_output) continue;
        uintptr_t a0 = (uintptr_t)bufs[i].ptr, a1 = buffer_end(&bufs[i]);
        for (int j = 0; j < n; j++) {
            if (j == i) continue;
            uintptr_t b0 = (uintptr_t)bufs[j].ptr, b1 = buffer_end(&bufs[j]);
            if (a0 < b1 && b0 < a1) {
                msda__set_error(err, MSDA_ERR_OVERLAP, "%s overlaps %s, expected separate buffers",
                                bufs[i].name, bufs[j].name);
                return MSDA_ERR_OVERLAP;
            }
        }
    }
    return MSDA_OK;
}

/* Validation and the tensors of a call, ready for msda__run to split over threads. */
msda_status msda__forward_job(msda_job *job, const msda_problem *problem, const void *value,
                              const float *sampling_locations, const float *attention_weights, float *output,
                              msda_error *err)
{
    msda_plan plan;
    msda_status st = msda__plan(problem, &plan, err);
    if (st != MSDA_OK) return st;
    const buffer_ref bufs[] = {
        {"value", value, plan.value_elements, 0, plan.value_dtype != MSDA_FLOAT32},
        {"sampling_locations", sampling_locations, plan.locations_elements, 0, 0},
        {"attention_weights", attention_weights, plan.weights_elements, 0, 0},
        {"output", output, plan.output_elements, 1, 0},
    };
    st = check_buffers(bufs, 4, err);
    if (st == MSDA_OK) st = msda__isa_check(err);
    if (st != MSDA_OK) return st;
    memset(job, 0, sizeof *job);
    job->plan = plan;
    job->tensors.value = value;
    job->tensors.sampling_locations = sampling_locations;
    job->tensors.attention_weights = attention_weights;
    job->tensors.output = output;
    job->kind = MSDA_JOB_FORWARD;
    job->threads = problem->threads;
    job->units = msda__forward_units(&plan);
    return MSDA_OK;
}

msda_status msda__backward_job(msda_job *job, const msda_problem *problem, const float *grad_output,
                               const void *value, const float *sampling_locations,
                               const float *attention_weights, float *grad_value,
                               float *grad_sampling_locations, float *grad_attention_weights, msda_error *err)
{
    msda_plan plan;
    msda_status st = msda__plan(problem, &plan, err);
    if (st != MSDA_OK) return st;
    const buffer_ref bufs[] = {
        {"grad_output", grad_output, plan.output_elements, 0, 0},
        {"value", value, plan.value_elements, 0, plan.value_dtype != MSDA_FLOAT32},
        {"sampling_locations", sampling_locations, plan.locations_elements, 0, 0},
        {"attention_weights", attention_weights, plan.weights_elements, 0, 0},
        {"grad_value", grad_value, plan.value_elements, 1, 0},
        {"grad_sampling_locations", grad_sampling_locations, plan.locations_elements, 1, 0},
        {"grad_attention_weights", grad_attention_weights, plan.weights_elements, 1, 0},
    };
    st = check_buffers(bufs, 7, err);
    if (st == MSDA_OK) st = msda__isa_check(err);
    if (st != MSDA_OK) return st;
    memset(job, 0, sizeof *job);
    job->plan = plan;
    job->tensors.grad_output = grad_output;
    job->tensors.value = value;
    job->tensors.sampling_locations = sampling_locations;
    job->tensors.attention_weights = attention_weights;
    job->tensors.grad_value = grad_value;
    job->tensors.grad_sampling_locations = grad_sampling_locations;
    job->tensors.grad_attention_weights = grad_attention_weights;
    job->kind = MSDA_JOB_BACKWARD;
    job->threads = problem->threads;
    job->units = msda__backward_units(&job->plan);
    return MSDA_OK;
}

msda_status msda_forward(const msda_problem *problem, const void *value, const float *sampling_locations,
                         const float *attention_weights, float *output, msda_error *err)
{
    msda_job job;
    msda_status st = msda__forward_job(&job, problem, value, sampling_locations, attention_weights, output, err);
    return st != MSDA_OK ? st : msda__run(&job, err);
}

msda_status msda_backward(const msda_problem *problem, const float *grad_output, const void *value,
                          const float *sampling_locations, const float *attention_weights, float *grad_value,
                          float *grad_sampling_locations, float *grad_attention_weights, msda_error *err)
{
    msda_job job;
    msda_status st = msda__backward_job(&job, problem, grad_output, value, sampling_locations, attention_weights,
                                        grad_value, grad_sampling_locations, grad_attention_weights, err);
    return st != MSDA_OK ? st : msda__run(&job, err);
}
