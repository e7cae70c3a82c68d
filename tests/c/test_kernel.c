/* Kernels against the float64 reference: seeded random cases over all 16 option combinations,
 * awkward shapes, far-outside and non-finite samples, exact grid/edge coordinates, overwrite
 * semantics, and bit-for-bit determinism. */
#include "internal.h"
#include "threads.h"
#include "reference.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Outputs of one run of the library and the reference on one case. */
typedef struct results {
    float *output, *grad_value, *grad_locations, *grad_weights;
    double *ref_output, *ref_grad_value, *ref_grad_locations, *ref_grad_weights;
} results;

static void results_alloc(results *r, const tu_case *tc)
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

static void results_free(results *r)
{
    free(r->output); free(r->grad_value); free(r->grad_locations); free(r->grad_weights);
    free(r->ref_output); free(r->ref_grad_value); free(r->ref_grad_locations); free(r->ref_grad_weights);
}

/* Garbage in every output, so an element the kernel forgets to write shows up. */
static void fill_garbage(float *x, int64_t n, float garbage)
{
    for (int64_t i = 0; i < n; i++) x[i] = garbage;
}

/* Runs the library (outputs pre-filled with garbage) and the reference; returns 0 if the
 * library refused the problem. */
static int run(const tu_case *tc, results *r, float garbage)
{
    const char *ctx = tu_case_describe(tc);
    msda_error err;
    fill_garbage(r->output, tc->output_elements, garbage);
    fill_garbage(r->grad_value, tc->value_elements, garbage);
    fill_garbage(r->grad_locations, tc->locations_elements, garbage);
    fill_garbage(r->grad_weights, tc->weights_elements, garbage);
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

static void compare_all(const tu_case *tc, const results *r, const char *label)
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

static void check_case(const tu_case *tc, const char *label, float garbage)
{
    results r;
    results_alloc(&r, tc);
    if (run(tc, &r, garbage)) compare_all(tc, &r, label);
    results_free(&r);
}

/* Random dimensions and inputs, samples in [-0.25, 1.25); every other case also gets some
 * far-outside and non-finite coordinates. Garbage alternates NaN / a large number. */
static void test_random(void)
{
    for (int combo = 0; combo < TU_COMBOS; combo++) {
        for (uint64_t i = 0; i < 12; i++) {
            tu_case tc;
            const uint64_t seed = 1000 * (uint64_t)combo + i;
            tu_case_random(&tc, seed, combo);
            if (i & 1) {
                tu_rng rng;
                tu_rng_seed(&rng, ~seed);
                tu_case_sprinkle_far(&tc, &rng, 0.2);
            }
            check_case(&tc, (i & 1) ? "random+far" : "random", (i & 2) ? NAN : 12345.0f);
            tu_case_free(&tc);
        }
    }
}

/* The shapes the issue names: C_h in {1, 3, 5, 32, 33}; 1x1, 1xN and Nx1 levels beside a
 * normal one; N_q = 1; B = 2; samples well outside [0, 1]. */
static void test_awkward_shapes(void)
{
    static const int64_t channels[] = {1, 3, 5, 32, 33};
    static const int64_t shapes[] = {1, 1, 1, 6, 5, 1, 3, 4};
    for (int combo = 0; combo < TU_COMBOS; combo++) {
        for (int ci = 0; ci < 5; ci++) {
            tu_case tc;
            const uint64_t seed = 50000 + 10 * (uint64_t)combo + (uint64_t)ci;
            tu_case_init(&tc, seed, 2, 1, 2, channels[ci], 4, 3, shapes, combo);
            tu_rng rng;
            tu_rng_seed(&rng, seed);
            tu_case_fill(&tc, &rng, -0.6, 1.6);
            check_case(&tc, "awkward", NAN);
            tu_case_free(&tc);
        }
        /* Single level of each degenerate kind, alone. */
        static const int64_t single[][2] = {{1, 1}, {1, 7}, {7, 1}};
        for (int s = 0; s < 3; s++) {
            tu_case tc;
            const uint64_t seed = 60000 + 10 * (uint64_t)combo + (uint64_t)s;
            tu_case_init(&tc, seed, 1, 1, 1, 3, 1, 4, single[s], combo);
            tu_rng rng;
            tu_rng_seed(&rng, seed);
            tu_case_fill(&tc, &rng, -0.6, 1.6);
            check_case(&tc, "single level", NAN);
            tu_case_free(&tc);
        }
    }
}

/* Every location coordinate far outside or non-finite: per SEMANTICS, zeros padding gives
 * exactly 0 everywhere, border padding clamps +-inf / huge values to the edge, NaN gives 0. */
static void test_far_outside(void)
{
    static const float far[] = {1e30f, -1e30f, INFINITY, -INFINITY, NAN, 1e7f, -1e7f, 2.5f, -1.5f};
    static const int64_t shapes[] = {3, 4, 1, 1, 1, 5};
    const int nfar = (int)(sizeof far / sizeof far[0]);
    for (int combo = 0; combo < TU_COMBOS; combo++) {
        tu_case tc;
        const uint64_t seed = 70000 + (uint64_t)combo;
        /* num_points = nfar*nfar pairs every far x with every far y on every level */
        tu_case_init(&tc, seed, 1, 1, 1, 5, 3, nfar * nfar, shapes, combo);
        tu_rng rng;
        tu_rng_seed(&rng, seed);
        tu_case_fill(&tc, &rng, 0, 1);
        for (int64_t l = 0; l < 3; l++)
            for (int64_t pt = 0; pt < nfar * nfar; pt++) {
                tc.sampling_locations[ref_location_index(&tc.p, 0, 0, 0, l, pt, 0)] = far[pt % nfar];
                tc.sampling_locations[ref_location_index(&tc.p, 0, 0, 0, l, pt, 1)] = far[pt / nfar];
            }
        results r;
        results_alloc(&r, &tc);
        if (run(&tc, &r, NAN)) {
            compare_all(&tc, &r, "far outside");
            /* Beyond agreeing with the reference: finite everywhere (no NaN leaks from a NaN
             * coordinate or from 0 * inf), and zeros padding gives exact zeros. */
            int finite = 1, zero = 1;
            for (int64_t i = 0; i < tc.output_elements; i++) finite &= isfinite(r.output[i]) != 0;
            for (int64_t i = 0; i < tc.locations_elements; i++) finite &= isfinite(r.grad_locations[i]) != 0;
            for (int64_t i = 0; i < tc.weights_elements; i++) finite &= isfinite(r.grad_weights[i]) != 0;
            for (int64_t i = 0; i < tc.value_elements; i++) finite &= isfinite(r.grad_value[i]) != 0;
            tu_check(finite, "far outside: a non-finite result [%s]", tu_case_describe(&tc));
            /* Zeros padding: level 0 (3x4) has no axis that align_corners collapses to u = 0, so
             * every one of its samples is far outside and its gradients are exactly 0. */
            for (int64_t pt = 0; pt < nfar * nfar; pt++) {
                zero &= r.grad_locations[ref_location_index(&tc.p, 0, 0, 0, 0, pt, 0)] == 0.0f;
                zero &= r.grad_locations[ref_location_index(&tc.p, 0, 0, 0, 0, pt, 1)] == 0.0f;
                zero &= r.grad_weights[ref_weight_index(&tc.p, 0, 0, 0, 0, pt)] == 0.0f;
            }
            if (!tc.p.align_corners)
                for (int64_t i = 0; i < tc.output_elements; i++) zero &= r.output[i] == 0.0f;
            if (tc.p.padding == MSDA_PADDING_ZEROS)
                tu_check(zero, "far outside, zeros padding: output or level-0 gradients not exactly 0 [%s]",
                         tu_case_describe(&tc));
        }
        results_free(&r);
        tu_case_free(&tc);
    }
}

/* Coordinates exactly on pixel centres and edges (exact in float and double: W = 4 without
 * align_corners gives u = x*4 - 0.5, W = 5 with it gives u = x*4; x = k/8). Checks the clamp
 * convention at the edge and the one-sided gradient at the kinks. */
static void test_exact_grid(void)
{
    for (int combo = 0; combo < TU_COMBOS; combo++) {
        const int64_t n = tu_combo_value(combo, MSDA_OPTION_ALIGN_CORNERS) ? 5 : 4;
        const int64_t shapes[] = {n, n, 1, 1, 1, n};
        const int npos = 13;                          /* x = k/8, k = -2 .. 10 */
        tu_case tc;
        const uint64_t seed = 80000 + (uint64_t)combo;
        tu_case_init(&tc, seed, 1, 1, 1, 3, 3, npos * npos, shapes, combo);
        tu_rng rng;
        tu_rng_seed(&rng, seed);
        tu_case_fill(&tc, &rng, 0, 1);
        for (int64_t l = 0; l < 3; l++)
            for (int64_t pt = 0; pt < npos * npos; pt++) {
                tc.sampling_locations[ref_location_index(&tc.p, 0, 0, 0, l, pt, 0)] = (float)(pt % npos - 2) / 8.0f;
                tc.sampling_locations[ref_location_index(&tc.p, 0, 0, 0, l, pt, 1)] = (float)(pt / npos - 2) / 8.0f;
            }
        check_case(&tc, "exact grid", 777.0f);
        tu_case_free(&tc);
    }
}

/* NaN / inf in value, attention_weights and grad_output propagate (IEEE): every output is
 * non-finite exactly where the reference's is, and close to it elsewhere. */
static void compare_nonfinite(const char *what, const char *ctx, const float *got, const double *ref, int64_t n)
{
    double *g = tu_doubles(n), *e = tu_doubles(n);
    int64_t mismatch = -1;
    for (int64_t i = 0; i < n; i++) {
        const int gf = isfinite(got[i]) != 0, ef = isfinite(ref[i]) != 0;
        if (gf != ef && mismatch < 0) mismatch = i;
        g[i] = gf && ef ? got[i] : 0.0;
        e[i] = gf && ef ? ref[i] : 0.0;
    }
    if (mismatch >= 0)
        tu_check(0, "%s [%s]: finiteness differs at [%lld]: got %g expected %g", what, ctx, (long long)mismatch,
                 (double)got[mismatch], ref[mismatch]);
    else
        tu_compare_d(what, ctx, g, e, n, TU_TOL_F32);
    free(g);
    free(e);
}

static void test_nonfinite_inputs(void)
{
    static const int64_t shapes[] = {4, 5, 2, 3};
    for (int combo = 0; combo < TU_COMBOS; combo++) {
        tu_case tc;
        const uint64_t seed = 90000 + (uint64_t)combo;
        tu_case_init(&tc, seed, 1, 6, 2, 5, 2, 2, shapes, combo);
        tu_rng rng;
        tu_rng_seed(&rng, seed);
        tu_case_fill(&tc, &rng, 0.05, 0.95);
        tc.value[tu_int(&rng, 0, tc.value_elements - 1)] = NAN;
        tc.value[tu_int(&rng, 0, tc.value_elements - 1)] = INFINITY;
        tc.attention_weights[tu_int(&rng, 0, tc.weights_elements - 1)] = NAN;
        tc.attention_weights[tu_int(&rng, 0, tc.weights_elements - 1)] = -INFINITY;
        tc.grad_output[tu_int(&rng, 0, tc.output_elements - 1)] = INFINITY;
        /* Dead samples (NaN x) with a non-finite weight still contribute nothing and get 0
         * gradients: nothing multiplies their weight. */
        for (int64_t q = 0; q < tc.p.num_queries; q += 2)
            for (int64_t l = 0; l < 2; l++) {
                tc.sampling_locations[ref_location_index(&tc.p, 0, q, 1, l, 1, 0)] = NAN;
                tc.attention_weights[ref_weight_index(&tc.p, 0, q, 1, l, 1)] = q % 4 ? INFINITY : NAN;
            }
        results r;
        results_alloc(&r, &tc);
        if (run(&tc, &r, 0.0f)) {
            const char *ctx = tu_case_describe(&tc);
            compare_nonfinite("non-finite inputs output", ctx, r.output, r.ref_output, tc.output_elements);
            compare_nonfinite("non-finite inputs grad_value", ctx, r.grad_value, r.ref_grad_value,
                              tc.value_elements);
            compare_nonfinite("non-finite inputs grad_sampling_locations", ctx, r.grad_locations,
                              r.ref_grad_locations, tc.locations_elements);
            compare_nonfinite("non-finite inputs grad_attention_weights", ctx, r.grad_weights,
                              r.ref_grad_weights, tc.weights_elements);
        }
        results_free(&r);
        tu_case_free(&tc);
    }
}

/* An infinite attention weight gives a * S, as SEMANTICS defines the output: +-Inf where S is
 * nonzero (also at a pixel centre, where three corner weights are 0, and where corners of
 * both signs meet), NaN where S is 0 or NaN. Every non-finite reference value must come out
 * exactly (the sign of an Inf included); the rest close to it. */
static void compare_exact_nonfinite(const char *what, const char *ctx, const float *got, const double *ref, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(ref[i]) && !(isnan(ref[i]) ? isnan(got[i]) : (double)got[i] == ref[i])) {
            tu_check(0, "%s [%s]: element [%lld] is %g, expected %g", what, ctx, (long long)i, (double)got[i], ref[i]);
            return;
        }
    compare_nonfinite(what, ctx, got, ref, n);
}

