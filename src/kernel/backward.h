/* The backward pass: per sample, the corners' dot products with grad_output and their grad_value
 * terms in one pass over the channels, and msda__backward_range_<isa> over a range of units
 * ((batch, level, head)). Part of the per-ISA kernel copy (kernels.h), after
 * geometry.h and walks.h. */
/* ---- backward ----
 * Per sample: d_k = <G, V(c_k)> and grad_value(c_k) += a w_k G for the corners inside, in one
 * pass over the channels. M, a constant after inlining, says which corners are inside: inside
 * corners are always the product of the inside columns and rows, so nine cases cover all.
 * CANON makes NaN sums canonical. Only a sample whose terms a w_k G may be non-finite needs it:
 * finite terms added to anything never make a new NaN (Inf - Inf needs an infinite term), and a
 * canonical NaN stays canonical through additions. */
MSDA_INLINE void backward_corners(const float *restrict g, const char *restrict value, float *restrict grad_value,
                                  ptrdiff_t o, ptrdiff_t px, ptrdiff_t row, const float aw[4], ptrdiff_t C, float d[4],
                                  const unsigned M, const int CANON, const int VT)
{
    /* corner pointers from scalars, each kept in a general register: the wide builds' compilers
     * otherwise put the four offsets through memory and read them back as one vector, a
     * store-forwarding stall per sample (a third of the AVX2 backward's time) */
    const ptrdiff_t off[4] = {o, o + px, o + row, o + row + px};
    const char *v[4] = {0};
    float *gv[4] = {0};
    vb w[4];
    v4 s[4];
    for (int k = 0; k < 4; k++) {
        w[k] = vb_splat(aw[k]);
        s[k] = v4_zero();
        if (M >> k & 1u) {
            v[k] = value + off[k] * MSDA_ELEM_BYTES(VT);
            gv[k] = grad_value + off[k];
            MSDA_SCALAR_REG(v[k]);
            MSDA_SCALAR_REG(gv[k]);
        }
    }
    const ptrdiff_t CB = C & ~(ptrdiff_t)(MSDA_VB - 1);
    ptrdiff_t c = 0;
#if MSDA_VB == 4
    /* bfloat16 rows eight channels a load (simd.h, v4_load2_as); each corner's sums and updates
     * keep their order, so the bits are the same */
    for (; VT == MSDA_BFLOAT16 && c + 8 <= CB; c += 8) {
        const v4 g0 = v4_load(g + c), g1 = v4_load(g + c + 4);
        for (int k = 0; k < 4; k++) {
            if (!(M >> k & 1u)) continue;
            v4 lo, hi;
            v4_load2_as(v[k], c, VT, &lo, &hi);
            s[k] = vb_dot_step(s[k], g0, lo);
            const v4 sum0 = v4_madd(v4_load(gv[k] + c), w[k], g0);
            v4_store(gv[k] + c, CANON ? v4_canonical(sum0) : sum0);
            s[k] = vb_dot_step(s[k], g1, hi);
            const v4 sum1 = v4_madd(v4_load(gv[k] + c + 4), w[k], g1);
            v4_store(gv[k] + c + 4, CANON ? v4_canonical(sum1) : sum1);
        }
    }
#endif
    for (; c < CB; c += MSDA_VB) {
        const vb gc = vb_load(g + c);
        for (int k = 0; k < 4; k++) {
            if (!(M >> k & 1u)) continue;
            s[k] = vb_dot_step(s[k], gc, vb_load_as(v[k], c, VT));
            const vb sum = vb_madd(vb_load(gv[k] + c), w[k], gc);
            vb_store(gv[k] + c, CANON ? vb_canonical(sum) : sum);
        }
    }
    if (MSDA_VB > 4 && C - c >= 4) {   /* four more channels */
        const v4 gc = v4_load(g + c);
        for (int k = 0; k < 4; k++) {
            if (!(M >> k & 1u)) continue;
            s[k] = v4_madd(s[k], gc, v4_load_as(v[k], c, VT));
            const v4 sum = v4_madd(v4_load(gv[k] + c), v4_splat(aw[k]), gc);
            v4_store(gv[k] + c, CANON ? v4_canonical(sum) : sum);
        }
        c += 4;
    }
    for (int k = 0; k < 4; k++) d[k] = (M >> k & 1u) ? v4_sum(s[k]) : 0.0f;
    for (; c < C; c++)
        for (int k = 0; k < 4; k++) {
            if (!(M >> k & 1u)) continue;
            d[k] += g[c] * f_load_as(v[k], c, VT);
            const float sum = gv[k][c] + aw[k] * g[c];
            gv[k][c] = CANON ? f_canonical(sum) : sum;
        }
}

