/* libFuzzer target: problem validation, forward and backward on small problems built from the
 * fuzz bytes. Beyond "no crash" (ASan/UBSan catch out-of-bounds and float-to-int UB), it checks
 * invariants that catch silently wrong answers:
 *   - validation accepts exactly the problems an independent checker (128-bit arithmetic) accepts;
 *   - every call is deterministic and overwrites its outputs (two runs over differently
 *     prefilled buffers give the same bits, and so does another thread count);
 *   - samples that contribute nothing (a NaN coordinate; zeros padding, far outside) get exactly
 *     0 location and weight gradients, and a NaN attention weight on them changes nothing;
 *   - with finite, bounded inputs every output matches the float64 reference (tests/c/reference.h)
 *     within a per-element bound; location gradients only away from pixel lines (kinks).
 *
 * Input layout: a few structure bytes (dimensions, options, data mode, corruption), then the
 * tensor contents. When the bytes run out a generator seeded from the input takes over, so a
 * short input still describes a whole problem. */
#include "msda.h"
#include "options.h"
#include "reference.h"
#include "threads.h"   /* jobs split into parts, as the thread pool does */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct source {
    const uint8_t *data;
    size_t size;
    uint64_t state;   /* splitmix64, used once data is exhausted */
} source;

static uint8_t next_byte(source *s)
{
    if (s->size > 0) {
        s->size--;
        return *s->data++;
    }
    uint64_t z = (s->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint8_t)((z ^ (z >> 31)) >> 56);
}

static uint32_t next_u32(source *s)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)next_byte(s) << (8 * i);
    return v;
}

static float bits_float(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Data modes: raw float bit patterns; small "nice" numbers; nice numbers with specials mixed in. */
enum { MODE_RAW = 0, MODE_NICE = 1, MODE_SPECIALS = 2 };

static float special_float(uint8_t k)
{
    switch (k % 16) {
    case 0: return NAN;
    case 1: return INFINITY;
    case 2: return -INFINITY;
    case 3: return 1e30f;
    case 4: return -1e30f;
    case 5: return nextafterf(1.0f, 2.0f);      /* just outside [0, 1] */
    case 6: return -1e-7f;
    case 7: return 1.4e-45f;                    /* smallest subnormal */
    case 8: return -1.0e-40f;                   /* subnormal */
    case 9: return 3.4e38f;
    case 10: return 0.0f;
    case 11: return -0.0f;
    case 12: return 1.0f;
    case 13: return 0.5f;
    case 14: return nextafterf(0.0f, -1.0f);
    default: return bits_float(0x7FC00001u | 0x80000000u);   /* a negative NaN with payload */
    }
}

/* A value or weight (is_location 0) or a normalised coordinate (is_location 1). */
static float next_float(source *s, int mode, int is_location)
{
    if (mode == MODE_RAW) return bits_float(next_u32(s));
    const uint8_t b = next_byte(s);
    if (mode == MODE_SPECIALS && b >= 240) return special_float(next_byte(s));
    if (is_location) return (float)b / 200.0f - 0.1f;       /* [-0.1, 1.175] */
    return (float)(int8_t)b / 32.0f;
}

static const int64_t special_ints[] = {
    0, -1, -2, INT64_MIN, INT64_MAX, 1ll << 31, 1ll << 32, 1ll << 40, 1ll << 61, 1ll << 62,
    (1ll << 61) + 1, 3037000500ll, 2, 1,
};
#define N_SPECIAL_INTS ((int)(sizeof special_ints / sizeof special_ints[0]))

#define MAX_LEVELS 20  /* capacity of the shape arrays; num_levels never claims more */

/* Accept/reject decided from the definitions alone, in 128-bit arithmetic. */
static int independent_valid(const msda_problem *p)
{
    if (!p) return 0;
    const int64_t dims[] = {p->batch, p->num_queries, p->num_heads, p->channels,
                            p->num_levels, p->num_points, p->value_length};
    for (int i = 0; i < 7; i++)
        if (dims[i] < 1) return 0;
    for (int id = 0; id < MSDA_OPTION_COUNT; id++)   /* each option: 0 .. its count - 1 (src/options.h) */
        if (msda_option_get(p, id) < 0 || msda_option_get(p, id) >= msda_options[id].count) return 0;
    if (p->threads < 1) return 0;
    if (!p->spatial_shapes || !p->level_start_index) return 0;
    __int128 total = 0;
    for (int64_t l = 0; l < p->num_levels; l++) {
        const int64_t h = p->spatial_shapes[2 * l], w = p->spatial_shapes[2 * l + 1];
        if (h < 1 || w < 1) return 0;
        if ((__int128)p->level_start_index[l] != total) return 0;
        total += (__int128)h * w;
        if (total > INT64_MAX) return 0;
    }
    if ((__int128)p->value_length != total) return 0;
    const __int128 limit = (__int128)PTRDIFF_MAX / 4;
    const __int128 B = p->batch, Q = p->num_queries, H = p->num_heads, C = p->channels,
                   NL = p->num_levels, P = p->num_points, L = p->value_length;
    /* Each product is checked step by step so that no 128-bit product overflows either. */
    const __int128 counts[4][6] = {
        {B, L, H, C, 1, 1}, {B, Q, H, NL, P, 2}, {B, Q, H, NL, P, 1}, {B, Q, H, C, 1, 1},
    };
    for (int t = 0; t < 4; t++) {
        __int128 n = 1;
        for (int i = 0; i < 6; i++) {
            n *= counts[t][i];
            if (n > limit) return 0;
        }
    }
    return 1;
}

static void fail(const char *what, const msda_problem *p, long long index, double got, double want, double tol)
{
    fprintf(stderr,
            "fuzz_kernel: %s at element %lld: got %.9g, expected %.9g (tolerance %.3g)\n"
            "  B=%lld Q=%lld H=%lld C=%lld NL=%lld P=%lld value_layout=%d loc_layout=%d align=%d padding=%d\n",
            what, index, got, want, tol, (long long)p->batch, (long long)p->num_queries,
            (long long)p->num_heads, (long long)p->channels, (long long)p->num_levels,
            (long long)p->num_points, (int)p->value_layout, (int)p->locations_layout, p->align_corners,
            (int)p->padding);
    abort();
}

static int same_value(float a, float b)
{
    return a == b || (isnan(a) && isnan(b));
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) abort();
    return p;
}