static void test_infinite_weights(void)
{
    /* sides where the pixel centres are exact floats: W or W - 1 (align_corners) a power of 2 */
    static const int64_t plain[] = {4, 4, 2, 8}, aligned[] = {5, 5, 3, 9};
    for (int combo = 0; combo < TU_COMBOS; combo++) {
        const int64_t *shapes = tu_combo_value(combo, MSDA_OPTION_ALIGN_CORNERS) ? aligned : plain;
        tu_case tc;
        const uint64_t seed = 95000 + (uint64_t)combo;
        const int64_t P = 6;
        tu_case_init(&tc, seed, 1, 8, 2, 5, 2, P, shapes, combo);
        tu_rng rng;
        tu_rng_seed(&rng, seed);
        tu_case_fill(&tc, &rng, 0.05, 0.95);
        for (int64_t q = 0; q < tc.p.num_queries; q++)
            for (int64_t h = 0; h < 2; h++)
                for (int64_t l = 0; l < 2; l++) {
                    const int64_t Hl = shapes[2 * l], Wl = shapes[2 * l + 1];
                    for (int64_t pt = 0; pt < P; pt++) {
                        /* points 0-2: a pixel centre; 3: a quarter pixel off one; 4-5 random */
                        const int64_t j = tu_int(&rng, 0, Wl - 1), i = tu_int(&rng, 0, Hl - 1);
                        const double off = pt == 3 ? 0.25 : 0.0;
                        float x = tu_combo_value(combo, MSDA_OPTION_ALIGN_CORNERS) ? (float)((j + off) / (double)(Wl - 1)) : (float)((j + 0.5 + off) / (double)Wl);
                        float y = tu_combo_value(combo, MSDA_OPTION_ALIGN_CORNERS) ? (float)(i / (double)(Hl - 1)) : (float)((i + 0.5) / (double)Hl);
                        if (pt < 4) {
                            tc.sampling_locations[ref_location_index(&tc.p, 0, q, h, l, pt, 0)] = x;
                            tc.sampling_locations[ref_location_index(&tc.p, 0, q, h, l, pt, 1)] = y;
                        }
                        const int64_t iw = ref_weight_index(&tc.p, 0, q, h, l, pt);
                        if ((q + pt + l) % 3 == 0) tc.attention_weights[iw] = (q + h) % 2 ? -INFINITY : INFINITY;
                    }
                }
        /* a zero pixel somewhere: Inf * 0 there is NaN by the definition too */
        tc.value[tu_int(&rng, 0, tc.value_elements - 1)] = 0.0f;
        results r;
        results_alloc(&r, &tc);
        if (run(&tc, &r, 0.0f)) {
            const char *ctx = tu_case_describe(&tc);
            compare_exact_nonfinite("infinite weights output", ctx, r.output, r.ref_output, tc.output_elements);
            compare_nonfinite("infinite weights grad_value", ctx, r.grad_value, r.ref_grad_value, tc.value_elements);
            compare_nonfinite("infinite weights grad_attention_weights", ctx, r.grad_weights, r.ref_grad_weights,
                              tc.weights_elements);
        }
        results_free(&r);
        tu_case_free(&tc);
    }
}

