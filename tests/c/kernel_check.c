/* The kernel tests' shared runs (see kernel_check.h). */
#include "kernel_check.h"
#include "msda.h"
#include "reference.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kc_same_bits(const float *a, const float *b, int64_t n)
{
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

void kc_results_alloc(kc_results *r, const tu_case *tc)
{
    r->output = tu_floats(tc->output_elements);
    r->grad_value = tu_floats(tc->value_elements);
    r->grad_locations = tu_floats(tc->locations_elements);
    r->grad_weights = tu_floats(tc->weights_elements);
    r->ref_output = tu_doubles(tc->output_elements);
    r->ref_grad_value = tu_doubles(tc->value_elements);
    r->ref_grad_locations = tu_doubles(tc->locations_elements);
    r->ref_grad_weights = tu_doubles(tc->weights_elements);
}

void kc_results_free(kc_results *r)
{
    free(r->output); free(r->grad_value); free(r->grad_locations); free(r->grad_weights);
    free(r->ref_output); free(r->ref_grad_value); free(r->ref_grad_locations); free(r->ref_grad_weights);
}

/* Garbage in every output, so an element the kernel forgets to write shows up. */
void kc_fill_garbage(float *x, int64_t n, float garbage)
{
    for (int64_t i = 0; i < n; i++) x[i] = garbage;
}

/* Runs the library (outputs pre-filled with garbage) and the reference; returns 0 if the
 * library refused the problem. */
int kc_run(const tu_case *tc, kc_results *r, float garbage)
{
    const char *ctx = tu_case_describe(tc);
    msda_error err;
    kc_fill_garbage(r->output, tc->output_elements, garbage);
    kc_fill_garbage(r->grad_value, tc->value_elements, garbage);
    kc_fill_garbage(r->grad_locations, tc->locations_elements, garbage);
    kc_fill_garbage(r->grad_weights, tc->weights_elements, garbage);
    msda_status st = msda_forward(&tc->p, tc->value, tc->sampling_locations, tc->attention_weights,
                                  r->output, &err);
    if (!tu_check(st == MSDA_OK, "forward refused a valid case [%s]: %s", ctx, err.message)) return 0;
    st = msda_backward(&tc->p, tc->grad_output, tc->value, tc->sampling_locations, tc->attention_weights,
                       r->grad_value, r->grad_locations, r->grad_weights, &err);
    if (!tu_check(st == MSDA_OK, "backward refused a valid case [%s]: %s", ctx, err.message)) return 0;
    ref_forward(&tc->p, tc->value, tc->sampling_locations, tc->attention_weights, r->ref_output);
    ref_backward(&tc->p, tc->grad_output, tc->value, tc->sampling_locations, tc->attention_weights,
                 r->ref_grad_value, r->ref_grad_locations, r->ref_grad_weights);
    return 1;
}

void kc_compare_all(const tu_case *tc, const kc_results *r, const char *label)
{
    const char *ctx = tu_case_describe(tc);
    char what[128];
    snprintf(what, sizeof what, "%s output", label);
    tu_compare_f(what, ctx, r->output, r->ref_output, tc->output_elements, TU_TOL_F32);
    snprintf(what, sizeof what, "%s grad_value", label);
    tu_compare_f(what, ctx, r->grad_value, r->ref_grad_value, tc->value_elements, TU_TOL_F32);
    snprintf(what, sizeof what, "%s grad_sampling_locations", label);
    tu_compare_f(what, ctx, r->grad_locations, r->ref_grad_locations, tc->locations_elements, TU_TOL_F32);
    snprintf(what, sizeof what, "%s grad_attention_weights", label);
    tu_compare_f(what, ctx, r->grad_weights, r->ref_grad_weights, tc->weights_elements, TU_TOL_F32);
}

void kc_check_case(const tu_case *tc, const char *label, float garbage)
{
    kc_results r;
    kc_results_alloc(&r, tc);
    if (kc_run(tc, &r, garbage)) kc_compare_all(tc, &r, label);
    kc_results_free(&r);
}
