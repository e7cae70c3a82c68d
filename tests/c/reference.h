/* A plain float64 reference of SEMANTICS.md, for tests only.
 *
 * Written independently of src/kernel/: indices come straight from the layouts named in the
 * problem (not from the library's plan), every sum is in double, and nothing is optimised.
 * Inputs are in the layouts the problem says; outputs are double, with the same shapes and
 * layouts as the library's float outputs. Only p's fields are read (p need not be validated by
 * the library, but must be valid: sizes >= 1, L = sum H*W). */
#ifndef MSDA_TEST_REFERENCE_H
#define MSDA_TEST_REFERENCE_H

#include "msda.h"

/* Element counts, from the dimensions alone. */
int64_t ref_value_elements(const msda_problem *p);      /* B*L*N_h*C_h */
int64_t ref_locations_elements(const msda_problem *p);  /* B*N_q*N_h*N_l*N_p*2 */
int64_t ref_weights_elements(const msda_problem *p);    /* B*N_q*N_h*N_l*N_p */
int64_t ref_output_elements(const msda_problem *p);     /* B*N_q*N_h*C_h */

/* Flat indices in the problem's layouts. */
int64_t ref_value_index(const msda_problem *p, int64_t b, int64_t pixel, int64_t h, int64_t c);
int64_t ref_location_index(const msda_problem *p, int64_t b, int64_t q, int64_t h, int64_t l,
                           int64_t pt, int xy);
int64_t ref_weight_index(const msda_problem *p, int64_t b, int64_t q, int64_t h, int64_t l, int64_t pt);
int64_t ref_output_index(const msda_problem *p, int64_t b, int64_t q, int64_t h, int64_t c);

void ref_forward(const msda_problem *p, const float *value, const float *sampling_locations,
                 const float *attention_weights, double *output);
void ref_backward(const msda_problem *p, const float *grad_output, const float *value,
                  const float *sampling_locations, const float *attention_weights,
                  double *grad_value, double *grad_sampling_locations, double *grad_attention_weights);

/* The same on double inputs (for finite differences). */
void ref_forward_d(const msda_problem *p, const double *value, const double *sampling_locations,
                   const double *attention_weights, double *output);
void ref_backward_d(const msda_problem *p, const double *grad_output, const double *value,
                    const double *sampling_locations, const double *attention_weights,
                    double *grad_value, double *grad_sampling_locations, double *grad_attention_weights);

#endif
