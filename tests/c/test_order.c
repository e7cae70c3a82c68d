/* The walk's order (src/kernel/walks.h): queries are walked by where they sample, not by their
 * index. The forward's bits do not depend on the order: a problem with its queries permuted gives
 * the permuted output, bit for bit, and so do the location and weight gradients. grad_value's
 * summation order is the walk's: queries whose places are in distinct cells are walked by place
 * alone, so their grad_value is the same bits in any query order (an index-order walk fails
 * this); within a cell, queries are walked in index order. Dead samples do not move a query: a
 * NaN sample and a weight-0 one, or a coordinate of 1e30 and one of 5, give the same bits. Problems of more queries than one sort holds, on levels
 * wider than the grid, match the reference and do not depend on the thread count. */
#include "msda.h"
#include "reference.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct outputs {
    float *output, *grad_value, *grad_sampling_locations, *grad_attention_weights;
} outputs;

static void run(tu_case *tc, int threads, outputs *o)
{
    o->output = tu_floats(tc->output_elements);
    o->grad_value = tu_floats(tc->value_elements);
    o->grad_sampling_locations = tu_floats(tc->locations_elements);
    o->grad_attention_weights = tu_floats(tc->weights_elements);
    tc->p.threads = threads;
    msda_error err;
    const int ok = msda_forward(&tc->p, tc->value, tc->sampling_locations, tc->attention_weights, o->output, &err) ==
                       MSDA_OK &&
                   msda_backward(&tc->p, tc->grad_output, tc->value, tc->sampling_locations, tc->attention_weights,
                                 o->grad_value, o->grad_sampling_locations, o->grad_attention_weights, &err) == MSDA_OK;
    if (!ok) tu_check(0, "forward/backward refused: %s (%s)", err.message, tu_case_describe(tc));
}

static void outputs_free(outputs *o)
{
    free(o->output);
    free(o->grad_value);
    free(o->grad_sampling_locations);
    free(o->grad_attention_weights);
}

/* Element index of sampling_locations[b, q, h, l, p, xy] in the case's layout; weights alike. */
static int64_t loc_at(const tu_case *tc, int64_t b, int64_t q, int64_t i, int xy)
{
    const int64_t Q = tc->p.num_queries, HNP = tc->p.num_heads * tc->p.num_levels * tc->p.num_points;
    if (tc->p.locations_layout == MSDA_LOCATIONS_BQHLP2) return ((b * Q + q) * HNP + i) * 2 + xy;
    return ((b * 2 + xy) * Q + q) * HNP + i;
}

/* into: tc's problem with query q' of every batch being tc's query perm[q'] (inputs copied). */
static void permuted(const tu_case *tc, const int64_t *perm, tu_case *into)
{
    const msda_problem *p = &tc->p;
    const int64_t B = p->batch, Q = p->num_queries, HC = p->num_heads * p->channels,
                  HNP = p->num_heads * p->num_levels * p->num_points;
    int combo = (p->value_layout == MSDA_VALUE_BNLC) | (p->locations_layout == MSDA_LOCATIONS_B2QHLP) << 1 |
                p->align_corners << 2 | (p->padding == MSDA_PADDING_BORDER) << 3;
    tu_case_init(into, tc->seed, B, Q, p->num_heads, p->channels, p->num_levels, p->num_points, tc->spatial_shapes,
                 combo);
    memcpy(into->value, tc->value, (size_t)tc->value_elements * sizeof(float));
    for (int64_t b = 0; b < B; b++)
        for (int64_t q = 0; q < Q; q++) {
            const int64_t from = perm[q];
            for (int64_t i = 0; i < HNP; i++) {
                for (int xy = 0; xy < 2; xy++)
                    into->sampling_locations[loc_at(tc, b, q, i, xy)] = tc->sampling_locations[loc_at(tc, b, from, i, xy)];
                into->attention_weights[(b * Q + q) * HNP + i] = tc->attention_weights[(b * Q + from) * HNP + i];
            }
            memcpy(into->grad_output + (b * Q + q) * HC, tc->grad_output + (b * Q + from) * HC, (size_t)HC * sizeof(float));
        }
}