/* The nine corner cases, each with a C = 32 version whose channel loop unrolls fully. */
#define MSDA_BACKWARD_CASES(CH, CANON, VT)                                                                  \
    switch (mask) {                                                                                \
    case 15: backward_corners(g, value, grad_value, o, px, row, aw, CH, d, 15, CANON, VT); break;                   \
    case 3: backward_corners(g, value, grad_value, o, px, row, aw, CH, d, 3, CANON, VT); break;                     \
    case 12: backward_corners(g, value, grad_value, o, px, row, aw, CH, d, 12, CANON, VT); break;                   \
    case 5: backward_corners(g, value, grad_value, o, px, row, aw, CH, d, 5, CANON, VT); break;                     \
    case 10: backward_corners(g, value, grad_value, o, px, row, aw, CH, d, 10, CANON, VT); break;                   \
    case 1: backward_corners(g, value, grad_value, o, px, row, aw, CH, d, 1, CANON, VT); break;                     \
    case 2: backward_corners(g, value, grad_value, o, px, row, aw, CH, d, 2, CANON, VT); break;                     \
    case 4: backward_corners(g, value, grad_value, o, px, row, aw, CH, d, 4, CANON, VT); break;                     \
    case 8: backward_corners(g, value, grad_value, o, px, row, aw, CH, d, 8, CANON, VT); break;                     \
    default: d[0] = d[1] = d[2] = d[3] = 0.0f; break;   /* dropped sample (mask 0) */             \
    }

MSDA_INLINE void backward_sample(const float *restrict g, const char *restrict value, float *restrict grad_value,
                                 ptrdiff_t o, ptrdiff_t px, ptrdiff_t row, const float aw[4], ptrdiff_t C, float d[4],
                                 unsigned mask, const int VT)
{
    /* half rows too: on the general loop wasm SIMD's bfloat16 encoder backward cost 1.13-1.42x its
     * float32 call, 0.95-1.04x unrolled (kernel_bench --value-dtype bfloat16) */
    if (C == 32) MSDA_BACKWARD_CASES(32, 0, VT)
    else MSDA_BACKWARD_CASES(C, 0, VT)
}

/* A sample off the common path (backward_points_slow): the corners in M, each with exactly the
 * operations of backward_corners, so the same bits, with the value's element kind and the NaN
 * canonicalisation as run-time arguments. */
