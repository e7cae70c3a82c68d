/* The forward and backward kernels over ranges of work units (see internal.h).
 *
 * Bits do not depend on the build: every channel sums its terms in the same order in the
 * scalar and every SIMD build (simd.h), and a dot product over C channels is always four lane
 * partials over the first C - C % 4 channels, combined as (s0 + s1) + (s2 + s3), then the
 * remaining channels in order, whatever the vector width.
 *
 * Both passes walk (query, head) and, inside, the levels and the points four at a time: the
 * bilinear corners and weights of four points are computed in one go with the points as
 * vector lanes, then the channel work runs per point with the channels as vector lanes. */
#include "internal.h"

/* This file is compiled once for the baseline ISA (SSE2 on x86-64, NEON on arm64, wasm SIMD,
 * or scalar) and included again by kernel_avx2.c, kernel_avx512.c and kernel_scalar.c, which set
 * MSDA_KERNEL_ISA (the suffix of the two entry points) and MSDA_VW; the baseline build also
 * holds the run-time choice between them (the end of the file). */
#ifndef MSDA_KERNEL_ISA
#define MSDA_KERNEL_ISA base
#define MSDA_KERNEL_BASE 1
#endif
#define MSDA_CAT2(a, b) a##_##b
#define MSDA_CAT(a, b) MSDA_CAT2(a, b)
#define MSDA_KFN(name) MSDA_CAT(name, MSDA_KERNEL_ISA)

#include "simd.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#define MSDA_INLINE static inline __attribute__((always_inline))
#if MSDA_VW > 4
#define MSDA_SCALAR_REG(x) __asm__("" : "+r"(x))   /* x stays a scalar: nothing vectorises it */
#else
#define MSDA_SCALAR_REG(x) (void)0
#endif

/* One axis of a level, with the per-level constants hoisted out of the sample loop. */
typedef struct axis_geom {
    float scale;        /* W (or W - 1 with align_corners): u = x * scale - shift */
    float shift;        /* 0.5, or 0 with align_corners */
    float last;         /* size - 1 */
    float size;
    ptrdiff_t size_i;
    int64_t scale_i;    /* the scale as an integer, for the exact wide path */
    int degenerate;     /* align_corners with size 1: every coordinate maps to pixel 0 */
} axis_geom;

typedef struct level_geom {
    axis_geom x, y;
    ptrdiff_t pixel_stride, row_stride;
    ptrdiff_t start;    /* element offset of the level's first pixel from the (batch, head) base */
    int border;
    int narrow;         /* every offset in this level fits int32: the lane-parallel corner path */
} level_geom;

/* The largest side whose pixel positions are formed in float lanes (error at most 2^-14 of a
 * pixel there); see level_geom_init. */
#define MSDA_FLOAT_SIDE 1024

static void level_geom_init(level_geom *g, const msda_plan *p, int64_t l)
{
    const int64_t sizes[2] = {p->spatial_shapes[2 * l + 1], p->spatial_shapes[2 * l]};
    axis_geom *axes[2] = {&g->x, &g->y};
    for (int i = 0; i < 2; i++) {
        axis_geom *a = axes[i];
        a->size_i = (ptrdiff_t)sizes[i];
        a->size = (float)sizes[i];
        a->last = (float)(sizes[i] - 1);
        a->scale_i = p->align_corners ? sizes[i] - 1 : sizes[i];
        a->scale = (float)a->scale_i;
        a->shift = p->align_corners ? 0.0f : 0.5f;
        a->degenerate = p->align_corners && sizes[i] == 1;
    }
    g->pixel_stride = (ptrdiff_t)p->value_stride_pixel;
    g->row_stride = (ptrdiff_t)(sizes[0] * p->value_stride_pixel);
    g->start = (ptrdiff_t)(p->level_start_index[l] * p->value_stride_pixel);
    g->border = p->padding == MSDA_PADDING_BORDER;
    /* Float lanes round the position x * W - 0.5 by up to W * 2^-24 of a pixel (past 2^24 to
     * the wrong pixel): only sides up to MSDA_FLOAT_SIDE take them, larger ones the exact
     * double path. Offsets up to (H + 1) rows must fit int32. */
    g->narrow = sizes[0] <= MSDA_FLOAT_SIDE && sizes[1] <= MSDA_FLOAT_SIDE &&
                (sizes[1] + 1) * (sizes[0] + 1) <= INT32_MAX / p->value_stride_pixel;
}

/* Level geometry for every level, computed once per range of units (levels beyond the cache
 * are recomputed when used). */
#define MSDA_CACHED_LEVELS 16

typedef struct geom_cache {
    level_geom level[MSDA_CACHED_LEVELS];
    level_geom spare;
} geom_cache;

static void geom_cache_init(geom_cache *gc, const msda_plan *p)
{
    for (int64_t l = 0; l < p->num_levels && l < MSDA_CACHED_LEVELS; l++) level_geom_init(&gc->level[l], p, l);
}

static inline const level_geom *geom_of(geom_cache *gc, const msda_plan *p, int64_t l)
{
    if (l < MSDA_CACHED_LEVELS) return &gc->level[l];
    level_geom_init(&gc->spare, p, l);
    return &gc->spare;
}

/* ---- corners of up to four points ---- */

/* The corners of up to four points of one level, points as lanes. */
typedef struct point_group {
    ptrdiff_t offset[4];   /* per point: element offset of corner 00 from the level's first pixel;
                              only corners in `mask` may be dereferenced */
    unsigned mask[4];      /* per point: bit k set when corner k (00, 01, 10, 11) is inside the
                              level; 0 drops the sample (NaN, or outside under zeros padding) */
    v4i offset_lanes;      /* offset as int32 lanes (narrow levels only) */
    v4i live;              /* -1 where mask != 0 */
    v4 weight[4];          /* bilinear weight of corner k */
    v4 fx, fy;
    v4 grad_scale_x;       /* su * du'/du */
    v4 grad_scale_y;       /* sv * dv'/dv */
} point_group;

/* Maps normalised coordinates to pixel space along one axis, four lanes at a time.
 * `ok` comes back -1 where a corner along this axis can be in bounds. Lanes are set to 0
 * before conversion unless known finite and in [-1, size), so no conversion is undefined. */
MSDA_INLINE void axis4(v4 coord, const axis_geom *a, int border, v4i *index0, v4 *frac, v4 *grad_scale,
                       v4i *ok)
{
    const v4 zero = v4_zero();
    v4 pos = a->degenerate ? zero : v4_sub(v4_mul(coord, v4_splat(a->scale)), v4_splat(a->shift));
    v4i valid = v4_eq(coord, coord);   /* not NaN */
    v4 gs = v4_splat(a->scale);
    if (border) {
        const v4 last = v4_splat(a->last);
        const v4i inside = v4i_and(v4_gt(pos, zero), v4_lt(pos, last));
        gs = v4_select(inside, gs, zero);
        pos = v4_select(inside, pos, v4_select(v4_le(pos, zero), zero, last));
    } else {
        valid = v4i_and(valid, v4i_and(v4_ge(pos, v4_splat(-1.0f)), v4_lt(pos, v4_splat(a->size))));
    }
    pos = v4_select(valid, pos, zero);
    v4i i = v4_trunc(pos);
    i = v4i_add(i, v4_gt(v4i_to_float(i), pos));   /* floor: one less where truncation went up */
    *index0 = i;
    *frac = v4_sub(pos, v4i_to_float(i));
    *grad_scale = gs;
    *ok = valid;
}

/* The same mapping for one coordinate with pointer-width indices, for levels too large for
 * int32 lanes or float pixel positions. The position is formed in double: a float times a side
 * below 2^29 is exact there, so the pixel index and the fraction are the exact ones (float
 * would round W - 0.5 to W past 2^24 and read a pixel past the edge). Returns 0 when no corner
 * along this axis can be in bounds. */
