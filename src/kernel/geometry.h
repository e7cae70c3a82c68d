/* Geometry, written once for both passes: per-level constants, and the bilinear corners, weights
 * and in-bounds masks of up to four points at a time (points as vector lanes). Part of the
 * per-ISA kernel copy (kernels.h); uses simd.h only. */

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
    msda_padding padding;
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
    g->padding = p->padding;
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

/* Maps normalised coordinates to pixel space along one axis, four lanes at a time, under the
 * padding mode (a switch without default: -Wswitch names every place a new mode must be handled).
 * `ok` comes back -1 where a corner along this axis can be in bounds. Lanes are set to 0
 * before conversion unless known finite and in [-1, size), so no conversion is undefined. */
MSDA_INLINE void axis4(v4 coord, const axis_geom *a, msda_padding padding, v4i *index0, v4 *frac, v4 *grad_scale,
                       v4i *ok)
{
    const v4 zero = v4_zero();
    v4 pos = a->degenerate ? zero : v4_sub(v4_mul(coord, v4_splat(a->scale)), v4_splat(a->shift));
    v4i valid = v4_eq(coord, coord);   /* not NaN */
    v4 gs = v4_splat(a->scale);
    switch (padding) {
    case MSDA_PADDING_BORDER: {
        const v4 last = v4_splat(a->last);
        const v4i inside = v4i_and(v4_gt(pos, zero), v4_lt(pos, last));
        gs = v4_select(inside, gs, zero);
        pos = v4_select(inside, pos, v4_select(v4_le(pos, zero), zero, last));
        break;
    }
    case MSDA_PADDING_ZEROS:
        valid = v4i_and(valid, v4i_and(v4_ge(pos, v4_splat(-1.0f)), v4_lt(pos, v4_splat(a->size))));
        break;
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
static inline int axis1(float coord, const axis_geom *a, msda_padding padding, ptrdiff_t *index0, float *frac,
                        float *grad_scale)
{
    if (isnan(coord)) return 0;
    const double size = (double)a->size_i, last = (double)(a->size_i - 1);
    double pos = a->degenerate ? 0.0 : (double)coord * (double)a->scale_i - (double)a->shift;   /* 0 * inf would be NaN */
    *grad_scale = a->scale;
    switch (padding) {
    case MSDA_PADDING_BORDER:
        if (!(pos > 0.0 && pos < last)) {
            *grad_scale = 0.0f;
            pos = pos <= 0.0 ? 0.0 : last;
        }
        break;
    case MSDA_PADDING_ZEROS:
        if (!(pos >= -1.0 && pos < size)) return 0;
        break;
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
        axis4(x, &g->x, g->padding, &ix, &pg->fx, &pg->grad_scale_x, &okx);
        axis4(y, &g->y, g->padding, &iy, &pg->fy, &pg->grad_scale_y, &oky);
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
            const int ok = axis1(v4_lane(x, i), &g->x, g->padding, &x0, &fx[i], &gx[i]) &&
                           axis1(v4_lane(y, i), &g->y, g->padding, &y0, &fy[i], &gy[i]);
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