__attribute__((noinline)) static void backward_sample_generic(const float *restrict g, const char *restrict value,
                                                              float *restrict grad_value, ptrdiff_t o, ptrdiff_t px,
                                                              ptrdiff_t row, const float aw[4], ptrdiff_t C, float d[4],
                                                              unsigned M, int canon, int vt)
{
    const ptrdiff_t off[4] = {o, o + px, o + row, o + row + px};
    v4 s[4];
    for (int k = 0; k < 4; k++) s[k] = v4_zero();
    const ptrdiff_t CB = C & ~(ptrdiff_t)(MSDA_VB - 1);
    ptrdiff_t c = 0;
    for (; c < CB; c += MSDA_VB) {
        const vb gc = vb_load(g + c);
        for (int k = 0; k < 4; k++) {
            if (!(M >> k & 1u)) continue;
            s[k] = vb_dot_step(s[k], gc, vb_load_as(value, off[k] + c, vt));
            const vb sum = vb_madd(vb_load(grad_value + off[k] + c), vb_splat(aw[k]), gc);
            vb_store(grad_value + off[k] + c, canon ? vb_canonical(sum) : sum);
        }
    }
    if (MSDA_VB > 4 && C - c >= 4) {
        const v4 gc = v4_load(g + c);
        for (int k = 0; k < 4; k++) {
            if (!(M >> k & 1u)) continue;
            s[k] = v4_madd(s[k], gc, v4_load_as(value, off[k] + c, vt));
            const v4 sum = v4_madd(v4_load(grad_value + off[k] + c), v4_splat(aw[k]), gc);
            v4_store(grad_value + off[k] + c, canon ? v4_canonical(sum) : sum);
        }
        c += 4;
    }
    for (int k = 0; k < 4; k++) d[k] = (M >> k & 1u) ? v4_sum(s[k]) : 0.0f;
    for (; c < C; c++)
        for (int k = 0; k < 4; k++) {
            if (!(M >> k & 1u)) continue;
            d[k] += g[c] * f_load_as(value, off[k] + c, vt);
            const float sum = grad_value[off[k] + c] + aw[k] * g[c];
            grad_value[off[k] + c] = canon ? f_canonical(sum) : sum;
        }
}

/* The samples of a point group off the common path, out of line: value rows this build has no
 * fast copy for (kernels.h, MSDA_FAST_*), or samples whose terms may be non-finite (their
 * grad_value sums made canonical). The same operations as backward_corners, so the same bits. */