static inline int axis1(float coord, const axis_geom *a, int border, ptrdiff_t *index0, float *frac,
                        float *grad_scale)
{
    if (isnan(coord)) return 0;
    const double size = (double)a->size_i, last = (double)(a->size_i - 1);
    double pos = a->degenerate ? 0.0 : (double)coord * (double)a->scale_i - (double)a->shift;   /* 0 * inf would be NaN */
    *grad_scale = a->scale;
    if (border) {
        if (!(pos > 0.0 && pos < last)) {
            *grad_scale = 0.0f;
            pos = pos <= 0.0 ? 0.0 : last;
        }
    } else if (!(pos >= -1.0 && pos < size)) {
        return 0;
    }
    const double f = floor(pos);
    *index0 = (ptrdiff_t)f;
    *frac = (float)(pos - f);
    return 1;
}

MSDA_INLINE v4 one_minus(v4 a) { return v4_sub(v4_splat(1.0f), a); }

/* x, y: the points' coordinates (unused lanes NaN). */
MSDA_INLINE void group_corners(v4 x, v4 y, const level_geom *g, point_group *pg)
{
    if (g->narrow) {
        v4i ix, iy, okx, oky;
        axis4(x, &g->x, g->border, &ix, &pg->fx, &pg->grad_scale_x, &okx);
        axis4(y, &g->y, g->border, &iy, &pg->fy, &pg->grad_scale_y, &oky);
        /* ix <= W - 1 and iy <= H - 1 always hold here */
        const v4i minus1 = v4i_splat(-1), one = v4i_splat(1);
        const v4i vx0 = v4i_lt(minus1, ix), vx1 = v4i_lt(v4i_add(ix, one), v4i_splat((int32_t)g->x.size_i));
        const v4i vy0 = v4i_lt(minus1, iy), vy1 = v4i_lt(v4i_add(iy, one), v4i_splat((int32_t)g->y.size_i));
        v4i mask = v4i_or(v4i_or(v4i_and(v4i_and(vx0, vy0), v4i_splat(1)), v4i_and(v4i_and(vx1, vy0), v4i_splat(2))),
                          v4i_or(v4i_and(v4i_and(vx0, vy1), v4i_splat(4)), v4i_and(v4i_and(vx1, vy1), v4i_splat(8))));
        const v4i ok = v4i_and(okx, oky);
        mask = v4i_and(mask, ok);
        pg->live = ok;
        const v4i offset = v4i_add(v4i_mul(iy, v4i_splat((int32_t)g->row_stride)),
                                   v4i_mul(ix, v4i_splat((int32_t)g->pixel_stride)));
        pg->offset_lanes = offset;
        int32_t m[4], o[4];
        v4i_store(m, mask);
        v4i_store(o, offset);
        for (int i = 0; i < 4; i++) {
            pg->mask[i] = (unsigned)m[i];
            pg->offset[i] = o[i];
        }
    } else {
        float fx[4] = {0}, fy[4] = {0}, gx[4] = {0}, gy[4] = {0};
        int32_t live[4];
        for (int i = 0; i < 4; i++) {
            ptrdiff_t x0 = 0, y0 = 0;
            const int ok = axis1(v4_lane(x, i), &g->x, g->border, &x0, &fx[i], &gx[i]) &&
                           axis1(v4_lane(y, i), &g->y, g->border, &y0, &fy[i], &gy[i]);
            if (!ok) {
                fx[i] = fy[i] = 0.0f;
                x0 = y0 = 0;
            }
            const unsigned vx0 = x0 >= 0, vx1 = x0 + 1 < g->x.size_i, vy0 = y0 >= 0, vy1 = y0 + 1 < g->y.size_i;
            pg->mask[i] = ok ? ((vx0 & vy0) | (vx1 & vy0) << 1 | (vx0 & vy1) << 2 | (vx1 & vy1) << 3) : 0u;
            pg->offset[i] = y0 * g->row_stride + x0 * g->pixel_stride;
            live[i] = ok ? -1 : 0;
        }
        pg->fx = v4_set(fx[0], fx[1], fx[2], fx[3]);
        pg->fy = v4_set(fy[0], fy[1], fy[2], fy[3]);
        pg->grad_scale_x = v4_set(gx[0], gx[1], gx[2], gx[3]);
        pg->grad_scale_y = v4_set(gy[0], gy[1], gy[2], gy[3]);
        pg->live = v4i_set(live[0], live[1], live[2], live[3]);
        pg->offset_lanes = v4i_splat(0);
    }
    const v4 fx = pg->fx, fy = pg->fy;
    pg->weight[0] = v4_mul(one_minus(fy), one_minus(fx));
    pg->weight[1] = v4_mul(one_minus(fy), fx);
    pg->weight[2] = v4_mul(fy, one_minus(fx));
    pg->weight[3] = v4_mul(fy, fx);
}

/* Coordinates of points pt .. pt + count - 1 (count <= 4) of one (query, head, level); the
 * missing lanes are NaN, which drops them. */
MSDA_INLINE void load_points(const float *loc, ptrdiff_t point_stride, ptrdiff_t xy, int count, v4 *x, v4 *y)
{
    if (count == 4) {
        *x = v4_set(loc[0], loc[point_stride], loc[2 * point_stride], loc[3 * point_stride]);
        *y = v4_set(loc[xy], loc[point_stride + xy], loc[2 * point_stride + xy], loc[3 * point_stride + xy]);
        return;
    }
    float xs[4] = {NAN, NAN, NAN, NAN}, ys[4] = {NAN, NAN, NAN, NAN};
    for (int i = 0; i < count; i++) {
        xs[i] = loc[i * point_stride];
        ys[i] = loc[i * point_stride + xy];
    }
    *x = v4_load(xs);
    *y = v4_load(ys);
}

MSDA_INLINE v4 load_partial(const float *p, int count)
{
    if (count == 4) return v4_load(p);
    float tmp[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int i = 0; i < count; i++) tmp[i] = p[i];
    return v4_load(tmp);
}

/* ---- forward ----
 * Each (query, head) first lists its in-bounds corners as taps (row, weight), then sums them
 * channel block by channel block with the block's accumulators in registers. Tap order, which
 * is each output channel's summation order: level, group of four points, corner, point. */

#define MSDA_TAPS 256

typedef struct taps {
    const float *row[MSDA_TAPS];
    float weight[MSDA_TAPS];
} taps;

/* Appends the in-bounds corners of one point group; returns the new tap count. */
MSDA_INLINE int emit_taps(taps *restrict tp, int n, const point_group *pg, const v4 aw[4], int count,
                          const float *value_level, const level_geom *g)
{
    const ptrdiff_t delta[4] = {0, g->pixel_stride, g->row_stride, g->row_stride + g->pixel_stride};
    if (count == 4 && (pg->mask[0] & pg->mask[1] & pg->mask[2] & pg->mask[3]) == 15u) {
        for (int k = 0; k < 4; k++) v4_store(tp->weight + n + 4 * k, aw[k]);
#if MSDA_SIMD && UINTPTR_MAX == 0xFFFFFFFFu
        /* 32-bit pointers (wasm32): four rows per vector store */
        if (g->narrow) {
            const v4i rows = v4i_add(v4i_splat((int32_t)(uintptr_t)value_level),
                                     v4i_mul(pg->offset_lanes, v4i_splat((int32_t)sizeof(float))));
            for (int k = 0; k < 4; k++) {
                const v4i r = v4i_add(rows, v4i_splat((int32_t)(delta[k] * (ptrdiff_t)sizeof(float))));
                memcpy(tp->row + n + 4 * k, &r, sizeof r);
            }
            return n + 16;
        }
#endif
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < 4; i++) tp->row[n + 4 * k + i] = value_level + pg->offset[i] + delta[k];
        return n + 16;
    }
    /* Some corner outside (common near the edges of small levels): every slot is written and
     * kept only when inside, without a branch per corner. An outside corner's row address is
     * formed as an integer, never as an out-of-bounds pointer, and never dereferenced. */
    float w[4][4];
    for (int k = 0; k < 4; k++) v4_store(w[k], aw[k]);
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < count; i++) {
            tp->row[n] = (const float *)((uintptr_t)value_level +
                                         (uintptr_t)(pg->offset[i] + delta[k]) * sizeof(float));
            tp->weight[n] = w[k][i];
            n += (int)(pg->mask[i] >> k & 1u);
        }
    return n;
}

