/* Kernels against the float64 reference on sizes and levels: realistic pyramids, many levels, a
 * query per pixel, heads split over threads, a wide level, and levels with a long side (past 2^24
 * pixels, where float32 pixel arithmetic stops being exact). */
#include "internal.h"
#include "threads.h"
#include "kernel_check.h"
#include "reference.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        kc_results r;
        kc_results_alloc(&r, &tc);
        if (kc_run(&tc, &r, NAN)) {
            const char *ctx = tu_case_describe(&tc);
            tu_compare_f("realistic levels output", ctx, r.output, r.ref_output, tc.output_elements, TU_TOL_F32);
            tu_compare_f("realistic levels grad_value", ctx, r.grad_value, r.ref_grad_value, tc.value_elements,
                         TU_TOL_F32);
            tu_compare_f("realistic levels grad_sampling_locations", ctx, r.grad_locations, r.ref_grad_locations,
                         tc.locations_elements, cancelling);
            tu_compare_f("realistic levels grad_attention_weights", ctx, r.grad_weights, r.ref_grad_weights,
                         tc.weights_elements, TU_TOL_F32);
        }
        kc_results_free(&r);
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
        kc_check_case(&tc, "wide level", NAN);
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
            kc_check_case(&tc, label, NAN);
            tu_case_free(&tc);
        }
}

/* The backward's units are (level, head) pairs. Whatever the split, the bits must be those of one
 * walk of everything: each job's units are run one at a time in reverse order, and in ranges of
 * every length, and compared with threads = 1, one query per pixel and fewer queries, one and
 * two heads, every option combination. */
static void test_split_heads(void)
{
    /* 63 + 20 + 6 = 89 pixels; with two more levels, 5 (blocks of 3 and 2 levels a head) */
    static const int64_t pyramid[] = {9, 7, 5, 4, 2, 3, 2, 2, 1, 1};
    for (int combo = 0; combo < TU_COMBOS; combo++)
        for (int kind = 0; kind < 3; kind++) {
            tu_case tc;
            const uint64_t seed = 150000 + (uint64_t)(combo * 3 + kind);
            const int64_t heads = kind ? 2 : 1, levels = kind == 2 ? 5 : 3;
            tu_case_init(&tc, seed, 1, kind ? 40 : 89, heads, kind ? 5 : 32, levels, 3, pyramid, combo);
            tu_rng rng;
            tu_rng_seed(&rng, seed);
            tu_case_fill(&tc, &rng, -0.1, 1.1);
            const char *ctx = tu_case_describe(&tc);
            kc_results one, split;
            kc_results_alloc(&one, &tc);
            kc_results_alloc(&split, &tc);
            if (kc_run(&tc, &one, NAN)) kc_compare_all(&tc, &one, "split heads, threads 1");
            static const int threads[] = {2, 3, 7, 64};
            for (int ti = 0; ti < 4; ti++) {
                msda_problem pr = tc.p;
                pr.threads = threads[ti];
                msda_job job;
                msda_error err;
                kc_fill_garbage(split.grad_value, tc.value_elements, NAN);
                kc_fill_garbage(split.grad_locations, tc.locations_elements, NAN);
                kc_fill_garbage(split.grad_weights, tc.weights_elements, NAN);
                if (!tu_check(msda__backward_job(&job, &pr, tc.grad_output, tc.value, tc.sampling_locations,
                                                 tc.attention_weights, split.grad_value, split.grad_locations,
                                                 split.grad_weights, &err) == MSDA_OK,
                              "backward job refused [%s]: %s", ctx, err.message))
                    continue;
                /* a unit a (level, head) */
                tu_check(job.units == heads * levels, "%lld heads of %lld levels: %lld units [%s]", (long long)heads,
                         (long long)levels, (long long)job.units, ctx);
                for (int64_t u = job.units; u-- > 0;) msda__backward_range(&job.plan, &job.tensors, u, u + 1);
                tu_check(kc_same_bits(one.grad_value, split.grad_value, tc.value_elements) &&
                             kc_same_bits(one.grad_locations, split.grad_locations, tc.locations_elements) &&
                             kc_same_bits(one.grad_weights, split.grad_weights, tc.weights_elements),
                         "backward for %d threads, units in reverse: bits differ from 1 thread [%s]", threads[ti], ctx);
                /* in ranges of every length, the last first: a range of (level, head) units is up
                 * to three rectangles of levels and heads */
                for (int64_t k = 2; k <= job.units; k++) {
                    kc_fill_garbage(split.grad_value, tc.value_elements, NAN);
                    kc_fill_garbage(split.grad_locations, tc.locations_elements, NAN);
                    kc_fill_garbage(split.grad_weights, tc.weights_elements, NAN);
                    for (int64_t e = job.units; e > 0; e -= k)
                        msda__backward_range(&job.plan, &job.tensors, e > k ? e - k : 0, e);
                    if (!tu_check(kc_same_bits(one.grad_value, split.grad_value, tc.value_elements) &&
                                      kc_same_bits(one.grad_locations, split.grad_locations, tc.locations_elements) &&
                                      kc_same_bits(one.grad_weights, split.grad_weights, tc.weights_elements),
                                  "backward for %d threads, ranges of %lld units: bits differ from 1 thread [%s]",
                                  threads[ti], (long long)k, ctx))
                        break;
                }
                /* and through the pool */
                kc_fill_garbage(split.grad_value, tc.value_elements, 1.0f);
                if (msda_backward(&pr, tc.grad_output, tc.value, tc.sampling_locations, tc.attention_weights,
                                  split.grad_value, split.grad_locations, split.grad_weights, &err) == MSDA_OK)
                    tu_check(kc_same_bits(one.grad_value, split.grad_value, tc.value_elements),
                             "backward with %d threads: grad_value bits differ from 1 thread [%s]", threads[ti], ctx);
            }
            kc_results_free(&one);
            kc_results_free(&split);
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
        kc_check_case(&tc, "20 levels", NAN);
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
        kc_check_case(&tc, "query per pixel", NAN);
        tu_case_free(&tc);
    }
}

int main(void)
{
    test_realistic_levels();
    test_many_levels();
    test_query_per_pixel();
    test_split_heads();
    test_wide_level();
#if defined(__SANITIZE_ADDRESS__)
    /* under AddressSanitizer a 2^24 level costs half a minute: the combinations once, at 2^20 */
    test_long_side(((int64_t)1 << 24) + 5, 1, 1);
#else
    test_long_side(((int64_t)1 << 24) + 5, 1, 4);
#endif
    test_long_side(((int64_t)1 << 20) + 3, 3, 4);
    return tu_finish();
}