/* Every NaN in every output is the one canonical NaN, 0x7fc00000, whatever NaNs went in
 * (payloads, both signs, signalling) and however they arose (Inf - Inf, Inf * 0). */
static int64_t noncanonical_nan(const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], sizeof bits);
        if (isnan(x[i]) && bits != 0x7fc00000u) return i;
    }
    return -1;
}

static float nan_bits(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static void test_canonical_nan(void)
{
    static const int64_t shapes[] = {4, 5, 2, 3};
    static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7fc00123u, 0xffc45678u, 0x7f800001u, 0xff800abcu};
    for (int combo = 0; combo < TU_COMBOS; combo++) {
        tu_case tc;
        const uint64_t seed = 97000 + (uint64_t)combo;
        tu_case_init(&tc, seed, 1, 12, 2, 9, 2, 3, shapes, combo);
        tu_rng rng;
        tu_rng_seed(&rng, seed);
        tu_case_fill(&tc, &rng, 0.05, 0.95);
        for (int k = 0; k < 6; k++) {
            tc.value[tu_int(&rng, 0, tc.value_elements - 1)] = nan_bits(nans[tu_int(&rng, 0, 5)]);
            tc.value[tu_int(&rng, 0, tc.value_elements - 1)] = k % 2 ? INFINITY : -INFINITY;
            tc.attention_weights[tu_int(&rng, 0, tc.weights_elements - 1)] = nan_bits(nans[tu_int(&rng, 0, 5)]);
            tc.attention_weights[tu_int(&rng, 0, tc.weights_elements - 1)] = k % 2 ? -INFINITY : INFINITY;
            tc.grad_output[tu_int(&rng, 0, tc.output_elements - 1)] = nan_bits(nans[tu_int(&rng, 0, 5)]);
            tc.grad_output[tu_int(&rng, 0, tc.output_elements - 1)] = k % 2 ? INFINITY : -INFINITY;
        }
        results r;
        results_alloc(&r, &tc);
        if (run(&tc, &r, 0.0f)) {
            const char *ctx = tu_case_describe(&tc);
            const float *outs[4] = {r.output, r.grad_value, r.grad_locations, r.grad_weights};
            const int64_t counts[4] = {tc.output_elements, tc.value_elements, tc.locations_elements, tc.weights_elements};
            static const char *names[4] = {"output", "grad_value", "grad_sampling_locations", "grad_attention_weights"};
            int64_t nan_total = 0;
            for (int o = 0; o < 4; o++) {
                for (int64_t i = 0; i < counts[o]; i++) nan_total += isnan(outs[o][i]) != 0;
                const int64_t at = noncanonical_nan(outs[o], counts[o]);
                uint32_t bits = 0;
                if (at >= 0) memcpy(&bits, &outs[o][at], sizeof bits);
                tu_check(at < 0, "canonical NaN %s [%s]: element [%lld] is a NaN with bits 0x%08x, expected 0x7fc00000",
                         names[o], ctx, (long long)at, (unsigned)bits);
            }
            tu_check(nan_total > 0, "canonical NaN [%s]: the case gives NaNs", ctx);
        }
        results_free(&r);
        tu_case_free(&tc);
    }
}