/* out[c0 .. c0 + V vectors) = (first ? 0 : out) + sum_t weight[t] * row[t][c0 ..]. Written
 * once for v4 (the tails) and vf (32-channel blocks, MSDA_VW lanes). */
#define MSDA_SUM_TAPS_BLOCK(NAME, T, LANES, ZERO, SPLAT, LOAD, STORE, MADD)                                       \
    MSDA_INLINE void NAME(float *restrict out, const taps *restrict tp, int n, int first, ptrdiff_t c0, const int V) \
    {                                                                                                            \
        T acc[32 / LANES];                                                                                       \
        for (int v = 0; v < V; v++) acc[v] = first ? ZERO() : LOAD(out + c0 + LANES * v);                       \
        for (int t = 0; t < n; t++) {                                                                            \
            const T w = SPLAT(tp->weight[t]);                                                                    \
            const float *row = tp->row[t] + c0;                                                                  \
            for (int v = 0; v < V; v++) acc[v] = MADD(acc[v], w, LOAD(row + LANES * v));                         \
        }                                                                                                        \
        for (int v = 0; v < V; v++) STORE(out + c0 + LANES * v, acc[v]);                                         \
    }
MSDA_SUM_TAPS_BLOCK(sum_taps_block, v4, 4, v4_zero, v4_splat, v4_load, v4_store, v4_madd)
MSDA_SUM_TAPS_BLOCK(sum_taps_wide, vf, MSDA_VW, vf_zero, vf_splat, vf_load, vf_store, vf_madd)

static void sum_taps(float *restrict out, const taps *restrict tp, int n, int first, ptrdiff_t C)
{
    ptrdiff_t c = 0;
    for (; c + 32 <= C; c += 32) sum_taps_wide(out, tp, n, first, c, 32 / MSDA_VW);
    if (C - c >= 16) { sum_taps_block(out, tp, n, first, c, 4); c += 16; }
    if (C - c >= 8) { sum_taps_block(out, tp, n, first, c, 2); c += 8; }
    if (C - c >= 4) { sum_taps_block(out, tp, n, first, c, 1); c += 4; }
    for (; c < C; c++) {
        float acc = first ? 0.0f : out[c];
        for (int t = 0; t < n; t++) acc += tp->weight[t] * tp->row[t][c];
        out[c] = acc;
    }
}

/* 1 when out[0 .. C) is all finite (read back from L1 just after the sum): x - x is 0 exactly
 * when x is finite; adding first may overflow, which only sends a finite result down the exact
 * path (the same answer). */
static inline int all_finite(const float *out, ptrdiff_t C)
{
    ptrdiff_t c = 0;
    v4 check = v4_zero();
    for (; c + 4 <= C; c += 4) check = v4_add(check, v4_load(out + c));
    float rest = 0.0f;
    for (; c < C; c++) rest += out[c];
    check = v4_sub(check, check);
    return !v4i_any(v4i_xor(v4_eq(check, v4_zero()), v4i_splat(-1))) && rest - rest == 0.0f;
}

/* ---- the banded walk ----
 * One query per pixel (encoder self-attention): query start_l + y * W_l + x is pixel (y, x) of
 * level l and samples around that place on every level. Both passes then walk the queries of
 * all levels together over the image: in bands of `strip` rows of the tallest level (`rows`),
 * and in a band column by column of the widest level (`cols`), each level's pixels whose place
 * falls there. Neighbouring queries share their rows in cache, and one sweep over the image
 * reads each level's rows a few times instead of once per image line (raster order) or once per
 * level of queries (index order). The order depends on the shapes alone. */

#ifndef MSDA_BACKWARD_STRIP
#define MSDA_BACKWARD_STRIP 8
#endif
#ifndef MSDA_FORWARD_STRIP
#define MSDA_FORWARD_STRIP 4
#endif

/* Shapes up to this many pixels per side use the banded walk (products stay in int64). */
#define MSDA_BAND_LIMIT ((int64_t)1 << 20)

typedef struct band_grid {
    int64_t bands, cols;
} band_grid;

/* The pixels of one level in one (band, column) cell: x0 <= x < x1, y0 <= y < y1, queries
 * start + y * width + x. */
typedef struct band_cell {
    int64_t x0, x1, y0, y1, start, width;
} band_cell;

/* ceil(k * n / d) capped at n: where band k of d starts along an axis of n pixels. */
static inline int64_t band_start(int64_t k, int64_t n, int64_t d)
{
    const int64_t s = (k * n + d - 1) / d;
    return s < n ? s : n;
}

static inline void band_cell_of(const msda_plan *p, const band_grid *bg, int64_t k, int64_t j, int64_t l,
                                band_cell *cell)
{
    const int64_t Hl = p->spatial_shapes[2 * l], Wl = p->spatial_shapes[2 * l + 1];
    cell->y0 = band_start(k, Hl, bg->bands);
    cell->y1 = band_start(k + 1, Hl, bg->bands);
    cell->x0 = band_start(j, Wl, bg->cols);
    cell->x1 = band_start(j + 1, Wl, bg->cols);
    cell->start = p->level_start_index[l];
    cell->width = Wl;
}

/* 1 when the problem is walked in bands of `strip` rows: one query per pixel, sides small
 * enough for band_start's products, and no more (band, column) cells than pixels, so walking
 * the empty cells of odd shapes (1 x n beside n x 1) costs nothing. */
static int banded_walk(const msda_plan *p, int64_t strip, band_grid *bg)
{
    int64_t rows = 1, cols = 1;
    int banded = 1;
    for (int64_t l = 0; l < p->num_levels; l++) {
        const int64_t hl = p->spatial_shapes[2 * l], wl = p->spatial_shapes[2 * l + 1];
        banded &= hl <= MSDA_BAND_LIMIT && wl <= MSDA_BAND_LIMIT;
        rows = hl > rows ? hl : rows;
        cols = wl > cols ? wl : cols;
    }
    bg->bands = (rows + strip - 1) / strip;
    bg->cols = cols;
    return p->num_queries == p->value_length && banded && bg->bands * cols <= p->value_length;
}

/* ---- query order ----
 * The forward walks encoder-style problems in bands (above). Other problems' queries may sample
 * anywhere; walked in index order, the rows a stretch of queries reads can span many image
 * lines and overflow the cache. Blocks of up to MSDA_BLOCK queries are walked instead in
 * Morton (Z) order of a reference point (the mean of head 0's level-0 points), which keeps
 * consecutive queries in a small patch. Only the forward walks this way: its bits do not depend
 * on the order at all. */

#define MSDA_BLOCK 1024

static inline float unit_clamp(float x) { return x >= 0.0f ? (x <= 1.0f ? x : 1.0f) : 0.0f; }   /* NaN: 0 */

static inline uint32_t spread_bits(uint32_t v)   /* bits 0..7 to the even bits 0..14 */
{
    v = (v | v << 4) & 0x0F0Fu;
    v = (v | v << 2) & 0x3333u;
    v = (v | v << 1) & 0x5555u;
    return v;
}

