/* What the kernel tests (tests/c/test_kernel*.c) share: one run of the library and of the
 * float64 reference on a case, outputs pre-filled with garbage, compared within TU_TOL_F32. */
#ifndef MSDA_TEST_KERNEL_CHECK_H
#define MSDA_TEST_KERNEL_CHECK_H

#include "testutil.h"

/* Outputs of one run of the library and the reference on one case. */
typedef struct kc_results {
    float *output, *grad_value, *grad_locations, *grad_weights;
    double *ref_output, *ref_grad_value, *ref_grad_locations, *ref_grad_weights;
} kc_results;

void kc_results_alloc(kc_results *r, const tu_case *tc);
void kc_results_free(kc_results *r);
/* Garbage in every output, so an element the kernel forgets to write shows up. */
void kc_fill_garbage(float *x, int64_t n, float garbage);
/* Runs the library (outputs pre-filled with garbage) and the reference; 0 if the library
 * refused the problem. */
int kc_run(const tu_case *tc, kc_results *r, float garbage);
void kc_compare_all(const tu_case *tc, const kc_results *r, const char *label);
/* Are the n floats at a and b the same bits? */
int kc_same_bits(const float *a, const float *b, int64_t n);
/* kc_run and kc_compare_all on a case. */
void kc_check_case(const tu_case *tc, const char *label, float garbage);

#endif
