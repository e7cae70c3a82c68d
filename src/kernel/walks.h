/* The orders queries are walked in: bands of rows for one query per pixel (both passes), and
 * Morton order of where the queries sample (the forward, other problems). Part of the per-ISA
 * kernel copy (kernels.h), after geometry.h. */
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