/* order[0 .. n) = the queries q_begin .. q_begin + n of batch b, in walking order. */
static void query_order(const msda_plan *p, const float *locations, int64_t b, int64_t q_begin, int n,
                        uint16_t *order)
{
    uint16_t key[MSDA_BLOCK], key_tmp[MSDA_BLOCK], order_tmp[MSDA_BLOCK];
    const int64_t points = p->num_points < 4 ? p->num_points : 4;
    for (int i = 0; i < n; i++) {
        const float *loc = locations + b * p->loc_stride_batch + (q_begin + i) * p->loc_stride_query;
        float sx = 0.0f, sy = 0.0f;
        for (int64_t pt = 0; pt < points; pt++) {
            sx += unit_clamp(loc[pt * p->loc_stride_point]);
            sy += unit_clamp(loc[pt * p->loc_stride_point + p->loc_stride_xy]);
        }
        const uint32_t ix = (uint32_t)(sx / (float)points * 255.0f), iy = (uint32_t)(sy / (float)points * 255.0f);
        key[i] = (uint16_t)(spread_bits(ix) | spread_bits(iy) << 1);
        order[i] = (uint16_t)i;
    }
    /* stable LSD radix sort, two passes of 8 bits */
    for (int shift = 0; shift < 16; shift += 8) {
        int count[257] = {0};
        for (int i = 0; i < n; i++) count[(key[i] >> shift & 255) + 1]++;
        for (int r = 0; r < 256; r++) count[r + 1] += count[r];
        for (int i = 0; i < n; i++) {
            const int at = count[key[i] >> shift & 255]++;
            key_tmp[at] = key[i];
            order_tmp[at] = order[i];
        }
        memcpy(key, key_tmp, (size_t)n * sizeof *key);
        memcpy(order, order_tmp, (size_t)n * sizeof *order);
    }
}

static int64_t query_blocks(const msda_plan *p)
{
    return (p->num_queries + MSDA_FORWARD_QUERY_BLOCK - 1) / MSDA_FORWARD_QUERY_BLOCK;
}

#ifdef MSDA_KERNEL_BASE
int64_t msda__forward_units(const msda_plan *p)
{
    return p->batch * p->num_heads * query_blocks(p);
}

int64_t msda__backward_units(const msda_plan *p)
{
    return p->batch * p->num_heads * p->backward_split;
}
#endif

/* NaN lanes become the one canonical NaN (simd.h): which NaN an operation gives differs between
 * ISAs, compilers and operand orders. */
static void canonical_nans(float *out, ptrdiff_t C)
{
    ptrdiff_t c = 0;
    for (; c + 4 <= C; c += 4) v4_store(out + c, v4_canonical(v4_load(out + c)));
    for (; c < C; c++) out[c] = f_canonical(out[c]);
}

/* out += a * S for each sample of one (query, head) whose weight a is infinite, S summed over
 * its inside corners in order as SEMANTICS writes it; the sum of the other samples' taps is
 * already in out. Inf plus anything gives the same value in any order (NaNs are made canonical
 * afterwards), so these can come last. Rare: plain scalar code. */
static void forward_infinite(const msda_plan *p, geom_cache *gc, const float *value_bh, const float *loc_qh,
                             const float *weights_qh, float *out)
{
    const int64_t NL = p->num_levels, P = p->num_points;
    const ptrdiff_t C = (ptrdiff_t)p->channels, xy = (ptrdiff_t)p->loc_stride_xy,
                    point_stride = (ptrdiff_t)p->loc_stride_point;
    for (int64_t l = 0; l < NL; l++) {
        const level_geom *g = geom_of(gc, p, l);
        const ptrdiff_t delta[4] = {0, g->pixel_stride, g->row_stride, g->row_stride + g->pixel_stride};
        for (int64_t pt = 0; pt < P; pt += 4) {
            const int count = P - pt < 4 ? (int)(P - pt) : 4;
            v4 x, y;
            load_points(loc_qh + l * p->loc_stride_level + pt * point_stride, point_stride, xy, count, &x, &y);
            point_group pg;
            group_corners(x, y, g, &pg);
            float w[4][4];
            for (int k = 0; k < 4; k++) v4_store(w[k], pg.weight[k]);
            for (int i = 0; i < count; i++) {
                const float a = weights_qh[l * P + pt + i];
                if (!isinf(a) || pg.mask[i] == 0u) continue;
                const float *corner = value_bh + g->start + pg.offset[i];
                for (ptrdiff_t c = 0; c < C; c++) {
                    float sum = 0.0f;
                    int any = 0;
                    for (int k = 0; k < 4; k++)
                        if (pg.mask[i] >> k & 1u) {
                            const float term = w[k][i] * corner[delta[k] + c];
                            sum = any ? sum + term : term;
                            any = 1;
                        }
                    out[c] += a * sum;
                }
            }
        }
    }
}

/* output[b, q, h]. When the sum of the taps is not finite it is done again `exact`ly: samples with
 * an infinite weight a give a * S (SEMANTICS), not the sum of a * w_k * V_k (Inf * 0 at a pixel
 * centre, Inf - Inf across corners), and NaNs are made canonical. A finite sum of taps has
 * no infinite weight in it (its taps would be Inf or NaN), so that path is the rare one. */
static void forward_query_exact(const msda_plan *p, const msda_tensors *t, geom_cache *gc, taps *tp, int64_t b,
                                int64_t q, int64_t h);

MSDA_INLINE void forward_query_impl(const msda_plan *p, const msda_tensors *t, geom_cache *gc, taps *tp, int64_t b,
                                    int64_t q, int64_t h, const int exact)
{
    const int64_t Q = p->num_queries, H = p->num_heads, NL = p->num_levels, P = p->num_points;
    const ptrdiff_t C = (ptrdiff_t)p->channels, xy = (ptrdiff_t)p->loc_stride_xy,
                    point_stride = (ptrdiff_t)p->loc_stride_point;
    const float *value_bh = t->value + b * p->value_stride_batch + h * p->value_stride_head;
    float *out = t->output + ((b * Q + q) * H + h) * C;
    const float *loc_qh = t->sampling_locations + b * p->loc_stride_batch + q * p->loc_stride_query +
                          h * p->loc_stride_head;
    const float *weights_qh = t->attention_weights + ((b * Q + q) * H + h) * NL * P;
    int n = 0, first = 1, infinite = 0;
    for (int64_t l = 0; l < NL; l++) {
        const level_geom *g = geom_of(gc, p, l);
        const float *value_level = value_bh + g->start;
        for (int64_t pt = 0; pt < P; pt += 4) {
            const int count = P - pt < 4 ? (int)(P - pt) : 4;
            v4 x, y;
            load_points(loc_qh + l * p->loc_stride_level + pt * point_stride, point_stride, xy, count, &x, &y);
            point_group pg;
            group_corners(x, y, g, &pg);
            const v4 a = load_partial(weights_qh + l * P + pt, count);
            const v4 aw[4] = {v4_mul(a, pg.weight[0]), v4_mul(a, pg.weight[1]), v4_mul(a, pg.weight[2]),
                              v4_mul(a, pg.weight[3])};
            if (exact && v4i_any(v4_isinf(a))) {   /* added after the taps (below) */
                int32_t inf[4];
                v4i_store(inf, v4_isinf(a));
                for (int i = 0; i < count; i++)
                    if (inf[i]) {
                        pg.mask[i] = 0u;
                        infinite = 1;
                    }
            }
            if (n + 16 > MSDA_TAPS) {   /* more samples than fit: sum what we have */
                sum_taps(out, tp, n, first, C);
                first = 0;
                n = 0;
            }
            n = emit_taps(tp, n, &pg, aw, count, value_level, g);
        }
    }
    sum_taps(out, tp, n, first, C);
    if (all_finite(out, C) && !infinite) return;
    if (!exact) {
        forward_query_exact(p, t, gc, tp, b, q, h);
        return;
    }
    if (infinite) forward_infinite(p, gc, value_bh, loc_qh, weights_qh, out);
    canonical_nans(out, C);
}

static void forward_query(const msda_plan *p, const msda_tensors *t, geom_cache *gc, taps *tp, int64_t b, int64_t q,
                          int64_t h)
{
    forward_query_impl(p, t, gc, tp, b, q, h, 0);
}