__attribute__((noinline)) static void backward_points_slow(const float *go, const char *value_level,
                                                           float *grad_value_level, const level_geom *g,
                                                           const point_group *pg, float aw[4][4], const int32_t finite[4],
                                                           int count, ptrdiff_t C, float d[4][4], int vt)
{
    for (int i = 0; i < count; i++) {
        const float awi[4] = {aw[0][i], aw[1][i], aw[2][i], aw[3][i]};
        float di[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (pg->mask[i])
            backward_sample_generic(go, value_level, grad_value_level, pg->offset[i], g->pixel_stride, g->row_stride,
                                    awi, C, di, pg->mask[i], !finite[i], vt);
        for (int k = 0; k < 4; k++) d[k][i] = di[k];
    }
}

/* The backward's order of levels: 0, NL - 1, 1, NL - 2, ... The first level is the largest and
 * slowest to walk (its rows miss the caches most), so a split into contiguous ranges of this
 * order pairs it with the smallest: on the encoder, 2 parts owning levels {0, 3} and {1, 2}, not
 * {0, 1} and {2, 3} (one level alone: 31-44 ms, level 0 the slowest). A query's levels own
 * disjoint rows and gradients, so their order does not change the bits. */
static inline int64_t level_at(const msda_plan *p, int64_t at)
{
    return at % 2 == 0 ? at / 2 : p->num_levels - 1 - at / 2;
}

/* grad_sampling_locations and grad_attention_weights of (b, q, h), and its grad_value terms.
 * Instantiated per fast value kind and once generic (GENERIC a constant: every point group
 * through backward_points_slow, the value kind read at run time). */
MSDA_INLINE void backward_query_impl(const msda_plan *p, const msda_tensors *t, geom_cache *gc, int64_t b, int64_t q,
                                     int64_t h, int64_t l_begin, int64_t l_end, const int GENERIC, const int VT)
{
    const int64_t Q = p->num_queries, H = p->num_heads, NL = p->num_levels, P = p->num_points;
    const ptrdiff_t C = (ptrdiff_t)p->channels, xy = (ptrdiff_t)p->loc_stride_xy,
                    point_stride = (ptrdiff_t)p->loc_stride_point;
    const int64_t head_offset = b * p->value_stride_batch + h * p->value_stride_head;
    const char *value_bh = (const char *)t->value + head_offset * MSDA_ELEM_BYTES(VT);
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
    for (int64_t at = l_begin; at < l_end; at++) {
        const int64_t l = level_at(p, at);
        const level_geom *g = geom_of(gc, p, l);
        const char *value_level = value_bh + g->start * MSDA_ELEM_BYTES(VT);
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
            if (!GENERIC && all_finite) {
                for (int i = 0; i < count; i++) {
                    const float awi[4] = {aw[0][i], aw[1][i], aw[2][i], aw[3][i]};
                    float di[4];
                    backward_sample(go, value_level, grad_value_level, pg.offset[i], g->pixel_stride, g->row_stride,
                                    awi, C, di, pg.mask[i], VT);
                    for (int k = 0; k < 4; k++) d[k][i] = di[k];
                }
            } else {
                backward_points_slow(go, value_level, grad_value_level, g, &pg, aw, finite, count, C, d, VT);
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
            for (int i = 0; i < count; i++) {
                t->grad_attention_weights[weight_index + i] = ga_s[i];
                grad_loc[i * point_stride] = gx_s[i];
                grad_loc[i * point_stride + xy] = gy_s[i];
            }
        }
    }
}

static void backward_query_generic(const msda_plan *p, const msda_tensors *t, geom_cache *gc, int64_t b, int64_t q,
                                   int64_t h, int64_t l_begin, int64_t l_end)
{
    backward_query_impl(p, t, gc, b, q, h, l_begin, l_end, 1, p->value_dtype);   /* rare: not specialised */
}

/* The levels at positions [l_begin, l_end) of level_at's order of (b, q, h): a copy for each kind
 * of value element this build reads fast (kernels.h, MSDA_FAST_*); the others take the generic
 * code (the same operations, so the same bits). */
static void backward_query(const msda_plan *p, const msda_tensors *t, geom_cache *gc, int64_t b, int64_t q, int64_t h,
                           int64_t l_begin, int64_t l_end)
{
    switch (p->value_dtype) {
    case MSDA_FLOAT32: backward_query_impl(p, t, gc, b, q, h, l_begin, l_end, 0, MSDA_FLOAT32); break;
#if MSDA_FAST_F16
    case MSDA_FLOAT16: backward_query_impl(p, t, gc, b, q, h, l_begin, l_end, 0, MSDA_FLOAT16); break;
#endif
#if MSDA_FAST_BF16
    case MSDA_BFLOAT16: backward_query_impl(p, t, gc, b, q, h, l_begin, l_end, 0, MSDA_BFLOAT16); break;
#endif
    default: backward_query_generic(p, t, gc, b, q, h, l_begin, l_end); break;
    }
}

/* Every query of batch b, for heads [h_begin, h_end) and the levels at positions [l_begin, l_end)
 * of level_at's order, in the walk's order (walks.h), which
 * depends on the problem's shapes and the batch's locations and weights alone: each head's
 * grad_value sums over the queries in that order, whatever the threads, and all heads' rows of
 * a pixel are used together. */
static void backward_walk(const msda_plan *p, const msda_tensors *t, geom_cache *gc, int64_t b, int64_t h_begin,
                          int64_t h_end, int64_t l_begin, int64_t l_end)
{
    const int64_t Q = p->num_queries;
    sample_grid sg;
    sample_grid_init(&sg, p, MSDA_BACKWARD_STRIP);
    uint16_t order[MSDA_ORDER_CHUNK];
    fetch_ahead fa = {0.0f};
    /* the queries' rows are fetched this many queries ahead: about 64 samples' work, where a
     * walk of one level of one head has 4 a query (at most 8 ahead) */
    const int64_t samples = (h_end - h_begin) * (l_end - l_begin) * p->num_points;
    const int ahead = samples >= 64 ? 1 : samples < 8 ? 8 : (int)(64 / samples);
    for (int64_t q0 = 0; q0 < Q; q0 += MSDA_ORDER_CHUNK) {
        const int n = (int)(Q - q0 < MSDA_ORDER_CHUNK ? Q - q0 : MSDA_ORDER_CHUNK);
        sample_order(p, t, &sg, b, q0, n, order);
        for (int i = 0; i < n; i++) {
            if (i + ahead < n) fetch_query(&fa, p, t, b, q0 + order[i + ahead], 1, h_begin, h_end);
            for (int64_t h = h_begin; h < h_end; h++) backward_query(p, t, gc, b, q0 + order[i], h, l_begin, l_end);
        }
    }
    __asm__ volatile("" : : "r"(fa.sink));
}

/* First pixel of level l (l = num_levels: value_length). */
static int64_t level_first(const msda_plan *p, int64_t l)
{
    return l < p->num_levels ? p->level_start_index[l] : p->value_length;
}

/* Zeroes grad_value of batch b, pixels [pb, pe), heads [h0, h1), in as few runs as the layout
 * allows: one (BLNC, all heads), a run of heads a pixel (BLNC), a run of pixels a head (BNLC). */
static void zero_rect(const msda_plan *p, const msda_tensors *t, int64_t b, int64_t pb, int64_t pe, int64_t h0,
                      int64_t h1)
{
    const int64_t C = p->channels, H = p->num_heads;
    float *base = t->grad_value + b * p->value_stride_batch;
    if (p->grad_value_zeroed || pe <= pb || h1 <= h0) return;
    if (p->value_stride_head == C && p->value_stride_pixel == H * C && h0 == 0 && h1 == H) {
        memset(base + pb * H * C, 0, (size_t)((pe - pb) * H * C) * sizeof(float));
    } else if (p->value_stride_head == C) {
        for (int64_t pixel = pb; pixel < pe; pixel++)
            memset(base + pixel * p->value_stride_pixel + h0 * C, 0, (size_t)((h1 - h0) * C) * sizeof(float));
    } else if (p->value_stride_pixel == C) {
        for (int64_t h = h0; h < h1; h++)
            memset(base + h * p->value_stride_head + pb * C, 0, (size_t)((pe - pb) * C) * sizeof(float));
    } else {
        for (int64_t h = h0; h < h1; h++)
            for (int64_t pixel = pb; pixel < pe; pixel++)
                memset(base + h * p->value_stride_head + pixel * p->value_stride_pixel, 0, (size_t)C * sizeof(float));
    }
}

/* The levels at positions [la, lb) of level_at's order, of heads [ha, hb) of batch b, whole: one walk. */
static void backward_rect(const msda_plan *p, const msda_tensors *t, geom_cache *gc, int64_t b, int64_t la, int64_t lb,
                          int64_t ha, int64_t hb)
{
    if (la == 0 && lb == p->num_levels) zero_rect(p, t, b, 0, p->value_length, ha, hb);
    else
        for (int64_t at = la; at < lb; at++)
            zero_rect(p, t, b, level_first(p, level_at(p, at)), level_first(p, level_at(p, at) + 1), ha, hb);
    backward_walk(p, t, gc, b, ha, hb, la, lb);
}

void MSDA_KFN(msda__backward_range)(const msda_plan *p, const msda_tensors *t, int64_t begin, int64_t end);
void MSDA_KFN(msda__backward_range)(const msda_plan *p, const msda_tensors *t, int64_t begin, int64_t end)
{
    geom_cache gc;
    geom_cache_init(&gc, p);
    /* Units (b, l, h), level-major within a batch: a range is at most three rectangles of
     * (levels, heads) a batch, each one walk (all of it on one thread: one walk of everything). */
    const int64_t H = p->num_heads, LH = p->num_levels * H;
    for (int64_t b = begin / LH; b * LH < end; b++) {
        const int64_t u1 = end - b * LH < LH ? end - b * LH : LH;
        int64_t u = begin > b * LH ? begin - b * LH : 0;
        if (u % H) {   /* the rest of a level */
            const int64_t l = u / H, hb = u1 - l * H < H ? u1 - l * H : H;
            backward_rect(p, t, &gc, b, l, l + 1, u % H, hb);
            u = l * H + hb;
        }
        if (u1 / H > u / H) {   /* whole levels */
            backward_rect(p, t, &gc, b, u / H, u1 / H, 0, H);
            u = u1 / H * H;
        }
        if (u < u1) backward_rect(p, t, &gc, b, u / H, u / H + 1, 0, u1 - u);   /* the start of one */
    }
}