static void random_permutation(tu_rng *rng, int64_t *perm, int64_t n)
{
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        const int64_t j = tu_int(rng, 0, i), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
}

static int same_float(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* got[b, q', ...] == want[b, perm[q'], ...] bit for bit, rows of `row` elements per query (the
 * locations' layout through loc_at when `locations`). */
static int permuted_bits(const char *what, const tu_case *tc, const int64_t *perm, const float *got, const float *want,
                         int64_t row, int locations)
{
    const int64_t B = tc->p.batch, Q = tc->p.num_queries;
    for (int64_t b = 0; b < B; b++)
        for (int64_t q = 0; q < Q; q++)
            for (int64_t i = 0; i < row; i++) {
                const int64_t g = locations ? loc_at(tc, b, q, i / 2, (int)(i % 2)) : (b * Q + q) * row + i;
                const int64_t w = locations ? loc_at(tc, b, perm[q], i / 2, (int)(i % 2)) : (b * Q + perm[q]) * row + i;
                if (!same_float(got[g], want[w]))
                    return tu_check(0, "%s: query %lld (was %lld) element %lld: %.9g, unpermuted %.9g (%s)", what,
                                    (long long)q, (long long)perm[q], (long long)i, (double)got[g], (double)want[w],
                                    tu_case_describe(tc));
            }
    return tu_check(1, "%s", what);
}

static int same_bits(const char *what, const tu_case *tc, const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!same_float(a[i], b[i]))
            return tu_check(0, "%s: element %lld: %.9g vs %.9g (%s)", what, (long long)i, (double)a[i], (double)b[i],
                            tu_case_describe(tc));
    return tu_check(1, "%s", what);
}

/* An encoder-style problem: one query per pixel, each sampling a few pixels around its own. */
static void encoder_case(tu_case *tc, uint64_t seed, int combo, int64_t channels)
{
    static const int64_t pyramid[] = {17, 11, 9, 6, 5, 3, 3, 2};
    const int64_t L = 187 + 54 + 15 + 6, NL = 4, P = 3, H = 3;
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    tu_case_init(tc, seed, 2, L, H, channels, NL, P, pyramid, combo);
    tu_case_fill(tc, &rng, 0, 1);
    for (int64_t b = 0; b < 2; b++)
        for (int64_t q = 0; q < L; q++) {
            int64_t l = 0;
            while (l + 1 < NL && q >= tc->level_start_index[l + 1]) l++;
            const int64_t pix = q - tc->level_start_index[l], w = pyramid[2 * l + 1], h = pyramid[2 * l];
            const double rx = (pix % w + 0.5) / w, ry = (pix / w + 0.5) / h;
            for (int64_t i = 0; i < H * NL * P; i++) {
                const int64_t sl = i / P % NL;
                tc->sampling_locations[loc_at(tc, b, q, i, 0)] = (float)(rx + tu_uniform(&rng, -2, 2) / pyramid[2 * sl + 1]);
                tc->sampling_locations[loc_at(tc, b, q, i, 1)] = (float)(ry + tu_uniform(&rng, -2, 2) / pyramid[2 * sl]);
            }
        }
}

/* Shuffled encoder problems: forward, location and weight gradients are the unshuffled ones
 * permuted, bit for bit; grad_value matches the reference; and every output is the same bits at
 * 1, 2, 3, 7 and 13 threads. */
