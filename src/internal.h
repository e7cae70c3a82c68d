/* Shared between the entry points, the kernels and the thread pool; not public. */
#ifndef MSDA_INTERNAL_H
#define MSDA_INTERNAL_H

#include "msda.h"

/* A validated problem with its layouts turned into element strides, so kernels never
 * branch on a layout name. */
typedef struct msda_plan {
    int64_t batch, num_queries, num_heads, channels, num_levels, num_points, value_length;
    const int64_t *spatial_shapes;
    const int64_t *level_start_index;
    int align_corners;
    /* grad_value is zero already (msda__run's first stage of a threaded backward): units leave it */
    int grad_value_zeroed;
    msda_padding padding;
    int value_dtype;   /* msda_dtype: MSDA_FLOAT32, MSDA_FLOAT16 or MSDA_BFLOAT16 */
    /* value[b, pixel, h, c] = value[b*value_stride_batch + pixel*value_stride_pixel
     *                               + h*value_stride_head + c] */
    int64_t value_stride_batch, value_stride_pixel, value_stride_head;
    /* sampling_locations[b, q, h, l, p, xy] likewise */
    int64_t loc_stride_batch, loc_stride_query, loc_stride_head, loc_stride_level,
            loc_stride_point, loc_stride_xy;
    /* element counts */
    int64_t value_elements, locations_elements, weights_elements, output_elements;
} msda_plan;

typedef struct msda_tensors {
    const void *value;   /* of plan->value_dtype */
    const float *sampling_locations;
    const float *attention_weights;
    const float *grad_output;
    float *output;
    float *grad_value;
    float *grad_sampling_locations;
    float *grad_attention_weights;
} msda_tensors;

msda_status msda__plan(const msda_problem *problem, msda_plan *plan, msda_error *err);
void msda__set_error(msda_error *err, msda_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Work is split into independent units; each output element belongs to exactly one unit
 * and each unit sums in a fixed order, so any partition of units over threads gives the
 * same bits.
 * Forward units are (batch, head, block of queries); backward units are (batch, level, head),
 * which own that level's rows of the head's grad_value and the location/weight gradients of its
 * samples (a sample touches only its own level's rows; kernel/backward.h). A range of units is
 * walked in one pass over grad_output and the locations a rectangle of (levels, heads). */
int64_t msda__forward_units(const msda_plan *plan);
int64_t msda__backward_units(const msda_plan *plan);
void msda__forward_range(const msda_plan *plan, const msda_tensors *t, int64_t begin, int64_t end);
void msda__backward_range(const msda_plan *plan, const msda_tensors *t, int64_t begin, int64_t end);

#define MSDA_FORWARD_QUERY_BLOCK 64

/* The ISA the kernels run on (kernel_dispatch.c): MSDA_OK, or MSDA_ERR_INVALID_OPTION when the MSDA_ISA
 * environment variable names one this CPU does not have. msda__set_isa switches to one by name
 * (tests); 0 when this CPU does not have it. */
msda_status msda__isa_check(msda_error *err);
int msda__set_isa(const char *name);

#endif