/* the rare path, out of line */
__attribute__((noinline)) static void forward_query_exact(const msda_plan *p, const msda_tensors *t, geom_cache *gc,
                                                          taps *tp, int64_t b, int64_t q, int64_t h)
{
    forward_query_impl(p, t, gc, tp, b, q, h, 1);
}

/* output[b, q, h] for the heads h of query q whose units are in [begin, end): units are
 * (batch, query block, head) with the head fastest. Every head of a query together: all heads'
 * rows of a pixel are used together (one head's rows alone share 1/H of the cache sets). */
MSDA_INLINE void forward_query_heads(const msda_plan *p, const msda_tensors *t, geom_cache *gc, taps *tp, int64_t b,
                                     int64_t q, int64_t blocks, int64_t begin, int64_t end)
{
    const int64_t H = p->num_heads, unit0 = (b * blocks + q / MSDA_FORWARD_QUERY_BLOCK) * H;
    const int64_t h_begin = begin > unit0 ? begin - unit0 : 0, h_end = end < unit0 + H ? end - unit0 : H;
    for (int64_t h = h_begin; h < h_end; h++) forward_query(p, t, gc, tp, b, q, h);
}

/* The forward's banded walk over the units [begin, end) of batch b. */
static void forward_banded(const msda_plan *p, const msda_tensors *t, geom_cache *gc, taps *tp, int64_t b,
                           int64_t begin, int64_t end, const band_grid *bg)
{
    const int64_t blocks = query_blocks(p);
    for (int64_t k = 0; k < bg->bands; k++)
        for (int64_t j = 0; j < bg->cols; j++)
            for (int64_t l = 0; l < p->num_levels; l++) {
                band_cell cell;
                band_cell_of(p, bg, k, j, l, &cell);
                for (int64_t x = cell.x0; x < cell.x1; x++)
                    for (int64_t y = cell.y0; y < cell.y1; y++)
                        forward_query_heads(p, t, gc, tp, b, cell.start + y * cell.width + x, blocks, begin, end);
            }
}

void MSDA_KFN(msda__forward_range)(const msda_plan *p, const msda_tensors *t, int64_t begin, int64_t end);
void MSDA_KFN(msda__forward_range)(const msda_plan *p, const msda_tensors *t, int64_t begin, int64_t end)
{
    const int64_t Q = p->num_queries, H = p->num_heads, blocks = query_blocks(p);
    const int64_t per_chunk = MSDA_BLOCK / MSDA_FORWARD_QUERY_BLOCK;
    geom_cache gc;
    geom_cache_init(&gc, p);
    taps tp;
    const int64_t first = begin / H, last = (end - 1) / H;   /* global query blocks b * blocks + block */
    band_grid bg;
    if (banded_walk(p, MSDA_FORWARD_STRIP, &bg)) {
        for (int64_t b = first / blocks; b <= last / blocks; b++) forward_banded(p, t, &gc, &tp, b, begin, end, &bg);
        return;
    }
    /* Otherwise the range's units are walked up to MSDA_BLOCK queries at a time in Morton order. */
    uint16_t order[MSDA_BLOCK];
    for (int64_t chunk = first; chunk <= last;) {
        const int64_t b = chunk / blocks;
        int64_t chunk_end = chunk + per_chunk;
        if (chunk_end > (b + 1) * blocks) chunk_end = (b + 1) * blocks;
        if (chunk_end > last + 1) chunk_end = last + 1;
        const int64_t q_begin = (chunk - b * blocks) * MSDA_FORWARD_QUERY_BLOCK;
        int64_t q_end = (chunk_end - b * blocks) * MSDA_FORWARD_QUERY_BLOCK;
        if (q_end > Q) q_end = Q;
        const int n = (int)(q_end - q_begin);
        query_order(p, t->sampling_locations, b, q_begin, n, order);
        for (int i = 0; i < n; i++) forward_query_heads(p, t, &gc, &tp, b, q_begin + order[i], blocks, begin, end);
        chunk = chunk_end;
    }
}

/* ---- backward ----
 * Per sample: d_k = <G, V(c_k)> and grad_value(c_k) += a w_k G for the corners inside, in one
 * pass over the channels. M, a constant after inlining, says which corners are inside: inside
 * corners are always the product of the inside columns and rows, so nine cases cover all.
 * CANON makes NaN sums canonical. Only a sample whose terms a w_k G may be non-finite needs it:
 * finite terms added to anything never make a new NaN (Inf - Inf needs an infinite term), and a
 * canonical NaN stays canonical through additions. */
MSDA_INLINE void backward_corners(const float *restrict g, const float *restrict value, float *restrict grad_value,
                                  ptrdiff_t o, ptrdiff_t px, ptrdiff_t row, const float aw[4], ptrdiff_t C, float d[4],
                                  const unsigned M, const int CANON)
{
    /* corner pointers from scalars, each kept in a general register: the wide builds' compilers
     * otherwise put the four offsets through memory and read them back as one vector, a
     * store-forwarding stall per sample (a third of the AVX2 backward's time) */
    const ptrdiff_t off[4] = {o, o + px, o + row, o + row + px};
    const float *v[4] = {0};
    float *gv[4] = {0};
    vb w[4];
    v4 s[4];
    for (int k = 0; k < 4; k++) {
        w[k] = vb_splat(aw[k]);
        s[k] = v4_zero();
        if (M >> k & 1u) {
            v[k] = value + off[k];
            gv[k] = grad_value + off[k];
            MSDA_SCALAR_REG(v[k]);
            MSDA_SCALAR_REG(gv[k]);
        }
    }
    const ptrdiff_t CB = C & ~(ptrdiff_t)(MSDA_VB - 1);
    ptrdiff_t c = 0;
    for (; c < CB; c += MSDA_VB) {
        const vb gc = vb_load(g + c);
        for (int k = 0; k < 4; k++) {
            if (!(M >> k & 1u)) continue;
            s[k] = vb_dot_step(s[k], gc, vb_load(v[k] + c));
            const vb sum = vb_madd(vb_load(gv[k] + c), w[k], gc);
            vb_store(gv[k] + c, CANON ? vb_canonical(sum) : sum);
        }
    }
    if (MSDA_VB > 4 && C - c >= 4) {   /* four more channels */
        const v4 gc = v4_load(g + c);
        for (int k = 0; k < 4; k++) {
            if (!(M >> k & 1u)) continue;
            s[k] = v4_madd(s[k], gc, v4_load(v[k] + c));
            const v4 sum = v4_madd(v4_load(gv[k] + c), v4_splat(aw[k]), gc);
            v4_store(gv[k] + c, CANON ? v4_canonical(sum) : sum);
        }
        c += 4;
    }
    for (int k = 0; k < 4; k++) d[k] = (M >> k & 1u) ? v4_sum(s[k]) : 0.0f;
    for (; c < C; c++)
        for (int k = 0; k < 4; k++) {
            if (!(M >> k & 1u)) continue;
            d[k] += g[c] * v[k][c];
            const float sum = gv[k][c] + aw[k] * g[c];
            gv[k][c] = CANON ? f_canonical(sum) : sum;
        }
}