static void test_shuffled(void)
{
    static const int64_t channels[] = {32, 5, 1, 33};
    for (int combo = 0; combo < TU_COMBOS; combo += 3) {
        tu_case tc, sh;
        encoder_case(&tc, 8100 + (uint64_t)combo, combo, channels[combo % 4]);
        const int64_t Q = tc.p.num_queries, H = tc.p.num_heads, HNP = H * tc.p.num_levels * tc.p.num_points;
        int64_t *perm = tu_xmalloc((size_t)Q * sizeof *perm);
        tu_rng rng;
        tu_rng_seed(&rng, 8200 + (uint64_t)combo);
        random_permutation(&rng, perm, Q);
        permuted(&tc, perm, &sh);
        outputs plain, shuffled;
        run(&tc, 1, &plain);
        run(&sh, 1, &shuffled);
        permuted_bits("shuffled: output is the unshuffled one permuted", &sh, perm, shuffled.output, plain.output,
                      H * tc.p.channels, 0);
        permuted_bits("shuffled: grad_sampling_locations permuted", &sh, perm, shuffled.grad_sampling_locations,
                      plain.grad_sampling_locations, 2 * HNP, 1);
        permuted_bits("shuffled: grad_attention_weights permuted", &sh, perm, shuffled.grad_attention_weights,
                      plain.grad_attention_weights, HNP, 0);
        double *gv = tu_doubles(tc.value_elements), *gl = tu_doubles(tc.locations_elements),
               *gw = tu_doubles(tc.weights_elements);
        ref_backward(&sh.p, sh.grad_output, sh.value, sh.sampling_locations, sh.attention_weights, gv, gl, gw);
        tu_compare_f("shuffled: grad_value matches the reference", tu_case_describe(&sh), shuffled.grad_value, gv,
                     tc.value_elements, TU_TOL_F32);
        static const int thread_counts[] = {2, 3, 7, 13};   /* odd part counts: ranges of (level, head) units that end mid-level */
        for (int k = 0; k < 4; k++) {
            outputs o;
            run(&sh, thread_counts[k], &o);
            char what[96];
            snprintf(what, sizeof what, "shuffled, threads %d: output the same bits as 1 thread", thread_counts[k]);
            same_bits(what, &sh, o.output, shuffled.output, tc.output_elements);
            snprintf(what, sizeof what, "shuffled, threads %d: grad_value the same bits as 1 thread", thread_counts[k]);
            same_bits(what, &sh, o.grad_value, shuffled.grad_value, tc.value_elements);
            snprintf(what, sizeof what, "shuffled, threads %d: grad_sampling_locations the same bits", thread_counts[k]);
            same_bits(what, &sh, o.grad_sampling_locations, shuffled.grad_sampling_locations, tc.locations_elements);
            outputs_free(&o);
        }
        free(gv);
        free(gl);
        free(gw);
        outputs_free(&plain);
        outputs_free(&shuffled);
        free(perm);
        tu_case_free(&tc);
        tu_case_free(&sh);
    }
}

/* Queries whose places (the mean of head 0's level-0 points) lie in distinct cells of the
 * backward's grid (bands of 8 rows of the tallest level, one column of the widest), sampling
 * around them on every level so that their grad_value terms overlap: walked by place, the same
 * bits in any query order. */