/* Pixel-space coordinate along one axis, in double, as SEMANTICS.md defines it. */
static double pixel_coord(float coord, int64_t size, int align_corners)
{
    if (align_corners) return size == 1 ? 0.0 : (double)coord * (double)(size - 1);
    return (double)coord * (double)size - 0.5;
}

/* The sample certainly contributes nothing: a NaN coordinate, or (zeros padding) an axis whose
 * every corner is clearly out of bounds, also for +-inf. */
static int certainly_dead(const msda_problem *p, float x, float y, int64_t height, int64_t width)
{
    if (isnan(x) || isnan(y)) return 1;
    if (p->padding != MSDA_PADDING_ZEROS) return 0;
    const double u = pixel_coord(x, width, p->align_corners), v = pixel_coord(y, height, p->align_corners);
    return u < -1.001 || u > (double)width + 0.001 || v < -1.001 || v > (double)height + 0.001;
}

/* The location gradient is continuous around this sample: both axes are away from pixel lines
 * (which include the clamp and the zeros edges at -1, 0, size - 1 and size), or clamped. */
static int smooth_axis(const msda_problem *p, float coord, int64_t size)
{
    if (p->align_corners && size == 1) return 1;
    const double u = pixel_coord(coord, size, p->align_corners);
    if (p->padding == MSDA_PADDING_BORDER && (u < -1e-3 || u > (double)(size - 1) + 1e-3)) return 1;
    if (p->padding == MSDA_PADDING_ZEROS && (u < -1.001 || u > (double)size + 1e-3)) return 1;
    return fabs(u - nearbyint(u)) > 1e-4;
}

typedef struct tensors {
    float *value, *loc, *attn, *grad_out;
    float *out, *grad_value, *grad_loc, *grad_attn;
} tensors;

static void run_forward(const msda_problem *p, const tensors *t, float *out, uint8_t fill)
{
    memset(out, fill, (size_t)msda_output_elements(p) * sizeof(float));
    msda_error err;
    const msda_status st = msda_forward(p, t->value, t->loc, t->attn, out, &err);
    if (st != MSDA_OK) {
        fprintf(stderr, "fuzz_kernel: forward refused a valid problem: %s\n", err.message);
        abort();
    }
}

