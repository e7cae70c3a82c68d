/* The order queries are walked in, for both passes: by where each query samples, not by its
 * index. Part of the per-ISA kernel copy (kernels.h), after geometry.h.
 *
 * The image is cut into a grid of cells: bands of `strip` rows of the tallest level, each band
 * column by column of the widest level (coarser columns, then bands, where that would make more
 * than MSDA_ORDER_CELLS cells). A query's place is the mean of the points of head 0's first level
 * that has a counted point (at most its first four points): both coordinates in [0, 1] (so not
 * NaN) and weight not 0. So a NaN sample counts as a weight-0 one does (not at all), and a sample
 * outside the image never counts, whatever its weight (a dead sample's weight, 0, NaN or any
 * other, cannot move its query); queries are counting-sorted by the cell of that place (stably:
 * index order within a cell, sample_order) and walked cell by cell, band by band. Neighbouring
 * queries then share their rows in cache, and one sweep over the image reads each level's rows a few times, in any
 * query order: one query per pixel (encoder self-attention) in pixel order or shuffled, or a
 * two-stage decoder's proposals in score order. More than MSDA_ORDER_CHUNK queries are walked
 * in index ranges of that many, one sweep each (the order's scratch stays on the stack).
 *
 * The place is integer math from the float inputs: a clamped coordinate times 2^16 is exact in
 * float, its truncation exact, the rest integers. So the order, and with it the backward's
 * grad_value summation order, is the same on every ISA, build and thread count, and 1e30 and 5
 * (both outside) give the same bits. */

#ifndef MSDA_BACKWARD_STRIP
#define MSDA_BACKWARD_STRIP 8
#endif
/* The forward's bands are 8 rows too (4 walked pixel order best, when cells came from the
 * index): a place is the mean of a few samples, a pixel or two off its query's own, and with
 * bands of 4 a third of the queries near a band's edge fell into the next band, a sweep away
 * from their neighbours (wasm SIMD encoder forward: 52.4 ms with 4, 49.3 with 8, 48.3 before
 * the walk by place; native the same within noise). */
#ifndef MSDA_FORWARD_STRIP
#define MSDA_FORWARD_STRIP 8
#endif

/* Queries sorted at a time (their order and their cells as uint16 on the stack, 64 KiB each); a
 * problem with more walks them in consecutive index ranges of this many, each in its own sweep. */
#define MSDA_ORDER_CHUNK 32768
/* Most grid cells, the last one for queries with no live point (counts as uint16, 16 KiB). */
#define MSDA_ORDER_CELLS 8192

typedef struct sample_grid {
    int64_t bands, cols;
    int64_t strip, widest;   /* rows a band takes of the tallest level; the widest level's width */
} sample_grid;

static void sample_grid_init(sample_grid *sg, const msda_plan *p, int64_t strip)
{
    int64_t rows = 1, cols = 1;
    for (int64_t l = 0; l < p->num_levels; l++) {
        const int64_t hl = p->spatial_shapes[2 * l], wl = p->spatial_shapes[2 * l + 1];
        rows = hl > rows ? hl : rows;
        cols = wl > cols ? wl : cols;
    }
    int64_t bands = (rows + strip - 1) / strip;
    if (bands > MSDA_ORDER_CELLS - 1) bands = MSDA_ORDER_CELLS - 1;
    const int64_t max_cols = (MSDA_ORDER_CELLS - 1) / bands;
    sg->bands = bands;
    sg->cols = cols < max_cols ? cols : max_cols;
    sg->strip = strip;
    sg->widest = cols;
}

/* A coordinate (not NaN) clamped into [0, 1], in units of 2^-16: exact, the same everywhere. */
static inline int32_t unit_fixed(float c)
{
    const float u = c > 0.0f ? (c < 1.0f ? c : 1.0f) : 0.0f;
    return (int32_t)(u * 65536.0f);
}