static int same_bits(const float *a, const float *b, int64_t n)
{
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

/* Same input, same bits: twice through the API, with other thread counts, and with the work
 * units run one at a time in reverse order (each output element has one writer and a fixed
 * summation order, so any partition of units gives the same bits). */
static void test_determinism(void)
{
    for (int combo = 0; combo < TU_COMBOS; combo++) {
        tu_case tc;
        const uint64_t seed = 100000 + (uint64_t)combo;
        static const int64_t shapes[] = {6, 7, 3, 3, 1, 1};
        tu_case_init(&tc, seed, 2, 70, 2, 33, 3, 3, shapes, combo);  /* 70 queries: two forward blocks */
        tu_rng rng;
        tu_rng_seed(&rng, seed);
        tu_case_fill(&tc, &rng, -0.1, 1.1);
        const char *ctx = tu_case_describe(&tc);
        results first, again;
        results_alloc(&first, &tc);
        results_alloc(&again, &tc);
        if (run(&tc, &first, NAN)) compare_all(&tc, &first, "two query blocks");
        static const int threads[] = {1, 2, 3};
        for (int ti = 0; ti < 3; ti++) {
            tc.p.threads = threads[ti];
            fill_garbage(again.output, tc.output_elements, 1.0f);
            fill_garbage(again.grad_value, tc.value_elements, 1.0f);
            fill_garbage(again.grad_locations, tc.locations_elements, 1.0f);
            fill_garbage(again.grad_weights, tc.weights_elements, 1.0f);
            msda_status st1 = msda_forward(&tc.p, tc.value, tc.sampling_locations, tc.attention_weights,
                                           again.output, NULL);
            msda_status st2 = msda_backward(&tc.p, tc.grad_output, tc.value, tc.sampling_locations,
                                            tc.attention_weights, again.grad_value, again.grad_locations,
                                            again.grad_weights, NULL);
            tu_check(st1 == MSDA_OK && st2 == MSDA_OK, "threads=%d refused [%s]", threads[ti], ctx);
            tu_check(same_bits(first.output, again.output, tc.output_elements) &&
                     same_bits(first.grad_value, again.grad_value, tc.value_elements) &&
                     same_bits(first.grad_locations, again.grad_locations, tc.locations_elements) &&
                     same_bits(first.grad_weights, again.grad_weights, tc.weights_elements),
                     "threads=%d: results differ in bits from the first run [%s]", threads[ti], ctx);
        }
        tc.p.threads = 1;

        msda_plan plan;
        msda_error err;
        if (tu_check(msda__plan(&tc.p, &plan, &err) == MSDA_OK, "plan refused [%s]: %s", ctx, err.message)) {
            fill_garbage(again.output, tc.output_elements, NAN);
            fill_garbage(again.grad_value, tc.value_elements, NAN);
            fill_garbage(again.grad_locations, tc.locations_elements, NAN);
            fill_garbage(again.grad_weights, tc.weights_elements, NAN);
            msda_tensors t = {tc.value, tc.sampling_locations, tc.attention_weights, tc.grad_output,
                              again.output, again.grad_value, again.grad_locations, again.grad_weights};
            for (int64_t u = msda__forward_units(&plan); u-- > 0;) msda__forward_range(&plan, &t, u, u + 1);
            for (int64_t u = msda__backward_units(&plan); u-- > 0;) msda__backward_range(&plan, &t, u, u + 1);
            tu_check(same_bits(first.output, again.output, tc.output_elements),
                     "forward units in reverse order: output differs in bits [%s]", ctx);
            tu_check(same_bits(first.grad_value, again.grad_value, tc.value_elements) &&
                     same_bits(first.grad_locations, again.grad_locations, tc.locations_elements) &&
                     same_bits(first.grad_weights, again.grad_weights, tc.weights_elements),
                     "backward units in reverse order: gradients differ in bits [%s]", ctx);
        }
        results_free(&first);
        results_free(&again);
        tu_case_free(&tc);
    }
}

/* Level sizes of a real model (a Deformable DETR pyramid for an 800x1200 image). The float32
 * pixel position x*W carries an error of ~W*2^-24 pixel, which the location gradient scales by W
 * again; SEMANTICS lets that tensor be judged against its largest magnitude where cancellation
 * makes single elements small. (Larger levels, from 200x300 up, exceed even that: see the report
 * on computing the pixel position exactly.) */
static void test_realistic_levels(void)
{
    static const int64_t shapes[] = {100, 150, 50, 75, 25, 38, 13, 19};
    static const tu_tol cancelling = {1e-5, 1e-4, 1e-4};
    for (int combo = 0; combo < TU_COMBOS; combo++) {
        tu_case tc;
        const uint64_t seed = 110000 + (uint64_t)combo;
        tu_case_init(&tc, seed, 1, 6, 2, 8, 4, 4, shapes, combo);
        tu_rng rng;
        tu_rng_seed(&rng, seed);
        tu_case_fill(&tc, &rng, -0.05, 1.05);
        results r;
        results_alloc(&r, &tc);
        if (run(&tc, &r, NAN)) {
            const char *ctx = tu_case_describe(&tc);
            tu_compare_f("realistic levels output", ctx, r.output, r.ref_output, tc.output_elements, TU_TOL_F32);
            tu_compare_f("realistic levels grad_value", ctx, r.grad_value, r.ref_grad_value, tc.value_elements,
                         TU_TOL_F32);
            tu_compare_f("realistic levels grad_sampling_locations", ctx, r.grad_locations, r.ref_grad_locations,
                         tc.locations_elements, cancelling);
            tu_compare_f("realistic levels grad_attention_weights", ctx, r.grad_weights, r.ref_grad_weights,
                         tc.weights_elements, TU_TOL_F32);
        }
        results_free(&r);
        tu_case_free(&tc);
    }
}

/* A level wider than 2^24 pixels takes the kernels' pointer-width corner path (int32 lanes and
 * exact float pixel indices no longer suffice). Coordinates are chosen so that the pixel position
 * is exact or small in float (x = 2^-k, j*2^-24 for small j, 0, and 1 with align_corners) plus
 * far and non-finite ones: float32 cannot place other points on such a level to within a pixel.
 * Two combinations (zeros / border, both layouts of each tensor) since each run touches 64 MB. */
static void test_wide_level(void)
{
    static const int64_t shapes[] = {1, (int64_t)1 << 24};
    static const int combos[] = {0, 1 | 2 | 4 | 8};
    for (int ci = 0; ci < 2; ci++) {
        const int combo = combos[ci];
        float xs[64];
        int n = 0;
        for (int k = 1; k <= 23; k++) xs[n++] = ldexpf(1.0f, -k);
        for (int j = 1; j <= 9; j += 2) xs[n++] = ldexpf((float)j, -24);
        xs[n++] = 0.0f;
        if (tu_combo_value(combo, MSDA_OPTION_ALIGN_CORNERS)) xs[n++] = 1.0f;   /* u = W - 1 exactly; without align_corners W - 0.5 rounds */
        xs[n++] = 1e30f;
        xs[n++] = -INFINITY;
        xs[n++] = NAN;
        xs[n++] = -0.75f;
        tu_case tc;
        const uint64_t seed = 120000 + (uint64_t)combo;
        tu_case_init(&tc, seed, 1, 2, 1, 1, 1, n, shapes, combo);
        tu_rng rng;
        tu_rng_seed(&rng, seed);
        for (int64_t i = 0; i < tc.value_elements; i++) tc.value[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
        for (int64_t i = 0; i < tc.weights_elements; i++) tc.attention_weights[i] = (float)tu_uniform(&rng, 0, 1);
        for (int64_t i = 0; i < tc.output_elements; i++) tc.grad_output[i] = (float)tu_uniform(&rng, -1, 1);
        for (int64_t q = 0; q < 2; q++)
            for (int64_t pt = 0; pt < n; pt++) {
                tc.sampling_locations[ref_location_index(&tc.p, 0, q, 0, 0, pt, 0)] = xs[pt];
                tc.sampling_locations[ref_location_index(&tc.p, 0, q, 0, 0, pt, 1)] = (float)tu_uniform(&rng, -0.6, 1.6);
            }
        check_case(&tc, "wide level", NAN);
        tu_case_free(&tc);
    }
}

/* Levels with a long side: 2^24 + 5 pixels (float can no longer hold the pixel position: it put
 * the last pixel's centre and edge one pixel too far, an out-of-bounds corner or a dropped sample
 * under zeros) and 2^20 + 3 (float places a sample up to 1/16 pixel off) as 1 x n / n x 1 and
 * 3 x n / n x 3. The kernels must give the reference's answer for any coordinate: random ones,
 * near and at the edges, far and non-finite ones. The four padding x align_corners
 * combinations, layouts varied, on both axes. */
static void test_long_side(int64_t n, int64_t across_size, int num_combos)
{
    static const int combos[] = {0, 1 | 4, 2 | 8, 1 | 2 | 4 | 8};
    for (int axis = 0; axis < 2; axis++)
        for (int ci = 0; ci < num_combos; ci++) {
            const int combo = combos[ci];
            const int64_t shapes[] = {axis ? n : across_size, axis ? across_size : n};
            float xs[64];
            int count = 0;
            const float nf = (float)n;
            xs[count++] = 1.0f;                                  /* u = W - 0.5 (or W - 1) */
            xs[count++] = nextafterf(1.0f, 0.0f);
            xs[count++] = (nf - 1.0f) / nf;                      /* near the last pixel's centre */
            xs[count++] = 0.0f;
            xs[count++] = 1.0f + 1.0f / nf;                      /* half a pixel past the edge */
            xs[count++] = -0.5f / nf;
            xs[count++] = 1e30f;
            xs[count++] = -INFINITY;
            xs[count++] = NAN;
            const int fixed = count;
            tu_case tc;
            const uint64_t seed = 125000 + (uint64_t)(n % 64 * 64 + axis * 16 + combo);
            tu_rng rng;
            tu_rng_seed(&rng, seed);
            while (count < 40) xs[count++] = (float)tu_uniform(&rng, -0.05, 1.05);
            tu_case_init(&tc, seed, 1, 2, 1, 2, 1, count, shapes, combo);
            for (int64_t i = 0; i < tc.value_elements; i++)
                tc.value[i] = i >= tc.value_elements - 2 ? 7.0f : (float)((i * 7919) % 1000) / 500.0f - 1.0f;
            for (int64_t i = 0; i < tc.weights_elements; i++) tc.attention_weights[i] = (float)tu_uniform(&rng, 0, 1);
            for (int64_t i = 0; i < tc.output_elements; i++) tc.grad_output[i] = (float)tu_uniform(&rng, -1, 1);
            for (int64_t q = 0; q < 2; q++)
                for (int64_t pt = 0; pt < count; pt++) {
                    /* query 1 samples the fixed coordinates alone, one at a time through the weights */
                    const float along = xs[pt], across = (float)tu_uniform(&rng, -0.2, 1.2);
                    tc.sampling_locations[ref_location_index(&tc.p, 0, q, 0, 0, pt, axis)] = along;
                    tc.sampling_locations[ref_location_index(&tc.p, 0, q, 0, 0, pt, 1 - axis)] = across;
                    if (q == 1) tc.attention_weights[ref_weight_index(&tc.p, 0, q, 0, 0, pt)] = pt < fixed ? 1.0f : 0.0f;
                }
            char label[64];
            snprintf(label, sizeof label, "level %lldx%lld", (long long)shapes[0], (long long)shapes[1]);
            check_case(&tc, label, NAN);
            tu_case_free(&tc);
        }
}

/* More threads than heads: the backward splits each head into parts (pixel ranges of
 * grad_value, query slices of the other gradients). Whatever the split, the bits must be those
 * of one unit per head: each split's units are run one at a time in reverse order and compared
 * with threads = 1, one query per pixel and fewer queries, one and two
 * heads, every option combination. */
static void test_split_heads(void)
{
    static const int64_t pyramid[] = {9, 7, 5, 4, 2, 3};    /* 63 + 20 + 6 = 89 */
    for (int combo = 0; combo < TU_COMBOS; combo++)
        for (int kind = 0; kind < 2; kind++) {
            tu_case tc;
            const uint64_t seed = 150000 + (uint64_t)(combo * 2 + kind);
            const int64_t heads = 1 + kind;
            tu_case_init(&tc, seed, 1, kind ? 40 : 89, heads, kind ? 5 : 32, 3, 3, pyramid, combo);
            tu_rng rng;
            tu_rng_seed(&rng, seed);
            tu_case_fill(&tc, &rng, -0.1, 1.1);
            const char *ctx = tu_case_describe(&tc);
            results one, split;
            results_alloc(&one, &tc);
            results_alloc(&split, &tc);
            if (run(&tc, &one, NAN)) compare_all(&tc, &one, "split heads, threads 1");
            static const int threads[] = {2, 3, 7, 64};
            for (int ti = 0; ti < 4; ti++) {
                msda_problem pr = tc.p;
                pr.threads = threads[ti];
                msda_job job;
                msda_error err;
                fill_garbage(split.grad_value, tc.value_elements, NAN);
                fill_garbage(split.grad_locations, tc.locations_elements, NAN);
                fill_garbage(split.grad_weights, tc.weights_elements, NAN);
                if (!tu_check(msda__backward_job(&job, &pr, tc.grad_output, tc.value, tc.sampling_locations,
                                                 tc.attention_weights, split.grad_value, split.grad_locations,
                                                 split.grad_weights, &err) == MSDA_OK,
                              "backward job refused [%s]: %s", ctx, err.message))
                    continue;
                /* threads / heads parts a head, from twice as many threads as heads on */
                const int64_t want_split = threads[ti] >= 2 * heads ? threads[ti] / heads : 1;
                tu_check(job.plan.backward_split == want_split && job.units == heads * want_split,
                         "threads %d over %lld heads: %lld parts a head, %lld units [%s]", threads[ti], (long long)heads,
                         (long long)job.plan.backward_split, (long long)job.units, ctx);
                for (int64_t u = job.units; u-- > 0;) msda__backward_range(&job.plan, &job.tensors, u, u + 1);
                tu_check(same_bits(one.grad_value, split.grad_value, tc.value_elements) &&
                             same_bits(one.grad_locations, split.grad_locations, tc.locations_elements) &&
                             same_bits(one.grad_weights, split.grad_weights, tc.weights_elements),
                         "backward split for %d threads, units in reverse: bits differ from 1 thread [%s]", threads[ti], ctx);
                /* and through the pool */
                fill_garbage(split.grad_value, tc.value_elements, 1.0f);
                if (msda_backward(&pr, tc.grad_output, tc.value, tc.sampling_locations, tc.attention_weights,
                                  split.grad_value, split.grad_locations, split.grad_weights, &err) == MSDA_OK)
                    tu_check(same_bits(one.grad_value, split.grad_value, tc.value_elements),
                             "backward with %d threads: grad_value bits differ from 1 thread [%s]", threads[ti], ctx);
            }
            results_free(&one);
            results_free(&split);
            tu_case_free(&tc);
        }
}

/* More levels than the kernels cache geometry for (16), with every kind of small level. */
static void test_many_levels(void)
{
    for (int combo = 0; combo < TU_COMBOS; combo++) {
        const uint64_t seed = 130000 + (uint64_t)combo;
        tu_rng rng;
        tu_rng_seed(&rng, seed);
        const int64_t num_levels = 20;
        int64_t shapes[2 * TU_MAX_LEVELS];
        for (int64_t l = 0; l < num_levels; l++) {
            shapes[2 * l] = tu_int(&rng, 1, 4);
            shapes[2 * l + 1] = tu_int(&rng, 1, 4);
        }
        tu_case tc;
        tu_case_init(&tc, seed, 2, 3, 2, 5, num_levels, 2, shapes, combo);
        tu_case_fill(&tc, &rng, -0.3, 1.3);
        check_case(&tc, "20 levels", NAN);
        tu_case_free(&tc);
    }
}

/* One query per pixel (N_q = sum of H*W, as in an encoder): the backward walks such problems in
 * bands of rows and columns shared by all levels; levels taller than a band with a partial last
 * band, wider than tall and narrower, so a skipped or repeated query shows. */
static void test_query_per_pixel(void)
{
    static const int64_t shapes[] = {19, 6, 5, 11, 9, 1, 1, 3};   /* 114 + 55 + 9 + 3 = 181 */
    for (int combo = 0; combo < TU_COMBOS; combo++) {
        const uint64_t seed = 140000 + (uint64_t)combo;
        tu_case tc;
        tu_case_init(&tc, seed, 2, 181, 3, 5, 4, 3, shapes, combo);
        tu_rng rng;
        tu_rng_seed(&rng, seed);
        tu_case_fill(&tc, &rng, -0.1, 1.1);
        check_case(&tc, "query per pixel", NAN);
        tu_case_free(&tc);
    }
}

/* ---- half-precision values ----
 * A value of half-precision bits (value_dtype), read by the kernels as it is, gives the float32
 * call's bits on the same values, on every ISA this CPU has. */
static int half_calls_agree(const tu_case *tc, const uint16_t *bits, int bfloat16, const char *what)
{
    float *out[2], *gv[2], *gl[2], *ga[2];
    msda_problem hp = tc->p;
    hp.value_dtype = bfloat16 ? MSDA_BFLOAT16 : MSDA_FLOAT16;
    msda_error err;
    int ok = 1;
    for (int k = 0; k < 2; k++) {
        out[k] = tu_floats(tc->output_elements); gv[k] = tu_floats(tc->value_elements);
        gl[k] = tu_floats(tc->locations_elements); ga[k] = tu_floats(tc->weights_elements);
        const msda_problem *p = k ? &hp : &tc->p;
        const void *value = k ? (const void *)bits : (const void *)tc->value;
        ok &= tu_check(msda_forward(p, value, tc->sampling_locations, tc->attention_weights, out[k], &err) == MSDA_OK &&
                       msda_backward(p, tc->grad_output, value, tc->sampling_locations, tc->attention_weights, gv[k],
                                     gl[k], ga[k], &err) == MSDA_OK,
                       "%s [%s]: refused: %s", what, tu_case_describe(tc), err.message);
    }
    if (ok) {
        const struct { const char *name; float *const *x; int64_t n; } outs[] = {
            {"output", out, tc->output_elements}, {"grad_value", gv, tc->value_elements},
            {"grad_sampling_locations", gl, tc->locations_elements}, {"grad_attention_weights", ga, tc->weights_elements},
        };
        for (int i = 0; i < 4; i++)
            ok &= tu_check(memcmp(outs[i].x[0], outs[i].x[1], (size_t)outs[i].n * sizeof(float)) == 0,
                           "%s (%s value, ISA %s): %s differs from the float32 call's [%s]", what,
                           bfloat16 ? "bfloat16" : "float16", msda_isa(), outs[i].name, tu_case_describe(tc));
    }
    for (int k = 0; k < 2; k++) { free(out[k]); free(gv[k]); free(gl[k]); free(ga[k]); }
    return ok;
}

/* half_calls_agree on every ISA this CPU has (the library's own choice restored after). */
static void half_on_every_isa(const tu_case *tc, const uint16_t *bits, int bfloat16, const char *what)
{
    char list[128], chosen[32];
    snprintf(list, sizeof list, "%s", msda_isa_list());
    snprintf(chosen, sizeof chosen, "%s", msda_isa());
    for (char *isa = strtok(list, " "); isa; isa = strtok(NULL, " ")) {
        tu_check(msda__set_isa(isa), "%s: ISA %s is listed but cannot be set", what, isa);
        half_calls_agree(tc, bits, bfloat16, what);
    }
    msda__set_isa(chosen);
}

/* msda_fast_dtype on every ISA this CPU has: float32 always, both half dtypes on AVX2 (F16C), none
 * elsewhere natively (kernel/kernels.h's MSDA_FAST_*), nothing outside msda_dtype. */
static void test_fast_dtype(void)
{
    char list[128], chosen[32];
    snprintf(list, sizeof list, "%s", msda_isa_list());
    snprintf(chosen, sizeof chosen, "%s", msda_isa());
    for (char *isa = strtok(list, " "); isa; isa = strtok(NULL, " ")) {
        msda__set_isa(isa);
        const int half = strcmp(isa, "avx2") == 0;
        tu_check(msda_fast_dtype(MSDA_FLOAT32) == 1 && msda_fast_dtype(MSDA_FLOAT16) == half &&
                     msda_fast_dtype(MSDA_BFLOAT16) == half,
                 "msda_fast_dtype on %s: float32 %d, float16 %d, bfloat16 %d, expected 1, %d, %d", isa,
                 msda_fast_dtype(MSDA_FLOAT32), msda_fast_dtype(MSDA_FLOAT16), msda_fast_dtype(MSDA_BFLOAT16), half, half);
        tu_check(msda_fast_dtype((msda_dtype)3) == 0 && msda_fast_dtype((msda_dtype)-1) == 0,
                 "msda_fast_dtype on %s: a dtype outside msda_dtype is not fast", isa);
    }
    msda__set_isa(chosen);
}

/* Random cases of every combination (every other one with NaN and Inf values and an infinite
 * weight: the forward's exact path; some with more threads than heads: split heads), in both
 * half formats. */
static void test_half_values(void)
{
    for (int seed = 0; seed < 2 * TU_COMBOS; seed++) {
        tu_case tc;
        tu_case_random(&tc, 120000 + (uint64_t)seed, seed % TU_COMBOS);
        if (seed % 2) {
            tu_rng rng;
            tu_rng_seed(&rng, 120000 + (uint64_t)seed);
            tc.value[tu_int(&rng, 0, tc.value_elements - 1)] = NAN;
            tc.value[tu_int(&rng, 0, tc.value_elements - 1)] = -INFINITY;
            tc.attention_weights[tu_int(&rng, 0, tc.weights_elements - 1)] = INFINITY;
        }
        if (seed % 3 == 0) tc.p.threads = (int)(3 * tc.p.batch * tc.p.num_heads);
        float *original = tu_floats(tc.value_elements);
        memcpy(original, tc.value, (size_t)tc.value_elements * sizeof(float));
        for (int bf = 0; bf < 2; bf++) {
            memcpy(tc.value, original, (size_t)tc.value_elements * sizeof(float));
            uint16_t *bits = tu_case_half_value(&tc, bf);
            half_on_every_isa(&tc, bits, bf, "half-precision value");
            free(bits);
        }
        free(original);
        tu_case_free(&tc);
    }
}

/* Every one of the 65,536 bit patterns as a value element, each alone in an output element: one
 * 1 x 1 level sampled at its pixel's centre with weight 1, so output[h, c] = value[h, c] (NaNs
 * canonical); C = 63 reaches every channel path (32-channel blocks, 16, 8, 4, the last 3). */
static void test_half_patterns(void)
{
    static const int64_t shapes[] = {1, 1};
    const int64_t H = 1041, C = 63;   /* 65,583 elements: every pattern, the first 47 twice */
    for (int bf = 0; bf < 2; bf++) {
        tu_case tc;
        tu_case_init(&tc, 130000, 1, 1, H, C, 1, 1, shapes, 0);
        tu_rng rng;
        tu_rng_seed(&rng, 130000);
        tu_case_fill(&tc, &rng, 0.5, 0.5);
        for (int64_t i = 0; i < tc.weights_elements; i++) tc.attention_weights[i] = 1.0f;
        uint16_t *bits = tu_xmalloc((size_t)tc.value_elements * sizeof *bits);
        for (int64_t i = 0; i < tc.value_elements; i++) bits[i] = (uint16_t)i;
        msda_widen_half(bits, tc.value, tc.value_elements, bf);
        half_on_every_isa(&tc, bits, bf, "every half-precision pattern");
        /* the output is the value itself: each element its own pattern's float32 */
        float *out = tu_floats(tc.output_elements);
        msda_problem hp = tc.p;
        hp.value_dtype = bf ? MSDA_BFLOAT16 : MSDA_FLOAT16;
        int64_t wrong = 0;
        if (msda_forward(&hp, bits, tc.sampling_locations, tc.attention_weights, out, NULL) == MSDA_OK) {
            for (int64_t i = 0; i < tc.value_elements; i++) {
                const float v = tc.value[i];
                wrong += !(v != v ? out[i] != out[i] : out[i] == v);
            }
        } else {
            wrong = -1;
        }
        tu_check(wrong == 0, "every %s pattern: the output is not the value itself (%lld wrong)",
                 bf ? "bfloat16" : "float16", (long long)wrong);
        free(out);
        free(bits);
        tu_case_free(&tc);
    }
}

int main(void)
{
    test_random();
    test_awkward_shapes();
    test_far_outside();
    test_exact_grid();
    test_nonfinite_inputs();
    test_infinite_weights();
    test_canonical_nan();
    test_determinism();
    test_realistic_levels();
    test_many_levels();
    test_query_per_pixel();
    test_split_heads();
    test_wide_level();
    test_half_values();
    test_fast_dtype();
    test_half_patterns();
#if defined(__SANITIZE_ADDRESS__)
    /* under AddressSanitizer a 2^24 level costs half a minute: the combinations once, at 2^20 */
    test_long_side(((int64_t)1 << 24) + 5, 1, 1);
#else
    test_long_side(((int64_t)1 << 24) + 5, 1, 4);
#endif
    test_long_side(((int64_t)1 << 20) + 3, 3, 4);
    return tu_finish();
}