static void run_backward(const msda_problem *p, const tensors *t, const float *attn, float *gv, float *gl,
                         float *ga, uint8_t fill)
{
    memset(gv, fill, (size_t)msda_value_elements(p) * sizeof(float));
    memset(gl, fill, (size_t)msda_locations_elements(p) * sizeof(float));
    memset(ga, fill, (size_t)msda_weights_elements(p) * sizeof(float));
    msda_error err;
    const msda_status st = msda_backward(p, t->grad_out, t->value, t->loc, attn, gv, gl, ga, &err);
    if (st != MSDA_OK) {
        fprintf(stderr, "fuzz_kernel: backward refused a valid problem: %s\n", err.message);
        abort();
    }
}

static int bounded(const float *x, int64_t n, float limit)
{
    for (int64_t i = 0; i < n; i++)
        if (!(fabsf(x[i]) <= limit)) return 0;
    return 1;
}

/* Compares every output with the float64 reference. Tolerances bound float32 rounding by the
 * magnitudes that enter each element (largest |value| of the level, not the bilinear weights,
 * since a weight's absolute error is about one ulp of the pixel coordinate). */
static void check_reference(const msda_problem *p, const tensors *t)
{
    const int64_t B = p->batch, Q = p->num_queries, NH = p->num_heads, C = p->channels,
                  NL = p->num_levels, P = p->num_points;
    const int64_t ve = msda_value_elements(p), le = msda_locations_elements(p),
                  we = msda_weights_elements(p), oe = msda_output_elements(p);
    double *ref_out = xmalloc((size_t)oe * sizeof(double));
    double *ref_gv = xmalloc((size_t)ve * sizeof(double));
    double *ref_gl = xmalloc((size_t)le * sizeof(double));
    double *ref_ga = xmalloc((size_t)we * sizeof(double));
    double *level_max = xmalloc((size_t)(B * NH * NL) * sizeof(double));
    ref_forward(p, t->value, t->loc, t->attn, ref_out);
    ref_backward(p, t->grad_out, t->value, t->loc, t->attn, ref_gv, ref_gl, ref_ga);

    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < NH; h++)
            for (int64_t l = 0, start = 0; l < NL; l++) {
                const int64_t hw = p->spatial_shapes[2 * l] * p->spatial_shapes[2 * l + 1];
                double m = 0.0;
                for (int64_t px = start; px < start + hw; px++)
                    for (int64_t c = 0; c < C; c++)
                        m = fmax(m, fabs(t->value[ref_value_index(p, b, px, h, c)]));
                level_max[(b * NH + h) * NL + l] = m;
                start += hw;
            }

    const double rel = 3e-5, abs_tol = 1e-30;
    for (int64_t b = 0; b < B; b++)
        for (int64_t q = 0; q < Q; q++)
            for (int64_t h = 0; h < NH; h++) {
                double g_sum = 0.0, a_mag = 0.0;
                for (int64_t c = 0; c < C; c++) g_sum += fabs(t->grad_out[ref_output_index(p, b, q, h, c)]);
                for (int64_t l = 0; l < NL; l++)
                    for (int64_t pt = 0; pt < P; pt++)
                        a_mag += fabs(t->attn[ref_weight_index(p, b, q, h, l, pt)]) *
                                 level_max[(b * NH + h) * NL + l];
                for (int64_t c = 0; c < C; c++) {
                    const int64_t i = ref_output_index(p, b, q, h, c);
                    const double tol = abs_tol + rel * 4.0 * a_mag;
                    if (!(fabs(t->out[i] - ref_out[i]) <= tol)) fail("output", p, i, t->out[i], ref_out[i], tol);
                }
                for (int64_t l = 0; l < NL; l++) {
                    const int64_t height = p->spatial_shapes[2 * l], width = p->spatial_shapes[2 * l + 1];
                    const double m = level_max[(b * NH + h) * NL + l];
                    for (int64_t pt = 0; pt < P; pt++) {
                        const int64_t iw = ref_weight_index(p, b, q, h, l, pt);
                        const double tol_a = abs_tol + rel * 4.0 * g_sum * m;
                        if (!(fabs(t->grad_attn[iw] - ref_ga[iw]) <= tol_a))
                            fail("grad_attention_weights", p, iw, t->grad_attn[iw], ref_ga[iw], tol_a);
                        const int64_t ix = ref_location_index(p, b, q, h, l, pt, 0);
                        const int64_t iy = ref_location_index(p, b, q, h, l, pt, 1);
                        if (!smooth_axis(p, t->loc[ix], width) || !smooth_axis(p, t->loc[iy], height)) continue;
                        const double a = fabs(t->attn[iw]);
                        const double sx = p->align_corners ? (double)(width - 1) : (double)width;
                        const double sy = p->align_corners ? (double)(height - 1) : (double)height;
                        const double tol_x = abs_tol + rel * 4.0 * a * g_sum * m * sx;
                        const double tol_y = abs_tol + rel * 4.0 * a * g_sum * m * sy;
                        if (!(fabs(t->grad_loc[ix] - ref_gl[ix]) <= tol_x))
                            fail("grad_sampling_locations (x)", p, ix, t->grad_loc[ix], ref_gl[ix], tol_x);
                        if (!(fabs(t->grad_loc[iy] - ref_gl[iy]) <= tol_y))
                            fail("grad_sampling_locations (y)", p, iy, t->grad_loc[iy], ref_gl[iy], tol_y);
                    }
                }
            }

    /* grad_value: every sample of the level may touch a pixel, so bound by all of them. */
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < NH; h++)
            for (int64_t l = 0, start = 0; l < NL; l++) {
                const int64_t hw = p->spatial_shapes[2 * l] * p->spatial_shapes[2 * l + 1];
                for (int64_t c = 0; c < C; c++) {
                    double mag = 0.0;
                    for (int64_t q = 0; q < Q; q++) {
                        const double g = fabs(t->grad_out[ref_output_index(p, b, q, h, c)]);
                        for (int64_t pt = 0; pt < P; pt++)
                            mag += fabs(t->attn[ref_weight_index(p, b, q, h, l, pt)]) * g;
                    }
                    const double tol = abs_tol + rel * 4.0 * mag;
                    for (int64_t px = start; px < start + hw; px++) {
                        const int64_t i = ref_value_index(p, b, px, h, c);
                        if (!(fabs(t->grad_value[i] - ref_gv[i]) <= tol))
                            fail("grad_value", p, i, t->grad_value[i], ref_gv[i], tol);
                    }
                }
                start += hw;
            }
    free(ref_out); free(ref_gv); free(ref_gl); free(ref_ga); free(level_max);
}

