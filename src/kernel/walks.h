/* The order queries are walked in, for both passes: by where each query samples, not by its
 * index. Part of the per-ISA kernel copy (kernels.h), after geometry.h.
 *
 * The image is cut into a grid of cells: bands of `strip` rows of the tallest level, each band
 * column by column of the widest level (coarser columns, then bands, where that would make more
 * than MSDA_ORDER_CELLS cells). A query's place is the mean of the points of head 0's first level
 * that has a live point (both coordinates not NaN, weight not 0; at most its first four points),
 * clamped into [0, 1]; queries are counting-sorted by the cell of that place (stable: index
 * order within a cell) and walked cell by cell, band by band. Neighbouring queries then share
 * their rows in cache, and one sweep over the image reads each level's rows a few times, in any
 * query order: one query per pixel (encoder self-attention) in pixel order or shuffled, or a
 * two-stage decoder's proposals in score order. More than MSDA_ORDER_CHUNK queries are walked
 * in index ranges of that many, one sweep each (the order's scratch stays on the stack).
 *
 * The place is integer math from the float inputs: a clamped coordinate times 2^16 is exact in
 * float, its truncation exact, the rest integers. So the order, and with it the backward's
 * grad_value summation order, is the same on every ISA, build and thread count. Dead points
 * (NaN, weight 0) do not move it, and a huge coordinate clamps like any other beyond the edge,
 * so a NaN sample and a weight-0 one, or 1e30 and 5, still give the same bits. */

#ifndef MSDA_BACKWARD_STRIP
#define MSDA_BACKWARD_STRIP 8
#endif
#ifndef MSDA_FORWARD_STRIP
#define MSDA_FORWARD_STRIP 4
#endif

/* Queries sorted at a time (their order as uint16 on the stack, 64 KiB); a problem with more
 * walks them in consecutive index ranges of this many, each in its own sweep. */
#define MSDA_ORDER_CHUNK 32768
/* Most grid cells, the last one for queries with no live point (counts as uint16, 16 KiB). */
#define MSDA_ORDER_CELLS 8192

typedef struct sample_grid {
    int64_t bands, cols;
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
}

/* A coordinate (not NaN) clamped into [0, 1], in units of 2^-16: exact, the same everywhere. */
static inline int64_t unit_fixed(float c)
{
    const float u = c > 0.0f ? (c < 1.0f ? c : 1.0f) : 0.0f;
    return (int64_t)(int32_t)(u * 65536.0f);
}

/* The cell of query q of batch b (see the top of this file); bands * cols when it has no live
 * point. */
static inline int64_t query_cell(const msda_plan *p, const msda_tensors *t, const sample_grid *sg, int64_t b,
                                 int64_t q)
{
    const int64_t NL = p->num_levels, P = p->num_points, points = P < 4 ? P : 4;
    const float *loc = t->sampling_locations + b * p->loc_stride_batch + q * p->loc_stride_query;
    const float *weights = t->attention_weights + (b * p->num_queries + q) * p->num_heads * NL * P;
    for (int64_t l = 0; l < NL; l++) {
        int64_t sx = 0, sy = 0, n = 0;
        for (int64_t pt = 0; pt < points; pt++) {
            const float *xy = loc + l * p->loc_stride_level + pt * p->loc_stride_point;
            const float x = xy[0], y = xy[p->loc_stride_xy], w = weights[l * P + pt];
            if (x != x || y != y || w == 0.0f) continue;
            sx += unit_fixed(x);
            sy += unit_fixed(y);
            n++;
        }
        if (n == 0) continue;
        int64_t cx = sx * sg->cols / (n << 16), cy = sy * sg->bands / (n << 16);
        cx = cx < sg->cols ? cx : sg->cols - 1;   /* a coordinate of exactly 1 */
        cy = cy < sg->bands ? cy : sg->bands - 1;
        return cy * sg->cols + cx;
    }
    return sg->bands * sg->cols;
}

/* order[0 .. n) = the queries q_begin + order[i] (n <= MSDA_ORDER_CHUNK) of batch b in walking
 * order: a stable counting sort by cell. */
static void sample_order(const msda_plan *p, const msda_tensors *t, const sample_grid *sg, int64_t b,
                         int64_t q_begin, int n, uint16_t *order)
{
    uint16_t start[MSDA_ORDER_CELLS + 1];
    const int64_t cells = sg->bands * sg->cols + 1;
    memset(start, 0, (size_t)(cells + 1) * sizeof start[0]);
    for (int i = 0; i < n; i++) start[query_cell(p, t, sg, b, q_begin + i) + 1]++;
    for (int64_t c = 0; c < cells; c++) start[c + 1] = (uint16_t)(start[c + 1] + start[c]);
    for (int i = 0; i < n; i++) order[start[query_cell(p, t, sg, b, q_begin + i)]++] = (uint16_t)i;
}

static int64_t query_blocks(const msda_plan *p)
{
    return (p->num_queries + MSDA_FORWARD_QUERY_BLOCK - 1) / MSDA_FORWARD_QUERY_BLOCK;
}