/* The nine corner cases, each with a C = 32 version whose channel loop unrolls fully. */
#define MSDA_BACKWARD_CASES(CH, CANON)                                                                  \
    switch (mask) {                                                                                \
    case 15: backward_corners(g, value, grad_value, o, px, row, aw, CH, d, 15, CANON); break;                   \
    case 3: backward_corners(g, value, grad_value, o, px, row, aw, CH, d, 3, CANON); break;                     \
    case 12: backward_corners(g, value, grad_value, o, px, row, aw, CH, d, 12, CANON); break;                   \
    case 5: backward_corners(g, value, grad_value, o, px, row, aw, CH, d, 5, CANON); break;                     \
    case 10: backward_corners(g, value, grad_value, o, px, row, aw, CH, d, 10, CANON); break;                   \
    case 1: backward_corners(g, value, grad_value, o, px, row, aw, CH, d, 1, CANON); break;                     \
    case 2: backward_corners(g, value, grad_value, o, px, row, aw, CH, d, 2, CANON); break;                     \
    case 4: backward_corners(g, value, grad_value, o, px, row, aw, CH, d, 4, CANON); break;                     \
    case 8: backward_corners(g, value, grad_value, o, px, row, aw, CH, d, 8, CANON); break;                     \
    default: d[0] = d[1] = d[2] = d[3] = 0.0f; break;   /* dropped sample (mask 0) */             \
    }

MSDA_INLINE void backward_sample(const float *restrict g, const float *restrict value, float *restrict grad_value,
                                 ptrdiff_t o, ptrdiff_t px, ptrdiff_t row, const float aw[4], ptrdiff_t C, float d[4],
                                 unsigned mask)
{
    if (C == 32) MSDA_BACKWARD_CASES(32, 0)
    else MSDA_BACKWARD_CASES(C, 0)
}

/* A sample for a unit that owns part of a head (a pixel range, a query slice): dot products
 * for the corners in D, grad_value updates for those in U, each with exactly the operations
 * of backward_corners, so the bits are those of the whole head's unit. */
__attribute__((noinline)) static void backward_sample_split(const float *restrict g, const float *restrict value,
                                                            float *restrict grad_value, ptrdiff_t o, ptrdiff_t px,
                                                            ptrdiff_t row, const float aw[4], ptrdiff_t C, float d[4],
                                                            unsigned D, unsigned U, int canon)
{
    const ptrdiff_t off[4] = {o, o + px, o + row, o + row + px};
    v4 s[4];
    for (int k = 0; k < 4; k++) s[k] = v4_zero();
    const ptrdiff_t CB = C & ~(ptrdiff_t)(MSDA_VB - 1);
    ptrdiff_t c = 0;
    for (; c < CB; c += MSDA_VB) {
        const vb gc = vb_load(g + c);
        for (int k = 0; k < 4; k++) {
            if (D >> k & 1u) s[k] = vb_dot_step(s[k], gc, vb_load(value + off[k] + c));
            if (U >> k & 1u) {
                const vb sum = vb_madd(vb_load(grad_value + off[k] + c), vb_splat(aw[k]), gc);
                vb_store(grad_value + off[k] + c, canon ? vb_canonical(sum) : sum);
            }
        }
    }
    if (MSDA_VB > 4 && C - c >= 4) {
        const v4 gc = v4_load(g + c);
        for (int k = 0; k < 4; k++) {
            if (D >> k & 1u) s[k] = v4_madd(s[k], gc, v4_load(value + off[k] + c));
            if (U >> k & 1u) {
                const v4 sum = v4_madd(v4_load(grad_value + off[k] + c), v4_splat(aw[k]), gc);
                v4_store(grad_value + off[k] + c, canon ? v4_canonical(sum) : sum);
            }
        }
        c += 4;
    }
    for (int k = 0; k < 4; k++) d[k] = (D >> k & 1u) ? v4_sum(s[k]) : 0.0f;
    for (; c < C; c++)
        for (int k = 0; k < 4; k++) {
            if (D >> k & 1u) d[k] += g[c] * value[off[k] + c];
            if (U >> k & 1u) {
                const float sum = grad_value[off[k] + c] + aw[k] * g[c];
                grad_value[off[k] + c] = canon ? f_canonical(sum) : sum;
            }
        }
}

/* The part of a head a backward unit owns when heads are split (NULL: the whole head): grad_value
 * of pixels [pixel_begin, pixel_end), the location and weight gradients of queries
 * [query_begin, query_end). */
typedef struct head_part {
    int64_t pixel_begin, pixel_end, query_begin, query_end;
} head_part;

/* The samples of a point group off the common path, out of line: a part of a head (only the
 * corners whose pixel is the part's get grad_value terms, only the part's queries dot
 * products), or samples whose terms may be non-finite (their grad_value sums made canonical).
 * The same operations as backward_corners, so the same bits. */