static void test_order_is_by_place(void)
{
    static const int64_t shapes[] = {32, 32, 16, 16, 8, 8};
    const int64_t bands = 4, cols = 32, NL = 3, P = 4, H = 2, Q = 100;
    for (int combo = 0; combo < TU_COMBOS; combo += 5) {
        tu_case tc, sh;
        tu_rng rng;
        tu_rng_seed(&rng, 8300 + (uint64_t)combo);
        tu_case_init(&tc, 8300 + (uint64_t)combo, 1, Q, H, 8, NL, P, shapes, combo);
        tu_case_fill(&tc, &rng, 0, 1);
        int64_t *cells = tu_xmalloc((size_t)(bands * cols) * sizeof *cells);
        random_permutation(&rng, cells, bands * cols);   /* the first Q: distinct cells */
        for (int64_t q = 0; q < Q; q++) {
            const double cx = (double)(cells[q] % cols), cy = (double)(cells[q] / cols) * 8;   /* in level-0 pixels */
            const double rx = (cx + 0.5) / 32, ry = (cy + 4) / 32;
            for (int64_t i = 0; i < H * NL * P; i++) {
                const int64_t l = i / P % NL;
                const double side = (double)shapes[2 * l];
                /* level 0 of head 0 stays inside the cell; the rest spreads 3 pixels around */
                const int inside = i < P;
                const double dx = inside ? tu_uniform(&rng, -0.45, 0.45) / 32 : tu_uniform(&rng, -3, 3) / side;
                const double dy = inside ? tu_uniform(&rng, -3.5, 3.5) / 32 : tu_uniform(&rng, -3, 3) / side;
                tc.sampling_locations[loc_at(&tc, 0, q, i, 0)] = (float)(rx + dx);
                tc.sampling_locations[loc_at(&tc, 0, q, i, 1)] = (float)(ry + dy);
            }
        }
        int64_t perm[100];
        random_permutation(&rng, perm, Q);
        permuted(&tc, perm, &sh);
        outputs a, b;
        run(&tc, 1, &a);
        run(&sh, 2, &b);
        same_bits("distinct places: grad_value the same bits in another query order", &tc, b.grad_value, a.grad_value,
                  tc.value_elements);
        outputs_free(&a);
        outputs_free(&b);
        free(cells);
        tu_case_free(&tc);
        tu_case_free(&sh);
    }
}

/* Dead samples do not move their query in the walk: some dead samples have weight 0, and a NaN
 * weight in its place (a weight that is not 0) on every sample with a NaN
 * coordinate (and, in zeros mode, on every one at +-1e30 or +-Inf) changes no output (a dead
 * sample's weight is ignored, SEMANTICS.md; the place takes no weights), and a coordinate of
 * +-1e30 or +-Inf gives the bits of +-5 (every output), also when it is a query's first sample
 * (the one its place comes from). */