/* Runs a valid, small problem and checks the invariants listed at the top. */
static void run_valid(const msda_problem *p, source *s, int mode, int alt_threads, int64_t edge_size)
{
    const int64_t ve = msda_value_elements(p), le = msda_locations_elements(p),
                  we = msda_weights_elements(p), oe = msda_output_elements(p);
    if (ve < 1 || le < 1 || we < 1 || oe < 1) {
        fprintf(stderr, "fuzz_kernel: element counts of a valid problem are %lld %lld %lld %lld\n",
                (long long)ve, (long long)le, (long long)we, (long long)oe);
        abort();
    }
    /* Exact-size buffers, each its own allocation, so ASan sees any access past an end. */
    tensors t;
    t.value = xmalloc((size_t)ve * 4);
    t.loc = xmalloc((size_t)le * 4);
    t.attn = xmalloc((size_t)we * 4);
    t.grad_out = xmalloc((size_t)oe * 4);
    t.out = xmalloc((size_t)oe * 4);
    t.grad_value = xmalloc((size_t)ve * 4);
    t.grad_loc = xmalloc((size_t)le * 4);
    t.grad_attn = xmalloc((size_t)we * 4);
    for (int64_t i = 0; i < le; i++) t.loc[i] = next_float(s, mode, 1);
    /* A thin level: some coordinates a few pixels from its ends, where float positions failed */
    for (int64_t i = 0; edge_size > 0 && i < le; i++) {
        const uint8_t b = next_byte(s);
        if (b < 96) t.loc[i] = (float)((double)(b % 2 ? edge_size - b % 8 : b % 8) / (double)edge_size + (b % 3 - 1) * 0.25 / (double)edge_size);
    }
    for (int64_t i = 0; i < we; i++) t.attn[i] = next_float(s, mode, 0);
    for (int64_t i = 0; i < ve; i++) t.value[i] = next_float(s, mode, 0);
    for (int64_t i = 0; i < oe; i++) t.grad_out[i] = next_float(s, mode, 0);

    float *out2 = xmalloc((size_t)oe * 4), *gv2 = xmalloc((size_t)ve * 4), *gl2 = xmalloc((size_t)le * 4),
          *ga2 = xmalloc((size_t)we * 4), *attn2 = xmalloc((size_t)we * 4);

    /* Determinism, and outputs overwritten: NaN-filled versus 0x7f-filled buffers. */
    run_forward(p, &t, t.out, 0xff);
    run_forward(p, &t, out2, 0x7f);
    if (memcmp(t.out, out2, (size_t)oe * 4) != 0) fail("forward differs between two runs", p, -1, 0, 0, 0);
    run_backward(p, &t, t.attn, t.grad_value, t.grad_loc, t.grad_attn, 0xff);
    run_backward(p, &t, t.attn, gv2, gl2, ga2, 0x7f);
    if (memcmp(t.grad_value, gv2, (size_t)ve * 4) || memcmp(t.grad_loc, gl2, (size_t)le * 4) ||
        memcmp(t.grad_attn, ga2, (size_t)we * 4))
        fail("backward differs between two runs", p, -1, 0, 0, 0);

    /* The same bits when the work units are split into parts (as threads would), each part
     * run on its own in reverse order; small problems never reach the pool's split. */
    if (alt_threads > 1) {
        msda_job job;
        msda_error err;
        memset(out2, 0x33, (size_t)oe * 4);
        if (msda__forward_job(&job, p, t.value, t.loc, t.attn, out2, &err) != MSDA_OK) abort();
        const int parts = job.units < alt_threads ? (int)job.units : alt_threads;
        for (int part = parts - 1; part >= 0; part--) msda__job_run_part(&job, part, parts);
        if (memcmp(t.out, out2, (size_t)oe * 4) != 0) fail("forward depends on the split into parts", p, parts, 0, 0, 0);
        memset(gv2, 0x33, (size_t)ve * 4);
        memset(gl2, 0x33, (size_t)le * 4);
        memset(ga2, 0x33, (size_t)we * 4);
        if (msda__backward_job(&job, p, t.grad_out, t.value, t.loc, t.attn, gv2, gl2, ga2, &err) != MSDA_OK) abort();
        const int bparts = job.units < alt_threads ? (int)job.units : alt_threads;
        for (int part = bparts - 1; part >= 0; part--) msda__job_run_part(&job, part, bparts);
        if (memcmp(t.grad_value, gv2, (size_t)ve * 4) || memcmp(t.grad_loc, gl2, (size_t)le * 4) ||
            memcmp(t.grad_attn, ga2, (size_t)we * 4))
            fail("backward depends on the split into parts", p, bparts, 0, 0, 0);
    }

    /* The same bits with another thread count. */
    if (alt_threads != p->threads) {
        msda_problem pt = *p;
        pt.threads = alt_threads;
        run_forward(&pt, &t, out2, 0x00);
        if (memcmp(t.out, out2, (size_t)oe * 4) != 0) fail("forward depends on the thread count", p, alt_threads, 0, 0, 0);
        run_backward(&pt, &t, t.attn, gv2, gl2, ga2, 0x00);
        if (memcmp(t.grad_value, gv2, (size_t)ve * 4) || memcmp(t.grad_loc, gl2, (size_t)le * 4) ||
            memcmp(t.grad_attn, ga2, (size_t)we * 4))
            fail("backward depends on the thread count", p, alt_threads, 0, 0, 0);
    }

    /* Samples that contribute nothing: exact 0 gradients, and a NaN weight on them is ignored. */
    int any_dead = 0;
    memcpy(attn2, t.attn, (size_t)we * 4);
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t q = 0; q < p->num_queries; q++)
            for (int64_t h = 0; h < p->num_heads; h++)
                for (int64_t l = 0; l < p->num_levels; l++)
                    for (int64_t pt = 0; pt < p->num_points; pt++) {
                        const int64_t ix = ref_location_index(p, b, q, h, l, pt, 0);
                        const int64_t iy = ref_location_index(p, b, q, h, l, pt, 1);
                        const int64_t iw = ref_weight_index(p, b, q, h, l, pt);
                        if (!certainly_dead(p, t.loc[ix], t.loc[iy], p->spatial_shapes[2 * l],
                                            p->spatial_shapes[2 * l + 1]))
                            continue;
                        any_dead = 1;
                        attn2[iw] = NAN;
                        if (t.grad_loc[ix] != 0.0f) fail("grad_sampling_locations of a dead sample (x)", p, ix, t.grad_loc[ix], 0, 0);
                        if (t.grad_loc[iy] != 0.0f) fail("grad_sampling_locations of a dead sample (y)", p, iy, t.grad_loc[iy], 0, 0);
                        if (t.grad_attn[iw] != 0.0f) fail("grad_attention_weights of a dead sample", p, iw, t.grad_attn[iw], 0, 0);
                    }
    if (any_dead) {
        msda_error err;
        memset(out2, 0x55, (size_t)oe * 4);
        if (msda_forward(p, t.value, t.loc, attn2, out2, &err) != MSDA_OK) abort();
        for (int64_t i = 0; i < oe; i++)
            if (!same_value(out2[i], t.out[i])) fail("output changed by a NaN weight on a dead sample", p, i, out2[i], t.out[i], 0);
        run_backward(p, &t, attn2, gv2, gl2, ga2, 0x55);
        for (int64_t i = 0; i < ve; i++)
            if (!same_value(gv2[i], t.grad_value[i])) fail("grad_value changed by a NaN weight on a dead sample", p, i, gv2[i], t.grad_value[i], 0);
        for (int64_t i = 0; i < le; i++)
            if (!same_value(gl2[i], t.grad_loc[i])) fail("grad_sampling_locations changed by a NaN weight on a dead sample", p, i, gl2[i], t.grad_loc[i], 0);
        for (int64_t i = 0; i < we; i++)
            if (!same_value(ga2[i], t.grad_attn[i])) fail("grad_attention_weights changed by a NaN weight on a dead sample", p, i, ga2[i], t.grad_attn[i], 0);
    }

    /* Against the float64 reference when values are finite and small enough not to overflow
     * float32 (coordinates may be anything: the reference defines NaN, inf and huge ones). */
    const float limit = 1e8f;
    if (bounded(t.value, ve, limit) && bounded(t.attn, we, limit) && bounded(t.grad_out, oe, limit))
        check_reference(p, &t);

    free(t.value); free(t.loc); free(t.attn); free(t.grad_out);
    free(t.out); free(t.grad_value); free(t.grad_loc); free(t.grad_attn);
    free(out2); free(gv2); free(gl2); free(ga2); free(attn2);
}

