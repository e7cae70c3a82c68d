/* The forward pass: each (query, head) as a list of taps summed channel block by channel block,
 * the rare non-finite path, and msda__forward_range_<isa> over a range of units. Part of the
 * per-ISA kernel copy (kernels.h), after geometry.h and walks.h. */
/* ---- forward ----
 * Each (query, head) first lists its in-bounds corners as taps (row, weight), then sums them
 * channel block by channel block with the block's accumulators in registers. Tap order, which
 * is each output channel's summation order: level, group of four points, corner, point. */

#define MSDA_TAPS 256

typedef struct taps {
    const char *row[MSDA_TAPS];   /* a value row, of plan->value_dtype */
    float weight[MSDA_TAPS];
} taps;

/* Appends the in-bounds corners of one point group; returns the new tap count. ES: the bytes of
 * a value element. */
MSDA_INLINE int emit_taps(taps *restrict tp, int n, const point_group *pg, const v4 aw[4], int count,
                          const char *value_level, const level_geom *g, const int ES)
{
    const ptrdiff_t delta[4] = {0, g->pixel_stride, g->row_stride, g->row_stride + g->pixel_stride};
    if (count == 4 && (pg->mask[0] & pg->mask[1] & pg->mask[2] & pg->mask[3]) == 15u) {
        for (int k = 0; k < 4; k++) v4_store(tp->weight + n + 4 * k, aw[k]);
#if MSDA_SIMD && UINTPTR_MAX == 0xFFFFFFFFu
        /* 32-bit pointers (wasm32): four rows per vector store */
        if (g->narrow) {
            const v4i rows = v4i_add(v4i_splat((int32_t)(uintptr_t)value_level),
                                     v4i_mul(pg->offset_lanes, v4i_splat(ES)));
            for (int k = 0; k < 4; k++) {
                const v4i r = v4i_add(rows, v4i_splat((int32_t)(delta[k] * ES)));
                memcpy(tp->row + n + 4 * k, &r, sizeof r);
            }
            return n + 16;
        }
#endif
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < 4; i++) tp->row[n + 4 * k + i] = value_level + (pg->offset[i] + delta[k]) * ES;
        return n + 16;
    }
    /* Some corner outside (common near the edges of small levels): every slot is written and
     * kept only when inside, without a branch per corner. An outside corner's row address is
     * formed as an integer, never as an out-of-bounds pointer, and never dereferenced. */
    float w[4][4];
    for (int k = 0; k < 4; k++) v4_store(w[k], aw[k]);
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < count; i++) {
            tp->row[n] = (const char *)((uintptr_t)value_level + (uintptr_t)(pg->offset[i] + delta[k]) * (uintptr_t)ES);
            tp->weight[n] = w[k][i];
            n += (int)(pg->mask[i] >> k & 1u);
        }
    return n;
}

/* out[c0 .. c0 + V vectors) = (first ? 0 : out) + sum_t weight[t] * row[t][c0 ..], the rows of
 * kind VT, read two vectors at a time (LOAD2_AS: one load for wasm SIMD's bfloat16, simd.h).
 * Written once for v4 (the tails) and vf (32-channel blocks, MSDA_VW lanes). */
#define MSDA_SUM_TAPS_BLOCK(NAME, T, LANES, ZERO, SPLAT, LOAD, LOAD_AS, LOAD2_AS, STORE, MADD)                  \
    MSDA_INLINE void NAME(float *restrict out, const taps *restrict tp, int n, int first, ptrdiff_t c0, const int V, \
                          const int VT)                                                                          \
    {                                                                                                            \
        T acc[32 / LANES];                                                                                       \
        for (int v = 0; v < V; v++) acc[v] = first ? ZERO() : LOAD(out + c0 + LANES * v);                       \
        for (int t = 0; t < n; t++) {                                                                            \
            const T w = SPLAT(tp->weight[t]);                                                                    \
            const char *row = tp->row[t];                                                                        \
            for (int v = 0; v + 1 < V; v += 2) {                                                                 \
                T lo, hi;                                                                                        \
                LOAD2_AS(row, c0 + LANES * v, VT, &lo, &hi);                                                     \
                acc[v] = MADD(acc[v], w, lo);                                                                    \
                acc[v + 1] = MADD(acc[v + 1], w, hi);                                                            \
            }                                                                                                    \
            if (V & 1) acc[V - 1] = MADD(acc[V - 1], w, LOAD_AS(row, c0 + LANES * (V - 1), VT));                  \
        }                                                                                                        \
        for (int v = 0; v < V; v++) STORE(out + c0 + LANES * v, acc[v]);                                         \
    }
MSDA_SUM_TAPS_BLOCK(sum_taps_block, v4, 4, v4_zero, v4_splat, v4_load, v4_load_as, v4_load2_as, v4_store, v4_madd)
MSDA_SUM_TAPS_BLOCK(sum_taps_wide, vf, MSDA_VW, vf_zero, vf_splat, vf_load, vf_load_as, vf_load2_as, vf_store, vf_madd)

