/* Kernels against the float64 reference: seeded random cases over all 16 option combinations,
 * awkward shapes, far-outside and non-finite samples, exact grid/edge coordinates, overwrite
 * semantics, and bit-for-bit determinism. Sizes and levels: test_kernel_levels.c; half-precision
 * values: test_kernel_half.c. */
#include "internal.h"
#include "threads.h"
#include "kernel_check.h"
#include "reference.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
            kc_check_case(&tc, (i & 1) ? "random+far" : "random", (i & 2) ? NAN : 12345.0f);
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
            kc_check_case(&tc, "awkward", NAN);
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
            kc_check_case(&tc, "single level", NAN);
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
        kc_results r;
        kc_results_alloc(&r, &tc);
        if (kc_run(&tc, &r, NAN)) {
            kc_compare_all(&tc, &r, "far outside");
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
        kc_results_free(&r);
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
        kc_check_case(&tc, "exact grid", 777.0f);
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
        kc_results r;
        kc_results_alloc(&r, &tc);
        if (kc_run(&tc, &r, 0.0f)) {
            const char *ctx = tu_case_describe(&tc);
            compare_nonfinite("non-finite inputs output", ctx, r.output, r.ref_output, tc.output_elements);
            compare_nonfinite("non-finite inputs grad_value", ctx, r.grad_value, r.ref_grad_value,
                              tc.value_elements);
            compare_nonfinite("non-finite inputs grad_sampling_locations", ctx, r.grad_locations,
                              r.ref_grad_locations, tc.locations_elements);
            compare_nonfinite("non-finite inputs grad_attention_weights", ctx, r.grad_weights,
                              r.ref_grad_weights, tc.weights_elements);
        }
        kc_results_free(&r);
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
        kc_results r;
        kc_results_alloc(&r, &tc);
        if (kc_run(&tc, &r, 0.0f)) {
            const char *ctx = tu_case_describe(&tc);
            compare_exact_nonfinite("infinite weights output", ctx, r.output, r.ref_output, tc.output_elements);
            compare_nonfinite("infinite weights grad_value", ctx, r.grad_value, r.ref_grad_value, tc.value_elements);
            compare_nonfinite("infinite weights grad_attention_weights", ctx, r.grad_weights, r.ref_grad_weights,
                              tc.weights_elements);
        }
        kc_results_free(&r);
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
        kc_results r;
        kc_results_alloc(&r, &tc);
        if (kc_run(&tc, &r, 0.0f)) {
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
        kc_results_free(&r);
        tu_case_free(&tc);
    }
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
        kc_results first, again;
        kc_results_alloc(&first, &tc);
        kc_results_alloc(&again, &tc);
        if (kc_run(&tc, &first, NAN)) kc_compare_all(&tc, &first, "two query blocks");
        static const int threads[] = {1, 2, 3};
        for (int ti = 0; ti < 3; ti++) {
            tc.p.threads = threads[ti];
            kc_fill_garbage(again.output, tc.output_elements, 1.0f);
            kc_fill_garbage(again.grad_value, tc.value_elements, 1.0f);
            kc_fill_garbage(again.grad_locations, tc.locations_elements, 1.0f);
            kc_fill_garbage(again.grad_weights, tc.weights_elements, 1.0f);
            msda_status st1 = msda_forward(&tc.p, tc.value, tc.sampling_locations, tc.attention_weights,
                                           again.output, NULL);
            msda_status st2 = msda_backward(&tc.p, tc.grad_output, tc.value, tc.sampling_locations,
                                            tc.attention_weights, again.grad_value, again.grad_locations,
                                            again.grad_weights, NULL);
            tu_check(st1 == MSDA_OK && st2 == MSDA_OK, "threads=%d refused [%s]", threads[ti], ctx);
            tu_check(kc_same_bits(first.output, again.output, tc.output_elements) &&
                     kc_same_bits(first.grad_value, again.grad_value, tc.value_elements) &&
                     kc_same_bits(first.grad_locations, again.grad_locations, tc.locations_elements) &&
                     kc_same_bits(first.grad_weights, again.grad_weights, tc.weights_elements),
                     "threads=%d: kc_results differ in bits from the first run [%s]", threads[ti], ctx);
        }
        tc.p.threads = 1;

        msda_plan plan;
        msda_error err;
        if (tu_check(msda__plan(&tc.p, &plan, &err) == MSDA_OK, "plan refused [%s]: %s", ctx, err.message)) {
            kc_fill_garbage(again.output, tc.output_elements, NAN);
            kc_fill_garbage(again.grad_value, tc.value_elements, NAN);
            kc_fill_garbage(again.grad_locations, tc.locations_elements, NAN);
            kc_fill_garbage(again.grad_weights, tc.weights_elements, NAN);
            msda_tensors t = {tc.value, tc.sampling_locations, tc.attention_weights, tc.grad_output,
                              again.output, again.grad_value, again.grad_locations, again.grad_weights};
            for (int64_t u = msda__forward_units(&plan); u-- > 0;) msda__forward_range(&plan, &t, u, u + 1);
            for (int64_t u = msda__backward_units(&plan); u-- > 0;) msda__backward_range(&plan, &t, u, u + 1);
            tu_check(kc_same_bits(first.output, again.output, tc.output_elements),
                     "forward units in reverse order: output differs in bits [%s]", ctx);
            tu_check(kc_same_bits(first.grad_value, again.grad_value, tc.value_elements) &&
                     kc_same_bits(first.grad_locations, again.grad_locations, tc.locations_elements) &&
                     kc_same_bits(first.grad_weights, again.grad_weights, tc.weights_elements),
                     "backward units in reverse order: gradients differ in bits [%s]", ctx);
        }
        kc_results_free(&first);
        kc_results_free(&again);
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
    return tu_finish();
}