/* Each corruption makes the problem invalid or unusual; validation must agree with the
 * independent checker, and a refused call must name a status and leave a message. */
static void corrupt(msda_problem *p, int64_t *shapes, int64_t *starts, int kind, uint8_t arg, int levels_capacity)
{
    const int64_t special = special_ints[arg % N_SPECIAL_INTS];
    switch (kind) {
    case 0: p->batch = special; break;
    case 1: p->num_queries = special; break;
    case 2: p->num_heads = special; break;
    case 3: p->channels = special; break;
    case 4: p->num_points = special; break;
    case 5: /* never more levels than the arrays hold: the library cannot know their length */
        p->num_levels = arg % 3 == 0 ? -(int64_t)(arg % 5) : (int64_t)(arg % (levels_capacity + 1));
        break;
    case 6: p->value_length += (arg & 1) ? 1 : -1; break;
    case 7: p->value_length = special; break;
    case 8: shapes[arg % (2 * p->num_levels)] = special; break;
    case 9: starts[arg % p->num_levels] += (arg & 0x80) ? 1 : -1; break;
    case 10: case 11: case 12: case 13: /* option kind - 10 (src/options.h's order) one past its last value, or -1 */
        if (kind - 10 < MSDA_OPTION_COUNT) msda_option_set(p, kind - 10, (arg & 1) ? msda_options[kind - 10].count : -1);
        break;
    case 14: p->threads = (arg & 1) ? 0 : -3; break;
    case 15: p->spatial_shapes = NULL; break;
    case 16: p->level_start_index = NULL; break;
    case 17: { /* huge but consistent shapes: the sums or the byte sizes overflow */
        const int64_t big = special_ints[5 + arg % 6];
        int64_t total = 0;
        for (int64_t l = 0; l < p->num_levels; l++) {
            shapes[2 * l] = (l == 0 || (arg & 0x40)) ? big : 1;
            shapes[2 * l + 1] = (arg & 0x80) ? big : 2;
            starts[l] = total;
            int64_t hw;
            if (__builtin_mul_overflow(shapes[2 * l], shapes[2 * l + 1], &hw) ||
                __builtin_add_overflow(total, hw, &total))
                total = INT64_MAX;
        }
        p->value_length = total;
        break;
    }
    default: break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    source s = {data, size, 0x243F6A8885A308D3ull};
    for (size_t i = 0; i < size; i++) s.state = (s.state ^ data[i]) * 0x100000001B3ull;

    static const int64_t channel_choices[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 32, 33, 37};
    msda_problem p;
    msda_problem_init(&p);
    p.batch = 1 + next_byte(&s) % 2;
    /* Mostly 1..5 queries; sometimes 30..1080, past the kernels' query blocks (64), level
     * stretches (32) and walking chunks (1024). */
    const uint8_t queries = next_byte(&s);
    const int many_queries = queries >= 0xf0;
    p.num_queries = many_queries ? 30 + (queries % 16) * 70 : 1 + queries % 5;
    p.num_heads = 1 + next_byte(&s) % 3;
    p.channels = channel_choices[next_byte(&s) % (sizeof channel_choices / sizeof channel_choices[0])];
    /* Mostly 1..4 levels; sometimes 17..20 small ones (kernels may cache 16 levels' geometry). */
    const uint8_t levels = next_byte(&s);
    p.num_levels = levels >= 0xf8 ? 17 + levels % 4 : 1 + levels % 4;
    /* Mostly 1..4 points; sometimes 17..32, so levels x points passes 64 (kernels that gather
     * a query's corners into a fixed-size list must flush it). */
    const uint8_t points = next_byte(&s);
    p.num_points = points >= 0xf0 ? 17 + points % 16 : 1 + points % 4;
    /* Keep each input fast: at most 512 samples, or 2200 with many queries (the reference is
     * slow on purpose); what gives way first is whatever the input did not make large. */
    while (p.batch * p.num_queries * p.num_heads * p.num_levels * p.num_points > (many_queries ? 2200 : 512)) {
        if (many_queries) {
            if (p.num_heads > 1) p.num_heads--;
            else if (p.batch > 1) p.batch--;
            else if (p.num_levels > 1) p.num_levels--;
            else if (p.num_points > 1) p.num_points--;
            else p.num_queries--;
        } else if (p.num_queries > 1) p.num_queries--;
        else if (p.num_heads > 1) p.num_heads--;
        else if (p.batch > 1) p.batch--;
        else p.num_points = 1 + p.num_points / 2;
    }
    const uint8_t options = next_byte(&s);
    /* the low 4 bits: the options in mixed radix, the first changing fastest (with two values each,
       bit i is option i's); 16 combinations at most, which the options' counts multiply to today */
    for (int id = 0, digits = options & 15; id < MSDA_OPTION_COUNT; digits /= msda_options[id].count, id++)
        msda_option_set(&p, id, digits % msda_options[id].count);
    p.threads = 1 + ((options >> 4) & 3) % 3;
    const int alt_threads = 1 + (options >> 6);   /* 1..4 */
    const int mode = next_byte(&s) % 3;
    const uint8_t corruption = next_byte(&s), corruption_arg = next_byte(&s);
    msda_error err_thin;

    /* One thin level with a long side: past 1024 pixels the kernels place samples in double
     * (their exact path); rarely past 2^24, where float positions would fall off the level. */
    if (corruption >= 62 && corruption < 66) {
        const int huge = corruption == 62 && (corruption_arg & 0xc0) == 0xc0;
        const int64_t side = huge ? ((int64_t)1 << 24) - 3 + corruption_arg % 40 : 1000 + (int64_t)corruption_arg * 16;
        const int64_t across = huge ? 1 : 1 + corruption_arg % 3;
        int64_t thin[2] = {across, side}, start = 0;
        if (corruption_arg & 1) { thin[0] = side; thin[1] = across; }
        p.num_levels = 1;
        p.spatial_shapes = thin;
        p.level_start_index = &start;
        p.value_length = thin[0] * thin[1];
        if (huge) {
            p.batch = p.num_heads = 1;
            p.channels = 1;   /* 64 MB a tensor, within the 2 GB the fuzzer allows */
        }
        if (msda_validate(&p, &err_thin) != MSDA_OK) abort();
        run_valid(&p, &s, mode, alt_threads, side);
        return 0;
    }

    int64_t shapes[2 * MAX_LEVELS], starts[MAX_LEVELS];
    int64_t total = 0;
    for (int l = 0; l < MAX_LEVELS; l++) {
        const uint8_t hw = l < 6 ? next_byte(&s) : (uint8_t)(l * 37);
        shapes[2 * l] = 1 + (hw & 7) % (l < 6 ? 8 : 2);
        shapes[2 * l + 1] = 1 + ((hw >> 4) % 8) % (l < 6 ? 8 : 3);
        starts[l] = total;
        total += shapes[2 * l] * shapes[2 * l + 1];
        if (l + 1 == p.num_levels) p.value_length = total;
    }
    p.spatial_shapes = shapes;
    p.level_start_index = starts;

    /* About one input in five is corrupted somehow. */
    const int kind = corruption < 54 ? corruption % 18 : -1;
    if (kind >= 0) corrupt(&p, shapes, starts, kind, corruption_arg, MAX_LEVELS);

    const int problem_null = kind >= 0 && (corruption_arg & 0x3f) == 0x3f;
    msda_error err;
    memset(&err, 0, sizeof err);
    const msda_status st = msda_validate(problem_null ? NULL : &p, &err);
    const int expect_valid = !problem_null && independent_valid(&p);
    if ((st == MSDA_OK) != expect_valid) {
        fprintf(stderr, "fuzz_kernel: msda_validate returned %s (%s), the independent check says %s\n",
                msda_status_string(st), err.message, expect_valid ? "valid" : "invalid");
        abort();
    }
    if (st != MSDA_OK) {
        if (err.status != st || err.message[0] == '\0' || strchr(err.message, '\n') ||
            strlen(err.message) >= sizeof err.message || strcmp(msda_status_string(st), "MSDA_UNKNOWN_STATUS") == 0) {
            fprintf(stderr, "fuzz_kernel: refusal without a proper message: status %d, err.status %d, \"%s\"\n",
                    (int)st, (int)err.status, err.message);
            abort();
        }
        if (msda_value_elements(problem_null ? NULL : &p) != 0 || msda_output_elements(problem_null ? NULL : &p) != 0) {
            fprintf(stderr, "fuzz_kernel: element counts of an invalid problem are not 0\n");
            abort();
        }
        /* The entry points refuse the same way and touch nothing (NULL buffers would crash). */
        if (msda_forward(problem_null ? NULL : &p, NULL, NULL, NULL, NULL, NULL) != st ||
            msda_backward(problem_null ? NULL : &p, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL) != st) {
            fprintf(stderr, "fuzz_kernel: forward/backward disagree with msda_validate\n");
            abort();
        }
        return 0;
    }
    /* Valid but too large to run here (only the huge-shape corruptions get here). */
    const int64_t ve = msda_value_elements(&p), le = msda_locations_elements(&p);
    if (ve > (1 << 20) || le > (1 << 20)) return 0;

    /* Buffer misuse on a valid problem: a NULL buffer, or an output overlapping an input. */
    if (kind < 0 && corruption >= 54 && corruption < 62) {
        const int64_t oe = msda_output_elements(&p), we = msda_weights_elements(&p);
        float *value = xmalloc((size_t)ve * 4), *loc = xmalloc((size_t)le * 4), *attn = xmalloc((size_t)we * 4);
        float *out = xmalloc((size_t)oe * 4), *grad_out = xmalloc((size_t)oe * 4);
        float *gv = xmalloc((size_t)ve * 4), *gl = xmalloc((size_t)le * 4), *ga = xmalloc((size_t)we * 4);
        float *fwd[4] = {value, loc, attn, out};
        float *bwd[7] = {grad_out, value, loc, attn, gv, gl, ga};
        msda_status expect;
        if (corruption_arg & 1) {
            fwd[corruption_arg % 4] = NULL;
            bwd[(corruption_arg >> 2) % 7] = NULL;
            expect = MSDA_ERR_NULL_POINTER;
        } else {
            /* an output aliases an input or another output */
            fwd[3] = fwd[(corruption_arg >> 1) % 3];
            const int o = 4 + (corruption_arg >> 1) % 3, j = (corruption_arg >> 3) % 7;
            bwd[o] = bwd[j == o ? 0 : j];
            expect = MSDA_ERR_OVERLAP;
        }
        const msda_status fs = msda_forward(&p, fwd[0], fwd[1], fwd[2], fwd[3], &err);
        const msda_status bs = msda_backward(&p, bwd[0], bwd[1], bwd[2], bwd[3], bwd[4], bwd[5], bwd[6], &err);
        if (fs != expect || bs != expect) {
            fprintf(stderr, "fuzz_kernel: buffer misuse gave %s / %s, expected %s\n", msda_status_string(fs),
                    msda_status_string(bs), msda_status_string(expect));
            abort();
        }
        free(value); free(loc); free(attn); free(out); free(grad_out); free(gv); free(gl); free(ga);
        return 0;
    }
    run_valid(&p, &s, mode, alt_threads, 0);
    return 0;
}