MSDA_INLINE void sum_taps(float *restrict out, const taps *restrict tp, int n, int first, ptrdiff_t C, const int VT)
{
    ptrdiff_t c = 0;
    for (; c + 32 <= C; c += 32) sum_taps_wide(out, tp, n, first, c, 32 / MSDA_VW, VT);
    if (C - c >= 16) { sum_taps_block(out, tp, n, first, c, 4, VT); c += 16; }
    if (C - c >= 8) { sum_taps_block(out, tp, n, first, c, 2, VT); c += 8; }
    if (C - c >= 4) { sum_taps_block(out, tp, n, first, c, 1, VT); c += 4; }
    for (; c < C; c++) {
        float acc = first ? 0.0f : out[c];
        for (int t = 0; t < n; t++) acc += tp->weight[t] * f_load_as(tp->row[t], c, VT);
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
static void forward_infinite(const msda_plan *p, geom_cache *gc, const char *value_bh, const float *loc_qh,
                             const float *weights_qh, float *out)
{
    const int vt = p->value_dtype, es = MSDA_ELEM_BYTES(vt);
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
                const char *corner = value_bh + (g->start + pg.offset[i]) * es;
                for (ptrdiff_t c = 0; c < C; c++) {
                    float sum = 0.0f;
                    int any = 0;
                    for (int k = 0; k < 4; k++)
                        if (pg.mask[i] >> k & 1u) {
                            const float term = w[k][i] * f_load_as(corner, delta[k] + c, vt);
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
                                    int64_t q, int64_t h, const int exact, const int VT)
{
    const int ES = MSDA_ELEM_BYTES(VT);
    const int64_t Q = p->num_queries, H = p->num_heads, NL = p->num_levels, P = p->num_points;
    const ptrdiff_t C = (ptrdiff_t)p->channels, xy = (ptrdiff_t)p->loc_stride_xy,
                    point_stride = (ptrdiff_t)p->loc_stride_point;
    const char *value_bh = (const char *)t->value + (b * p->value_stride_batch + h * p->value_stride_head) * ES;
    float *out = t->output + ((b * Q + q) * H + h) * C;
    const float *loc_qh = t->sampling_locations + b * p->loc_stride_batch + q * p->loc_stride_query +
                          h * p->loc_stride_head;
    const float *weights_qh = t->attention_weights + ((b * Q + q) * H + h) * NL * P;
    int n = 0, first = 1, infinite = 0;
    for (int64_t l = 0; l < NL; l++) {
        const level_geom *g = geom_of(gc, p, l);
        const char *value_level = value_bh + g->start * ES;
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
                sum_taps(out, tp, n, first, C, VT);
                first = 0;
                n = 0;
            }
            n = emit_taps(tp, n, &pg, aw, count, value_level, g, ES);
        }
    }
    sum_taps(out, tp, n, first, C, VT);
    if (all_finite(out, C) && !infinite) return;
    if (!exact) {
        forward_query_exact(p, t, gc, tp, b, q, h);
        return;
    }
    if (infinite) forward_infinite(p, gc, value_bh, loc_qh, weights_qh, out);
    canonical_nans(out, C);
}

/* A copy for each kind of value element this build reads fast (kernels.h, MSDA_FAST_*); the others
 * take the exact path's copy (the same bits). */
static void forward_query(const msda_plan *p, const msda_tensors *t, geom_cache *gc, taps *tp, int64_t b, int64_t q,
                          int64_t h)
{
    switch (p->value_dtype) {
    case MSDA_FLOAT32: forward_query_impl(p, t, gc, tp, b, q, h, 0, MSDA_FLOAT32); break;
#if MSDA_FAST_F16
    case MSDA_FLOAT16: forward_query_impl(p, t, gc, tp, b, q, h, 0, MSDA_FLOAT16); break;
#endif
#if MSDA_FAST_BF16
    case MSDA_BFLOAT16: forward_query_impl(p, t, gc, tp, b, q, h, 0, MSDA_BFLOAT16); break;
#endif
    default: forward_query_exact(p, t, gc, tp, b, q, h); break;
    }
}

/* the rare path, out of line, one copy for every kind of value element */
__attribute__((noinline)) static void forward_query_exact(const msda_plan *p, const msda_tensors *t, geom_cache *gc,
                                                          taps *tp, int64_t b, int64_t q, int64_t h)
{
    forward_query_impl(p, t, gc, tp, b, q, h, 1, p->value_dtype);
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

void MSDA_KFN(msda__forward_range)(const msda_plan *p, const msda_tensors *t, int64_t begin, int64_t end);
void MSDA_KFN(msda__forward_range)(const msda_plan *p, const msda_tensors *t, int64_t begin, int64_t end)
{
    const int64_t Q = p->num_queries, H = p->num_heads, blocks = query_blocks(p);
    geom_cache gc;
    geom_cache_init(&gc, p);
    taps tp;
    sample_grid sg;
    sample_grid_init(&sg, p, MSDA_FORWARD_STRIP);
    uint16_t order[MSDA_ORDER_CHUNK];
    fetch_ahead fa = {0.0f};
    /* The range's queries, batch by batch, in the walk's order (walks.h). The output's bits do not
     * depend on the order: each output element is one (query, head)'s sum. */
    const int64_t first = begin / H, last = (end - 1) / H;   /* global query blocks b * blocks + block */
    for (int64_t b = first / blocks; b <= last / blocks; b++) {
        const int64_t q_begin = b == first / blocks ? (first - b * blocks) * MSDA_FORWARD_QUERY_BLOCK : 0;
        int64_t q_end = b == last / blocks ? (last - b * blocks + 1) * MSDA_FORWARD_QUERY_BLOCK : Q;
        if (q_end > Q) q_end = Q;
        for (int64_t q0 = q_begin; q0 < q_end; q0 += MSDA_ORDER_CHUNK) {
            const int n = (int)(q_end - q0 < MSDA_ORDER_CHUNK ? q_end - q0 : MSDA_ORDER_CHUNK);
            sample_order(p, t, &sg, b, q0, n, order);
            const int fetch = fetch_walk(&sg, order, n);
            for (int i = 0; i < n; i++) {
                if (fetch && i + 1 < n) fetch_query(&fa, p, t, b, q0 + order[i + 1], 0, 0, H);
                forward_query_heads(p, t, &gc, &tp, b, q0 + order[i], blocks, begin, end);
            }
        }
    }
    __asm__ volatile("" : : "r"(fa.sink));
}
