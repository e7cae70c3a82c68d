/* Central finite differences of the float64 forward (objective sum(grad_output * output))
 * against the analytic gradients of both the float64 reference and the float32 kernels, over
 * all 16 option combinations. Sample coordinates are kept >= 1e-3 pixel from grid lines
 * (bilinear interpolation has kinks there), as SEMANTICS.md asks. */
#include "reference.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define STEP 1e-6
#define MIN_GRID_DISTANCE 1e-3   /* pixels */
#define VALUE_PROBES 48          /* value is linear: a random subset of its elements suffices */

/* FD against the float64 analytic gradient: truncation is nil (bilinear is linear along each
 * axis), so only rounding of the step remains. */
static const tu_tol TOL_REFERENCE = {1e-8, 1e-6, 0.0};
/* FD against float32 kernels: float rounding, judged also against the tensor's largest
 * magnitude where a dot product cancels. */
static const tu_tol TOL_KERNEL = {1e-5, 1e-4, 1e-5};

/* Pixel-space coordinate of a normalised one along an axis of `size` pixels (before clamping). */
static double pixel_coordinate(const msda_problem *p, double coord, int64_t size)
{
    return p->align_corners ? coord * (double)(size - 1) : coord * (double)size - 0.5;
}

/* Draws every location coordinate until it sits >= MIN_GRID_DISTANCE from a grid line (the
 * border clamp edges and zeros-padding cut-offs are grid lines too). */
static void place_locations(tu_case *tc, tu_rng *rng)
{
    const msda_problem *p = &tc->p;
    for (int64_t b = 0; b < p->batch; b++)
    for (int64_t q = 0; q < p->num_queries; q++)
    for (int64_t h = 0; h < p->num_heads; h++)
    for (int64_t l = 0; l < p->num_levels; l++)
    for (int64_t pt = 0; pt < p->num_points; pt++)
    for (int xy = 0; xy < 2; xy++) {
        const int64_t size = p->spatial_shapes[2 * l + (xy == 0 ? 1 : 0)];
        float x;
        for (;;) {
            x = (float)tu_uniform(rng, -0.3, 1.3);
            if (p->align_corners && size == 1) break;   /* u is 0 for every x: nothing to avoid */
            const double u = pixel_coordinate(p, (double)x, size);
            if (fabs(u - nearbyint(u)) >= MIN_GRID_DISTANCE) break;
        }
        tc->sampling_locations[ref_location_index(p, b, q, h, l, pt, xy)] = x;
    }
}