static void test_dead_samples(void)
{
    for (int combo = 0; combo < TU_COMBOS; combo++) {
        tu_case tc, nan_free, far;
        encoder_case(&tc, 8400 + (uint64_t)combo, combo, 4);
        tu_rng rng;
        tu_rng_seed(&rng, 8500 + (uint64_t)combo);
        const int64_t Q = tc.p.num_queries, HNP = tc.p.num_heads * tc.p.num_levels * tc.p.num_points;
        static const float huge[] = {1e30f, -1e30f, INFINITY, -INFINITY};
        for (int64_t b = 0; b < 2; b++)
            for (int64_t q = 0; q < Q; q++)
                for (int64_t i = 0; i < HNP; i++) {
                    const double u = tu_uniform(&rng, 0, 1);
                    const int first = i < 4 && q % 3 == 0;   /* many queries lose their first points */
                    if (u < (first ? 0.5 : 0.05)) {
                        tc.sampling_locations[loc_at(&tc, b, q, i, tu_int(&rng, 0, 1))] = NAN;
                        if (tu_int(&rng, 0, 1)) tc.attention_weights[(b * Q + q) * HNP + i] = 0.0f;
                    }
                    else if (u < (first ? 0.8 : 0.1)) {
                        tc.sampling_locations[loc_at(&tc, b, q, i, tu_int(&rng, 0, 1))] = huge[tu_int(&rng, 0, 3)];
                        if (tu_int(&rng, 0, 1)) tc.attention_weights[(b * Q + q) * HNP + i] = 0.0f;
                    }
                }
        int64_t *identity = tu_xmalloc((size_t)Q * sizeof *identity);
        for (int64_t q = 0; q < Q; q++) identity[q] = q;
        permuted(&tc, identity, &nan_free);
        permuted(&tc, identity, &far);
        for (int64_t b = 0; b < 2; b++)
            for (int64_t q = 0; q < Q; q++)
                for (int64_t i = 0; i < HNP; i++) {
                    const int64_t ix = loc_at(&tc, b, q, i, 0), iy = loc_at(&tc, b, q, i, 1);
                    const float x = tc.sampling_locations[ix], y = tc.sampling_locations[iy];
                    const int far_dead = tc.p.padding == MSDA_PADDING_ZEROS && (fabsf(x) > 1e6f || fabsf(y) > 1e6f);
                    if (isnan(x) || isnan(y) || far_dead) nan_free.attention_weights[(b * Q + q) * HNP + i] = NAN;
                    for (int xy = 0; xy < 2; xy++) {
                        float *c = &far.sampling_locations[xy ? iy : ix];
                        if (!isnan(*c) && fabsf(*c) > 1e6f) *c = *c > 0 ? 5.0f : -5.0f;
                    }
                }
        outputs base, o1, o2;
        run(&tc, 1, &base);
        run(&nan_free, 1, &o1);
        run(&far, 1, &o2);
        same_bits("NaN weights on dead samples: output", &tc, o1.output, base.output, tc.output_elements);
        same_bits("NaN weights on dead samples: grad_value", &tc, o1.grad_value, base.grad_value, tc.value_elements);
        same_bits("NaN weights on dead samples: grad_sampling_locations", &tc, o1.grad_sampling_locations,
                  base.grad_sampling_locations, tc.locations_elements);
        same_bits("NaN weights on dead samples: grad_attention_weights", &tc, o1.grad_attention_weights,
                  base.grad_attention_weights, tc.weights_elements);
        same_bits("+-1e30 / +-Inf vs +-5: output", &tc, o2.output, base.output, tc.output_elements);
        same_bits("+-1e30 / +-Inf vs +-5: grad_value", &tc, o2.grad_value, base.grad_value, tc.value_elements);
        same_bits("+-1e30 / +-Inf vs +-5: grad_attention_weights", &tc, o2.grad_attention_weights,
                  base.grad_attention_weights, tc.weights_elements);
        outputs_free(&base);
        outputs_free(&o1);
        outputs_free(&o2);
        free(identity);
        tu_case_free(&tc);
        tu_case_free(&nan_free);
        tu_case_free(&far);
    }
}

/* Within a cell, queries are walked in index order (a stable sort by cell): queries whose places
 * fall in a few cells of a 1 x 16 grid, in a mixed order, all sample the one pixel of a 1 x 1
 * level, so that pixel's grad_value is their terms summed in the walk's order, which is
 * (cell, index) order: values over many magnitudes make another order give other bits (checked
 * for the order reversed within each cell). At 1 and 3 threads. */
