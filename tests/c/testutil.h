/* Test helpers: a seeded RNG, random problem builders, tolerance comparison that names the
 * worst element, and pass/fail counting that ends with "N passed, N failed". */
#ifndef MSDA_TEST_UTIL_H
#define MSDA_TEST_UTIL_H

#include <stdint.h>
#include <stddef.h>

#include "msda.h"
#include "options.h"

/* splitmix64: tiny, seedable, the same sequence on every platform. */
typedef struct tu_rng { uint64_t state; } tu_rng;
void tu_rng_seed(tu_rng *rng, uint64_t seed);
uint64_t tu_rng_next(tu_rng *rng);
double tu_uniform(tu_rng *rng, double lo, double hi);   /* [lo, hi) */
int64_t tu_int(tu_rng *rng, int64_t lo, int64_t hi);    /* [lo, hi] */

/* The option combinations: every value of every option of src/options.h, numbered in mixed radix
 * (the first option's value changes fastest; with two values each, bit i of a combination is
 * option i's value: bit 0 value layout BNLC, bit 1 B2QHLP, bit 2 align_corners, bit 3 border). */
int tu_combos(void);
#define TU_COMBOS tu_combos()
void tu_set_combo(msda_problem *p, int combo);
/* The value of option `id` (MSDA_OPTION_*) in combination `combo`, and `combo` with it set to `value`. */
int tu_combo_value(int combo, int id);
int tu_combo_with(int combo, int id, int value);

#define TU_MAX_LEVELS 24

/* A problem with its own shape arrays and float inputs (malloc'd). */
typedef struct tu_case {
    msda_problem p;
    int64_t spatial_shapes[2 * TU_MAX_LEVELS];
    int64_t level_start_index[TU_MAX_LEVELS];
    uint64_t seed;                 /* printed in failure messages */
    float *value, *sampling_locations, *attention_weights, *grad_output;
    int64_t value_elements, locations_elements, weights_elements, output_elements;
} tu_case;

/* Sets the dimensions, shapes (num_levels (H, W) rows), starts, options and allocates the
 * inputs (zeroed). */
void tu_case_init(tu_case *tc, uint64_t seed, int64_t batch, int64_t num_queries, int64_t num_heads,
                  int64_t channels, int64_t num_levels, int64_t num_points, const int64_t *shapes, int combo);
/* Random small dimensions (awkward ones included) from tc->seed, then tu_case_fill. */
void tu_case_random(tu_case *tc, uint64_t seed, int combo);
/* Random inputs: value and grad_output in [-1, 1), weights in [0, 1), locations in [loc_lo, loc_hi). */
void tu_case_fill(tu_case *tc, tu_rng *rng, double loc_lo, double loc_hi);
/* Replaces about `fraction` of the location coordinates with far-away or non-finite values
 * (+-1e30, +-inf, NaN, a few widths outside). */
void tu_case_sprinkle_far(tu_case *tc, tu_rng *rng, double fraction);
void tu_case_free(tu_case *tc);
/* Half-precision bits near x (test data, not a rounding rule: the mantissa truncated; NaN stays
 * NaN, and float16 outside its range becomes 0 or Inf): bfloat16 x's top half, else float16. */
uint16_t tu_half_of(float x, int bfloat16);
/* tc's value as half-precision bits (tu_half_of, a fresh array), and tc->value replaced by their
 * float32 values (msda_widen_half): a float32 call on tc then computes on the same values as a
 * call on the bits with value_dtype MSDA_BFLOAT16 (bfloat16) or MSDA_FLOAT16. */
uint16_t *tu_case_half_value(tu_case *tc, int bfloat16);

/* "seed=... B=2 Nq=3 Nh=1 C=5 Nl=2 Np=2 shapes=[(1x1),(4x3)] value_layout=BLNC locations_layout=BQHLP2
 * align_corners=0 padding=zeros" */
const char *tu_case_describe(const tu_case *tc);
const char *tu_combo_name(const msda_problem *p);

void *tu_xmalloc(size_t bytes);            /* aborts the test program on failure */
float *tu_floats(int64_t n);
double *tu_doubles(int64_t n);

/* Element i passes when |got - ref| <= abs + rel*|ref| + rel_max*max_j|ref_j|
 * (NaN matches NaN, inf matches the same inf). */
typedef struct tu_tol { double abs, rel, rel_max; } tu_tol;
extern const tu_tol TU_TOL_F32;            /* 1e-5 + 1e-4*|ref| */

/* Compares, counts one check, and on failure prints what, context, the number of bad elements
 * and the worst one (index, got, expected). Returns 1 when all pass. */
int tu_compare_f(const char *what, const char *context, const float *got, const double *ref, int64_t n, tu_tol tol);
int tu_compare_d(const char *what, const char *context, const double *got, const double *ref, int64_t n, tu_tol tol);

/* Counts one check; prints "FAIL: <message>" when !ok. Returns ok. */
int tu_check(int ok, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Prints "N passed, N failed"; returns the exit status (0 when nothing failed). */
int tu_finish(void);

#endif