/* The cell of query q of batch b (see the top of this file); bands * cols when it has no live
 * point. int32 math: a mean is at most 2^16, times at most 8191 cells. */
static inline int32_t query_cell(const msda_plan *p, const msda_tensors *t, const sample_grid *sg, int64_t b,
                                 int64_t q)
{
    const int64_t NL = p->num_levels, P = p->num_points, points = P < 4 ? P : 4;
    const float *loc = t->sampling_locations + b * p->loc_stride_batch + q * p->loc_stride_query;
    const float *weights = t->attention_weights + (b * p->num_queries + q) * p->num_heads * NL * P;
    const int32_t bands = (int32_t)sg->bands, cols = (int32_t)sg->cols;
    for (int64_t l = 0; l < NL; l++) {
        int32_t sx = 0, sy = 0, n = 0;
        for (int64_t pt = 0; pt < points; pt++) {
            const float *xy = loc + l * p->loc_stride_level + pt * p->loc_stride_point;
            const float x = xy[0], y = xy[p->loc_stride_xy], w = weights[l * P + pt];
            if (!(x >= 0.0f && x <= 1.0f && y >= 0.0f && y <= 1.0f) || w == 0.0f) continue;
            sx += unit_fixed(x);
            sy += unit_fixed(y);
            n++;
        }
        if (n == 0) continue;
        if (n > 1) {   /* the mean, rounded down */
            sx /= n;
            sy /= n;
        }
        int32_t cx = (sx * cols) >> 16, cy = (sy * bands) >> 16;
        cx = cx < cols ? cx : cols - 1;   /* a coordinate of exactly 1 */
        cy = cy < bands ? cy : bands - 1;
        return cy * cols + cx;
    }
    return bands * cols;
}

/* order[0 .. n) = the queries q_begin + order[i] (n <= MSDA_ORDER_CHUNK) of batch b in walking
 * order: a stable counting sort by cell, each key computed once, so index order within a cell.
 * Stable, it is the order any sort by (cell, index) gives, a parallel one too (the WebGPU
 * backend's order pass). */
static void sample_order(const msda_plan *p, const msda_tensors *t, const sample_grid *sg, int64_t b,
                         int64_t q_begin, int n, uint16_t *order)
{
    uint16_t start[MSDA_ORDER_CELLS + 1], cell[MSDA_ORDER_CHUNK];
    const int64_t cells = sg->bands * sg->cols + 1;
    memset(start, 0, (size_t)(cells + 1) * sizeof start[0]);
    for (int i = 0; i < n; i++) {
        cell[i] = (uint16_t)query_cell(p, t, sg, b, q_begin + i);
        start[cell[i] + 1]++;
    }
    for (int64_t c = 0; c < cells; c++) start[c + 1] = (uint16_t)(start[c + 1] + start[c]);
    for (int i = 0; i < n; i++) order[start[cell[i]]++] = (uint16_t)i;
}

/* Starts fetching the rows a query reads and writes in the per-query tensors (its locations and
 * weights, and output or grad_output, grad_sampling_locations, grad_attention_weights), a
 * query ahead of the walk: walked by place, consecutive queries' rows can be anywhere in those
 * tensors, so the hardware prefetchers cannot guess them and each row's first touch would wait
 * on memory (and a page walk). Every cache line, not just the first. WebAssembly has no
 * prefetch: a load of each line instead (the sum only keeps the loads), which the CPU issues
 * ahead of the work that follows; in the threads module only of the rows the pass reads, not of
 * an output's, which another thread's part may be writing (other heads of the same query). The
 * bits are untouched either way. */
#define MSDA_LINE 64

typedef struct fetch_ahead {
    float sink;
} fetch_ahead;