static double *widen(const float *x, int64_t n)
{
    double *d = tu_doubles(n);
    for (int64_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

typedef struct inputs {
    double *value, *locations, *weights, *grad_output, *scratch_output;
} inputs;

/* sum(grad_output * forward(inputs)) */
static double objective(const msda_problem *p, const inputs *in)
{
    ref_forward_d(p, in->value, in->locations, in->weights, in->scratch_output);
    double sum = 0.0;
    for (int64_t i = 0; i < ref_output_elements(p); i++) sum += in->grad_output[i] * in->scratch_output[i];
    return sum;
}

static double central_difference(const msda_problem *p, const inputs *in, double *x)
{
    const double saved = *x;
    *x = saved + STEP;
    const double plus = objective(p, in);
    *x = saved - STEP;
    const double minus = objective(p, in);
    *x = saved;
    return (plus - minus) / (2 * STEP);
}

/* FD of one tensor at the given element indices, and the two analytic gradients gathered at
 * the same indices; compares both. */
static void check_tensor(const char *name, const tu_case *tc, const inputs *in, double *tensor,
                         const int64_t *indices, int64_t n, const double *ref_grad, const float *kernel_grad)
{
    double *fd = tu_doubles(n), *ref = tu_doubles(n);
    float *kernel = tu_floats(n);
    for (int64_t i = 0; i < n; i++) {
        fd[i] = central_difference(&tc->p, in, &tensor[indices[i]]);
        ref[i] = ref_grad[indices[i]];
        kernel[i] = kernel_grad[indices[i]];
    }
    char what[160];
    /* Element numbers in failure messages are positions in `indices`: show the first few
     * failing ones with their flat index in the tensor. */
    snprintf(what, sizeof what, "reference %s vs finite differences", name);
    tu_compare_d(what, tu_case_describe(tc), ref, fd, n, TOL_REFERENCE);
    snprintf(what, sizeof what, "kernel %s vs finite differences", name);
    tu_compare_f(what, tu_case_describe(tc), kernel, fd, n, TOL_KERNEL);
    for (int64_t i = 0, shown = 0; i < n && shown < 4; i++) {
        const double scale = fabs(fd[i]);
        if (fabs(ref[i] - fd[i]) <= TOL_REFERENCE.abs + TOL_REFERENCE.rel * scale &&
            fabs(kernel[i] - fd[i]) <= TOL_KERNEL.abs + TOL_KERNEL.rel * scale)
            continue;
        printf("  [%lld] = %s flat index %lld: fd %.12g reference %.12g kernel %.9g\n", (long long)i, name,
               (long long)indices[i], fd[i], ref[i], (double)kernel[i]);
        shown++;
    }
    free(fd);
    free(ref);
    free(kernel);
}

static void check_case(tu_case *tc)
{
    const msda_problem *p = &tc->p;
    const char *ctx = tu_case_describe(tc);
    float *grad_value = tu_floats(tc->value_elements), *grad_locations = tu_floats(tc->locations_elements),
          *grad_weights = tu_floats(tc->weights_elements);
    msda_error err;
    if (!tu_check(msda_backward(p, tc->grad_output, tc->value, tc->sampling_locations, tc->attention_weights,
                                grad_value, grad_locations, grad_weights, &err) == MSDA_OK,
                  "backward refused [%s]: %s", ctx, err.message))
        goto done;

    inputs in = {widen(tc->value, tc->value_elements), widen(tc->sampling_locations, tc->locations_elements),
                 widen(tc->attention_weights, tc->weights_elements),
                 widen(tc->grad_output, tc->output_elements), tu_doubles(tc->output_elements)};
    double *ref_grad_value = tu_doubles(tc->value_elements), *ref_grad_locations = tu_doubles(tc->locations_elements),
           *ref_grad_weights = tu_doubles(tc->weights_elements);
    ref_backward_d(p, in.grad_output, in.value, in.locations, in.weights, ref_grad_value, ref_grad_locations,
                   ref_grad_weights);

    int64_t *indices = tu_xmalloc((size_t)(tc->locations_elements + tc->value_elements) * sizeof *indices);
    for (int64_t i = 0; i < tc->locations_elements; i++) indices[i] = i;
    check_tensor("grad_sampling_locations", tc, &in, in.locations, indices, tc->locations_elements,
                 ref_grad_locations, grad_locations);
    check_tensor("grad_attention_weights", tc, &in, in.weights, indices, tc->weights_elements,
                 ref_grad_weights, grad_weights);
    tu_rng rng;
    tu_rng_seed(&rng, tc->seed ^ 0xABCDEFull);
    const int64_t probes = tc->value_elements < VALUE_PROBES ? tc->value_elements : VALUE_PROBES;
    for (int64_t i = 0; i < probes; i++)
        indices[i] = probes == tc->value_elements ? i : tu_int(&rng, 0, tc->value_elements - 1);
    check_tensor("grad_value", tc, &in, in.value, indices, probes, ref_grad_value, grad_value);

    free(indices);
    free(in.value); free(in.locations); free(in.weights); free(in.grad_output); free(in.scratch_output);
    free(ref_grad_value); free(ref_grad_locations); free(ref_grad_weights);
done:
    free(grad_value); free(grad_locations); free(grad_weights);
}

int main(void)
{
    static const int64_t channels[] = {1, 3, 5};
    static const int64_t level_kinds[][2] = {{1, 1}, {1, 4}, {4, 1}, {3, 5}, {4, 4}, {2, 3}};
    for (int combo = 0; combo < TU_COMBOS; combo++) {
        for (uint64_t i = 0; i < 8; i++) {
            const uint64_t seed = 200000 + 100 * (uint64_t)combo + i;
            tu_rng rng;
            tu_rng_seed(&rng, seed);
            const int64_t num_levels = tu_int(&rng, 1, 3);
            int64_t shapes[2 * TU_MAX_LEVELS];
            for (int64_t l = 0; l < num_levels; l++) {
                const int64_t k = tu_int(&rng, 0, 5);
                shapes[2 * l] = level_kinds[k][0];
                shapes[2 * l + 1] = level_kinds[k][1];
            }
            tu_case tc;
            tu_case_init(&tc, seed, tu_int(&rng, 1, 2), tu_int(&rng, 1, 2), tu_int(&rng, 1, 2),
                         channels[tu_int(&rng, 0, 2)], num_levels, tu_int(&rng, 1, 2), shapes, combo);
            tu_case_fill(&tc, &rng, 0, 1);
            place_locations(&tc, &rng);
            check_case(&tc);
            tu_case_free(&tc);
        }
    }
    return tu_finish();
}