__attribute__((noinline)) static void backward_points_slow(const float *go, const float *value_level,
                                                           float *grad_value_level, const level_geom *g,
                                                           const point_group *pg, float aw[4][4], const int32_t finite[4],
                                                           int count, ptrdiff_t C, const head_part *part, int owner,
                                                           float d[4][4])
{
    const ptrdiff_t ps = g->pixel_stride, rs = g->row_stride;
    for (int i = 0; i < count; i++) {
        const unsigned m = pg->mask[i];
        unsigned U = m;
        if (part) {
            const ptrdiff_t e = g->start + pg->offset[i];
            const ptrdiff_t lo = (ptrdiff_t)part->pixel_begin * ps, hi = (ptrdiff_t)part->pixel_end * ps;
            const ptrdiff_t ek[4] = {e, e + ps, e + rs, e + rs + ps};
            U = 0u;
            for (int k = 0; k < 4; k++) U |= (unsigned)(ek[k] >= lo && ek[k] < hi) << k;
            U &= m;
        }
        const unsigned D = owner ? m : 0u;
        const float awi[4] = {aw[0][i], aw[1][i], aw[2][i], aw[3][i]};
        float di[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (D | U)
            backward_sample_split(go, value_level, grad_value_level, pg->offset[i], ps, rs, awi, C, di,
                                  D, U, !finite[i]);
        for (int k = 0; k < 4; k++) d[k][i] = di[k];
    }
}

/* grad_sampling_locations and grad_attention_weights of (b, q, h), and its grad_value terms.
 * Instantiated twice (SPLIT a constant): for whole heads, where none of the part logic is
 * compiled in, and for parts of heads. */
MSDA_INLINE void backward_query_impl(const msda_plan *p, const msda_tensors *t, geom_cache *gc, int64_t b, int64_t q,
                                     int64_t h, const head_part *part, const int SPLIT)
{
    const int owner = !SPLIT || (q >= part->query_begin && q < part->query_end);
    const int64_t Q = p->num_queries, H = p->num_heads, NL = p->num_levels, P = p->num_points;
    const ptrdiff_t C = (ptrdiff_t)p->channels, xy = (ptrdiff_t)p->loc_stride_xy,
                    point_stride = (ptrdiff_t)p->loc_stride_point;
    const int64_t head_offset = b * p->value_stride_batch + h * p->value_stride_head;
    const float *value_bh = t->value + head_offset;
    float *grad_value_bh = t->grad_value + head_offset;
    const float *go = t->grad_output + ((b * Q + q) * H + h) * C;
    const int64_t loc_qh = b * p->loc_stride_batch + q * p->loc_stride_query + h * p->loc_stride_head;
    /* g_sum >= every |G_c| (NaN or Inf if G is not finite): a sample whose |a| * g_sum is finite
     * has only finite terms a w_k G_c (|a w_k| <= |a|, and rounding is monotone) */
    v4 g_abs = v4_zero();
    ptrdiff_t c4 = 0;
    for (; c4 + 4 <= C; c4 += 4) g_abs = v4_add(g_abs, v4_abs(v4_load(go + c4)));
    float g_sum = v4_sum(g_abs);
    for (; c4 < C; c4++) g_sum += fabsf(go[c4]);
    const v4 g_bound = v4_splat(g_sum), infinity = v4_splat(INFINITY);
    for (int64_t l = 0; l < NL; l++) {
        const level_geom *g = geom_of(gc, p, l);
        const float *value_level = value_bh + g->start;
        float *grad_value_level = grad_value_bh + g->start;
        for (int64_t pt = 0; pt < P; pt += 4) {
            const int count = P - pt < 4 ? (int)(P - pt) : 4;
            const int64_t weight_index = (((b * Q + q) * H + h) * NL + l) * P + pt;
            const int64_t loc_index = loc_qh + l * p->loc_stride_level + pt * point_stride;
            v4 x, y;
            load_points(t->sampling_locations + loc_index, point_stride, xy, count, &x, &y);
            point_group pg;
            group_corners(x, y, g, &pg);
            const v4 a = load_partial(t->attention_weights + weight_index, count);
            float aw[4][4], d[4][4] = {{0.0f}};   /* [corner][point] */
            for (int k = 0; k < 4; k++) v4_store(aw[k], v4_mul(a, pg.weight[k]));
            /* one test a group; lanes with possibly non-finite terms are rare */
            const v4i finite_lanes = v4_lt(v4_mul(v4_abs(a), g_bound), infinity);
            const int all_finite = !v4i_any(v4i_xor(finite_lanes, v4i_splat(-1)));
            int32_t finite[4];
            v4i_store(finite, finite_lanes);
            if (!SPLIT && all_finite) {
                for (int i = 0; i < count; i++) {
                    const float awi[4] = {aw[0][i], aw[1][i], aw[2][i], aw[3][i]};
                    float di[4];
                    backward_sample(go, value_level, grad_value_level, pg.offset[i], g->pixel_stride, g->row_stride,
                                    awi, C, di, pg.mask[i]);
                    for (int k = 0; k < 4; k++) d[k][i] = di[k];
                }
            } else {
                backward_points_slow(go, value_level, grad_value_level, g, &pg, aw, finite, count, C, part, owner, d);
            }
            const v4 d0 = v4_load(d[0]), d1 = v4_load(d[1]), d2 = v4_load(d[2]), d3 = v4_load(d[3]);
            const v4 fx = pg.fx, fy = pg.fy, zero = v4_zero();
            const v4 ga = v4_add(v4_add(v4_add(v4_mul(pg.weight[0], d0), v4_mul(pg.weight[1], d1)),
                                        v4_mul(pg.weight[2], d2)),
                                 v4_mul(pg.weight[3], d3));
            const v4 gx = v4_mul(v4_mul(a, v4_add(v4_mul(one_minus(fy), v4_sub(d1, d0)),
                                                  v4_mul(fy, v4_sub(d3, d2)))),
                                 pg.grad_scale_x);
            const v4 gy = v4_mul(v4_mul(a, v4_add(v4_mul(one_minus(fx), v4_sub(d2, d0)),
                                                  v4_mul(fx, v4_sub(d3, d1)))),
                                 pg.grad_scale_y);
            float ga_s[4], gx_s[4], gy_s[4];
            v4 ga_l = v4_select(pg.live, ga, zero), gx_l = v4_select(pg.live, gx, zero), gy_l = v4_select(pg.live, gy, zero);
            if (v4i_any(v4i_xor(v4i_and(v4i_and(v4_eq(ga_l, ga_l), v4_eq(gx_l, gx_l)), v4_eq(gy_l, gy_l)), v4i_splat(-1)))) {
                ga_l = v4_canonical(ga_l);
                gx_l = v4_canonical(gx_l);
                gy_l = v4_canonical(gy_l);
            }
            v4_store(ga_s, ga_l);
            v4_store(gx_s, gx_l);
            v4_store(gy_s, gy_l);
            float *grad_loc = t->grad_sampling_locations + loc_index;
            for (int i = 0; i < count && owner; i++) {
                t->grad_attention_weights[weight_index + i] = ga_s[i];
                grad_loc[i * point_stride] = gx_s[i];
                grad_loc[i * point_stride + xy] = gy_s[i];
            }
        }
    }
}

static void backward_query(const msda_plan *p, const msda_tensors *t, geom_cache *gc, int64_t b, int64_t q, int64_t h)
{
    backward_query_impl(p, t, gc, b, q, h, NULL, 0);
}

static void backward_query_part(const msda_plan *p, const msda_tensors *t, geom_cache *gc, int64_t b, int64_t q,
                                int64_t h, const head_part *part)
{
    backward_query_impl(p, t, gc, b, q, h, part, 1);
}

/* The backward's banded walk (see banded_walk) over heads [h_begin, h_end) of batch b. */
static void backward_banded(const msda_plan *p, const msda_tensors *t, geom_cache *gc, int64_t b, int64_t h_begin,
                            int64_t h_end, const band_grid *bg, const head_part *part)
{
    for (int64_t k = 0; k < bg->bands; k++)
        for (int64_t j = 0; j < bg->cols; j++)
            for (int64_t l = 0; l < p->num_levels; l++) {
                band_cell cell;
                band_cell_of(p, bg, k, j, l, &cell);
                for (int64_t x = cell.x0; x < cell.x1; x++)
                    for (int64_t y = cell.y0; y < cell.y1; y++)
                        for (int64_t h = h_begin; h < h_end; h++)
                            if (part) backward_query_part(p, t, gc, b, cell.start + y * cell.width + x, h, part);
                            else backward_query(p, t, gc, b, cell.start + y * cell.width + x, h);
            }
}

/* Units (batch, head, part) when heads are split (plan->backward_split parts a head, for more
 * threads than heads): part r of R owns pixels [r L / R, (r + 1) L / R) of the head's grad_value
 * and queries [r Q / R, (r + 1) Q / R) for the location and weight gradients, and walks every
 * query of the head in the usual order, doing only its own share. Every grad_value element
 * still receives its terms in that order from one writer, and every dot product is the same,
 * so the bits are those of the unsplit head, whatever R. */
static void backward_range_split(const msda_plan *p, const msda_tensors *t, geom_cache *gc, int64_t begin, int64_t end)
{
    const int64_t H = p->num_heads, R = p->backward_split, L = p->value_length, Q = p->num_queries, C = p->channels;
    band_grid bg;
    const int banded = banded_walk(p, MSDA_BACKWARD_STRIP, &bg);
    for (int64_t u = begin; u < end; u++) {
        const int64_t b = u / (H * R), h = u / R % H, r = u % R;
        const head_part part = {L * r / R, L * (r + 1) / R, Q * r / R, Q * (r + 1) / R};
        float *base = t->grad_value + b * p->value_stride_batch + h * p->value_stride_head;
        for (int64_t pixel = part.pixel_begin; pixel < part.pixel_end; pixel++)
            memset(base + pixel * p->value_stride_pixel, 0, (size_t)C * sizeof(float));
        if (banded) {
            backward_banded(p, t, gc, b, h, h + 1, &bg, &part);
            continue;
        }
        for (int64_t q = 0; q < Q; q++) backward_query_part(p, t, gc, b, q, h, &part);
    }
}

void MSDA_KFN(msda__backward_range)(const msda_plan *p, const msda_tensors *t, int64_t begin, int64_t end);
void MSDA_KFN(msda__backward_range)(const msda_plan *p, const msda_tensors *t, int64_t begin, int64_t end)
{
    const int64_t Q = p->num_queries, H = p->num_heads;
    geom_cache gc;
    geom_cache_init(&gc, p);
    if (p->backward_split > 1) {
        backward_range_split(p, t, &gc, begin, end);
        return;
    }
    /* Zero the range's grad_value slices in as few runs as the layout allows: a whole batch slice
     * (BLNC, all heads), the range's heads of a pixel (BLNC), a head's pixels (BNLC). */
    const int64_t C = p->channels;
    for (int64_t b = begin / H; b * H < end; b++) {
        const int64_t h0 = b * H > begin ? 0 : begin - b * H, h1 = (b + 1) * H < end ? H : end - b * H;
        float *base = t->grad_value + b * p->value_stride_batch;
        if (p->value_stride_head == C && p->value_stride_pixel == H * C && h0 == 0 && h1 == H) {
            memset(base, 0, (size_t)(p->value_length * H * C) * sizeof(float));
        } else if (p->value_stride_head == C) {
            for (int64_t pixel = 0; pixel < p->value_length; pixel++)
                memset(base + pixel * p->value_stride_pixel + h0 * C, 0, (size_t)((h1 - h0) * C) * sizeof(float));
        } else if (p->value_stride_pixel == C) {   /* BNLC: a head's pixels are one run */
            for (int64_t h = h0; h < h1; h++)
                memset(base + h * p->value_stride_head, 0, (size_t)(p->value_length * C) * sizeof(float));
        } else {
            for (int64_t h = h0; h < h1; h++)
                for (int64_t pixel = 0; pixel < p->value_length; pixel++)
                    memset(base + h * p->value_stride_head + pixel * p->value_stride_pixel, 0, (size_t)C * sizeof(float));
        }
    }
    band_grid bg;
    const int banded = banded_walk(p, MSDA_BACKWARD_STRIP, &bg);
    /* The units (heads) of one batch run side by side, query by query in a fixed order that
     * depends only on the problem's shape (backward_banded, else index order): each head's grad_value sums over
     * queries in that order, and all heads' rows of a pixel are used together. (Not the
     * forward's data-dependent walking order: that would make one sample's terms depend on where
     * the other samples are, e.g. a NaN sample would not equal a weight-0 one bit for bit.) */
    for (int64_t b = begin / H; b * H < end; b++) {
        const int64_t h_begin = b * H > begin ? 0 : begin - b * H;
        const int64_t h_end = (b + 1) * H < end ? H : end - b * H;
        if (banded) {
            backward_banded(p, t, &gc, b, h_begin, h_end, &bg, NULL);
            continue;
        }
        for (int64_t q = 0; q < Q; q++)
            for (int64_t h = h_begin; h < h_end; h++) backward_query(p, t, &gc, b, q, h);
    }
}

/* ---- the ISA, chosen once ----
 * AVX2 if this CPU has it, else AVX-512 if it has that, else the baseline (cpuid, through the
 * compiler's builtin), unless MSDA_ISA names one.
 * Every ISA gives the same bits (simd.h), so the choice is only about speed. */
#ifdef MSDA_KERNEL_BASE

#include <stdatomic.h>
#include <stdlib.h>

typedef void (*msda_range_fn)(const msda_plan *, const msda_tensors *, int64_t, int64_t);
typedef struct msda_isa_entry {
    const char *name;
    msda_range_fn forward, backward;
} msda_isa_entry;

#define MSDA_DECLARE_ISA(isa)                                                                               \
    void msda__forward_range_##isa(const msda_plan *p, const msda_tensors *t, int64_t begin, int64_t end);  \
    void msda__backward_range_##isa(const msda_plan *p, const msda_tensors *t, int64_t begin, int64_t end);
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__EMSCRIPTEN__) && !defined(MSDA_NO_SIMD)
#define MSDA_X86 1
#define MSDA_SCALAR_TOO 1
#define MSDA_BASE_NAME "sse2"
MSDA_DECLARE_ISA(scalar)
MSDA_DECLARE_ISA(avx2)
MSDA_DECLARE_ISA(avx512)
#elif defined(__EMSCRIPTEN__)
#define MSDA_BASE_NAME (MSDA_SIMD ? "wasm-simd" : "wasm-scalar")
#elif MSDA_SIMD && defined(__ARM_NEON)
#define MSDA_BASE_NAME "neon"
#if defined(__aarch64__)   /* kernel_scalar.c: MSDA_ISA=scalar, as on x86 */
#define MSDA_SCALAR_TOO 1
MSDA_DECLARE_ISA(scalar)
#endif
#else
#define MSDA_BASE_NAME "scalar"
#endif