static void test_order_is_stable(void)
{
    static const int64_t shapes[] = {8, 16, 1, 1};
    enum { Q = 64 };
    for (int seed = 0; seed < 8; seed++) {
        tu_case tc;
        tu_rng rng;
        tu_rng_seed(&rng, 8700 + (uint64_t)seed);
        tu_case_init(&tc, 8700 + (uint64_t)seed, 1, Q, 1, 1, 2, 1, shapes, 0);
        tu_case_fill(&tc, &rng, 0, 1);
        int cell[Q];
        float term[Q];
        for (int q = 0; q < Q; q++) {
            cell[q] = (int)tu_int(&rng, 0, 3) * 5;
            tc.sampling_locations[loc_at(&tc, 0, q, 0, 0)] = (float)((cell[q] + 0.5) / 16);
            tc.sampling_locations[loc_at(&tc, 0, q, 0, 1)] = 0.5f;
            tc.sampling_locations[loc_at(&tc, 0, q, 1, 0)] = 0.5f;   /* the 1 x 1 level's pixel, corner weight 1 */
            tc.sampling_locations[loc_at(&tc, 0, q, 1, 1)] = 0.5f;
            tc.attention_weights[q * 2] = 1.0f;
            tc.attention_weights[q * 2 + 1] = (float)(tu_uniform(&rng, 1, 2) * pow(10.0, (double)tu_int(&rng, -3, 3)) *
                                                      (tu_int(&rng, 0, 1) ? 1 : -1));
            tc.grad_output[q] = (float)tu_uniform(&rng, 0.5, 2);
            if (q < 3) {   /* 1e8 - 1e8 + 1 is 1 in this order, 0 in the reverse one */
                static const float first[] = {1e8f, -1e8f, 1.0f};
                cell[q] = 0;
                tc.sampling_locations[loc_at(&tc, 0, q, 0, 0)] = 0.5f / 16;
                tc.attention_weights[q * 2 + 1] = first[q];
                tc.grad_output[q] = 1.0f;
            }
            term[q] = tc.attention_weights[q * 2 + 1] * tc.grad_output[q];
        }
        float stable = 0.0f, reversed = 0.0f;
        for (int c = 0; c < 16; c++)
            for (int q = 0; q < Q; q++) {
                if (cell[q] == c) stable += term[q];
                if (cell[Q - 1 - q] == c) reversed += term[Q - 1 - q];
            }
        tu_check(!same_float(stable, reversed), "stable order: the sums in two orders differ (seed %d)", seed);
        for (int threads = 1; threads <= 3; threads += 2) {
            outputs o;
            run(&tc, threads, &o);
            const float got = o.grad_value[tc.level_start_index[1]];
            tu_check(same_float(got, stable), "stable order, threads %d: the 1 x 1 pixel's grad_value is %.9g, the sum in (cell, index) order %.9g (seed %d)",
                     threads, (double)got, (double)stable, seed);
            outputs_free(&o);
        }
        tu_case_free(&tc);
    }
}

/* More queries than one sort holds (32768), on a level wider than the grid has columns (8191):
 * forward and backward match the reference, and 1 and 3 threads give the same bits. */
static void test_many_queries(void)
{
    static const int64_t shapes[] = {1, 9000, 3, 5};
    tu_case tc;
    tu_rng rng;
    tu_rng_seed(&rng, 8600);
    tu_case_init(&tc, 8600, 1, 70001, 1, 2, 2, 1, shapes, 8);
    tu_case_fill(&tc, &rng, -0.05, 1.05);
    outputs one, three;
    run(&tc, 1, &one);
    run(&tc, 3, &three);
    double *out = tu_doubles(tc.output_elements), *gv = tu_doubles(tc.value_elements),
           *gl = tu_doubles(tc.locations_elements), *gw = tu_doubles(tc.weights_elements);
    ref_forward(&tc.p, tc.value, tc.sampling_locations, tc.attention_weights, out);
    ref_backward(&tc.p, tc.grad_output, tc.value, tc.sampling_locations, tc.attention_weights, gv, gl, gw);
    const char *ctx = tu_case_describe(&tc);
    tu_compare_f("70001 queries: output matches the reference", ctx, one.output, out, tc.output_elements, TU_TOL_F32);
    /* a pixel of the 3 x 5 level sums thousands of float terms: judged against the largest too */
    tu_compare_f("70001 queries: grad_value matches the reference", ctx, one.grad_value, gv, tc.value_elements,
                 (tu_tol){1e-5, 1e-4, 1e-5});
    tu_compare_f("70001 queries: grad_attention_weights matches the reference", ctx, one.grad_attention_weights, gw,
                 tc.weights_elements, TU_TOL_F32);
    same_bits("70001 queries, 3 threads: output", &tc, three.output, one.output, tc.output_elements);
    same_bits("70001 queries, 3 threads: grad_value", &tc, three.grad_value, one.grad_value, tc.value_elements);
    free(out);
    free(gv);
    free(gl);
    free(gw);
    outputs_free(&one);
    outputs_free(&three);
    tu_case_free(&tc);
}

int main(void)
{
    test_shuffled();
    test_order_is_by_place();
    test_order_is_stable();
    test_dead_samples();
    test_many_queries();
    return tu_finish();
}