MSDA_INLINE void fetch_rows(fetch_ahead *fa, const void *row, int64_t bytes, int write)
{
    const char *r = (const char *)row;
#if defined(__wasm__)
#if defined(MSDA_WASM_THREADS)
    if (write) return;
#else
    (void)write;
#endif
    float s = 0.0f;
    for (int64_t k = 0; k < bytes; k += MSDA_LINE) s += *(const float *)(const void *)(r + k);
    fa->sink += s;
#else
    (void)fa;
    if (write)
        for (int64_t k = 0; k < bytes; k += MSDA_LINE) __builtin_prefetch(r + k, 1);
    else
        for (int64_t k = 0; k < bytes; k += MSDA_LINE) __builtin_prefetch(r + k, 0);
#endif
}

/* 1 when the forward should fetch ahead on the walk order[0 .. n): always natively (a prefetch
 * costs an issue slot). In WebAssembly the fetch is a load, which holds the core until memory
 * answers, so it pays only where the walk jumps around the per-query tensors: a walk of which a
 * quarter of the steps or more stay within a band of the widest level (strip rows of it, in query
 * index: one query per pixel in pixel order) reads rows the hardware has streamed in already, and
 * goes without
 * (wasm SIMD encoder forward: 51.4 ms without, 53.5 with; shuffled: 62.7 without, 57.8 with).
 * The bits do not depend on it. */
static int fetch_walk(const sample_grid *sg, const uint16_t *order, int n)
{
#if defined(__wasm__)
    const int64_t near = sg->strip * sg->widest;
    int local = 0;
    for (int i = 0; i + 1 < n; i++) {
        const int64_t step = (int64_t)order[i + 1] - (int64_t)order[i];
        local += step <= near && step >= -near;
    }
    return 4 * local < n - 1;   /* pixel order: 61 % of steps near; shuffled: 12 % */
#else
    (void)sg, (void)order, (void)n;
    return 1;
#endif
}

/* The rows of query q of batch b in every tensor indexed by query (locations: BQHLP2's row; in
 * B2QHLP its x and y rows), the forward's or (`backward`) the backward's; of heads [h_begin,
 * h_end) only, each head's slice being contiguous in every such row: a backward part that owns
 * some heads must not take for writing the lines of the heads another part is writing (a write
 * prefetch takes a line from the other core, which then takes it back; two threads walk the same
 * queries at about the same time). */
MSDA_INLINE void fetch_query(fetch_ahead *fa, const msda_plan *p, const msda_tensors *t, int64_t b, int64_t q,
                             int backward, int64_t h_begin, int64_t h_end)
{
    const int64_t NP = p->num_levels * p->num_points, HNP = p->num_heads * NP, C = p->channels,
                  heads = h_end - h_begin, bq = b * p->num_queries + q;
    const int64_t loc = b * p->loc_stride_batch + q * p->loc_stride_query + h_begin * p->loc_stride_head;
    if (p->loc_stride_xy == 1) {
        fetch_rows(fa, t->sampling_locations + loc, heads * NP * 8, 0);
        if (backward) fetch_rows(fa, t->grad_sampling_locations + loc, heads * NP * 8, 1);
    } else {
        for (int xy = 0; xy < 2; xy++) {
            fetch_rows(fa, t->sampling_locations + loc + xy * p->loc_stride_xy, heads * NP * 4, 0);
            if (backward) fetch_rows(fa, t->grad_sampling_locations + loc + xy * p->loc_stride_xy, heads * NP * 4, 1);
        }
    }
    fetch_rows(fa, t->attention_weights + bq * HNP + h_begin * NP, heads * NP * 4, 0);
    if (backward) {
        fetch_rows(fa, t->grad_output + (bq * p->num_heads + h_begin) * C, heads * C * 4, 0);
        fetch_rows(fa, t->grad_attention_weights + bq * HNP + h_begin * NP, heads * NP * 4, 1);
    } else {
        fetch_rows(fa, t->output + (bq * p->num_heads + h_begin) * C, heads * C * 4, 1);
    }
}

static int64_t query_blocks(const msda_plan *p)
{
    return (p->num_queries + MSDA_FORWARD_QUERY_BLOCK - 1) / MSDA_FORWARD_QUERY_BLOCK;
}