static const msda_isa_entry msda_isas[] = {
#ifdef MSDA_SCALAR_TOO
    {"scalar", msda__forward_range_scalar, msda__backward_range_scalar},
#endif
    {MSDA_BASE_NAME, msda__forward_range_base, msda__backward_range_base},
#ifdef MSDA_X86
    {"avx2", msda__forward_range_avx2, msda__backward_range_avx2},
    {"avx512", msda__forward_range_avx512, msda__backward_range_avx512},
#endif
};
#define MSDA_ISA_COUNT ((int)(sizeof msda_isas / sizeof msda_isas[0]))
#ifdef MSDA_SCALAR_TOO
#define MSDA_ISA_BASE 1
#else
#define MSDA_ISA_BASE 0
#endif

static int isa_available(int i)
{
#ifdef MSDA_X86
    __builtin_cpu_init();
    if (strcmp(msda_isas[i].name, "avx2") == 0) return __builtin_cpu_supports("avx2") != 0;
    if (strcmp(msda_isas[i].name, "avx512") == 0) return __builtin_cpu_supports("avx512f") != 0;
#endif
    return i >= 0 && i < MSDA_ISA_COUNT;
}

/* MSDA_ISA; WebAssembly has one ISA a module, and getenv would import WASI */
static const char *isa_env(void)
{
#ifdef __EMSCRIPTEN__
    return NULL;
#else
    return getenv("MSDA_ISA");
#endif
}

/* -2: not chosen yet; -1: MSDA_ISA names nothing this CPU has */
static _Atomic int msda_isa_index = -2;

static int isa_choose(void)
{
    int i = atomic_load_explicit(&msda_isa_index, memory_order_relaxed);
    if (i != -2) return i;
    const char *want = isa_env();
    if (want && *want) {
        i = -1;
        for (int k = 0; k < MSDA_ISA_COUNT; k++)
            if (strcmp(want, msda_isas[k].name) == 0 && isa_available(k)) i = k;
    } else {   /* AVX2 where the CPU has it: AVX-512 measured slower here (README, Benchmark) */
        i = MSDA_ISA_BASE;
        if (MSDA_ISA_BASE + 1 < MSDA_ISA_COUNT && isa_available(MSDA_ISA_BASE + 1)) i = MSDA_ISA_BASE + 1;
        else if (MSDA_ISA_BASE + 2 < MSDA_ISA_COUNT && isa_available(MSDA_ISA_BASE + 2)) i = MSDA_ISA_BASE + 2;
    }
    atomic_store_explicit(&msda_isa_index, i, memory_order_relaxed);
    return i;
}

const char *msda_isa(void)
{
    const int i = isa_choose();
    return i >= 0 ? msda_isas[i].name : NULL;
}

const char *msda_isa_list(void)
{
#ifdef MSDA_X86
    static const char *const lists[4] = {"scalar sse2", "scalar sse2 avx2", "scalar sse2 avx512", "scalar sse2 avx2 avx512"};
    return lists[isa_available(2) + 2 * isa_available(3)];
#elif defined(MSDA_SCALAR_TOO)
    return "scalar " MSDA_BASE_NAME;
#else
    return MSDA_BASE_NAME;
#endif
}

int msda__set_isa(const char *name)
{
    for (int k = 0; k < MSDA_ISA_COUNT; k++)
        if (name && strcmp(name, msda_isas[k].name) == 0 && isa_available(k)) {
            atomic_store(&msda_isa_index, k);
            return 1;
        }
    return 0;
}

msda_status msda__isa_check(msda_error *err)
{
    if (isa_choose() >= 0) return MSDA_OK;
    msda__set_error(err, MSDA_ERR_INVALID_OPTION, "MSDA_ISA is '%.16s', expected one of this CPU's: %s (or unset)",
                    isa_env() ? isa_env() : "", msda_isa_list());
    return MSDA_ERR_INVALID_OPTION;
}

void msda__forward_range(const msda_plan *p, const msda_tensors *t, int64_t begin, int64_t end)
{
    const int i = isa_choose();
    msda_isas[i >= 0 ? i : MSDA_ISA_BASE].forward(p, t, begin, end);
}

void msda__backward_range(const msda_plan *p, const msda_tensors *t, int64_t begin, int64_t end)
{
    const int i = isa_choose();
    msda_isas[i >= 0 ? i : MSDA_ISA_BASE].backward(p, t, begin, end);
}

#endif
