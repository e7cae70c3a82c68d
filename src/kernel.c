/* The forward and backward kernels over ranges of work units (see internal.h). */
#include "internal.h"

#include <math.h>
#include <string.h>

/* The four bilinear corners of one sample, written once for both passes. */
typedef struct corners {
    int64_t offset[4];    /* element offset of each corner's row from the level's first pixel */
    float weight[4];      /* bilinear weights w00, w01, w10, w11 */
    int valid[4];         /* corner inside the level */
    float fx, fy;
    float grad_scale_x;   /* su * du'/du */
    float grad_scale_y;   /* sv * dv'/dv */
} corners;

/* Maps a normalised coordinate to pixel space along one axis of `size` pixels.
 * Returns 0 when no corner along this axis can be in bounds (zeros padding), or the
 * coordinate is NaN; never converts a non-finite or out-of-range float to an integer. */
static inline int axis(float coord, int64_t size, int align_corners, msda_padding padding,
                       int64_t *index0, float *frac, float *grad_scale)
{
    if (isnan(coord)) return 0;
    float scale, pos;
    if (align_corners) {
        scale = (float)(size - 1);
        pos = size == 1 ? 0.0f : coord * scale;   /* 0 * inf would be NaN */
    } else {
        scale = (float)size;
        pos = coord * scale - 0.5f;
    }
    float derivative = 1.0f;
    const float last = (float)(size - 1);
    if (padding == MSDA_PADDING_BORDER) {
        if (!(pos > 0.0f && pos < last)) {
            derivative = 0.0f;
            pos = pos <= 0.0f ? 0.0f : last;
        }
    } else if (!(pos >= -1.0f && pos < (float)size)) {
        return 0;
    }
    const float floor_pos = floorf(pos);
    *index0 = (int64_t)floor_pos;
    *frac = pos - floor_pos;
    *grad_scale = scale * derivative;
    return 1;
}

static inline int sample_corners(float x, float y, int64_t height, int64_t width, int align_corners,
                                 msda_padding padding, int64_t pixel_stride, corners *c)
{
    int64_t x0, y0;
    if (!axis(x, width, align_corners, padding, &x0, &c->fx, &c->grad_scale_x)) return 0;
    if (!axis(y, height, align_corners, padding, &y0, &c->fy, &c->grad_scale_y)) return 0;
    const float fx = c->fx, fy = c->fy;
    c->weight[0] = (1.0f - fy) * (1.0f - fx);
    c->weight[1] = (1.0f - fy) * fx;
    c->weight[2] = fy * (1.0f - fx);
    c->weight[3] = fy * fx;
    for (int k = 0; k < 4; k++) {
        const int64_t i = y0 + (k >> 1), j = x0 + (k & 1);
        c->valid[k] = i >= 0 && i < height && j >= 0 && j < width;
        c->offset[k] = c->valid[k] ? (i * width + j) * pixel_stride : 0;
    }
    return 1;
}

/* Dot product in a fixed order: four interleaved partial sums over the first C - C % 4
 * channels, combined as (s0 + s1) + (s2 + s3), then the tail in order. SIMD builds must
 * keep this order so that every build gives the same bits. */
static inline float dot(const float *restrict a, const float *restrict b, int64_t n)
{
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    const int64_t n4 = n & ~(int64_t)3;
    for (int64_t c = 0; c < n4; c += 4) {
        s0 += a[c] * b[c];
        s1 += a[c + 1] * b[c + 1];
        s2 += a[c + 2] * b[c + 2];
        s3 += a[c + 3] * b[c + 3];
    }
    float s = (s0 + s1) + (s2 + s3);
    for (int64_t c = n4; c < n; c++) s += a[c] * b[c];
    return s;
}

/* acc[c] += w * row[c] */
static inline void axpy(float *restrict acc, float w, const float *restrict row, int64_t n)
{
    for (int64_t c = 0; c < n; c++) acc[c] += w * row[c];
}

static int64_t query_blocks(const msda_plan *p)
{
    return (p->num_queries + MSDA_FORWARD_QUERY_BLOCK - 1) / MSDA_FORWARD_QUERY_BLOCK;
}

int64_t msda__forward_units(const msda_plan *p)
{
    return p->batch * p->num_heads * query_blocks(p);
}

int64_t msda__backward_units(const msda_plan *p)
{
    return p->batch * p->num_heads * p->num_levels;
}

void msda__forward_range(const msda_plan *p, const msda_tensors *t, int64_t begin, int64_t end)
{
    const int64_t Q = p->num_queries, H = p->num_heads, C = p->channels, NL = p->num_levels,
                  P = p->num_points, blocks = query_blocks(p);
    for (int64_t unit = begin; unit < end; unit++) {
        const int64_t b = unit / (H * blocks), h = (unit / blocks) % H, block = unit % blocks;
        const int64_t q_begin = block * MSDA_FORWARD_QUERY_BLOCK;
        const int64_t q_end = q_begin + MSDA_FORWARD_QUERY_BLOCK < Q ? q_begin + MSDA_FORWARD_QUERY_BLOCK : Q;
        const float *value_bh = t->value + b * p->value_stride_batch + h * p->value_stride_head;
        for (int64_t q = q_begin; q < q_end; q++) {
            float *out = t->output + ((b * Q + q) * H + h) * C;
            memset(out, 0, (size_t)C * sizeof *out);
            const float *loc_qh = t->sampling_locations + b * p->loc_stride_batch + q * p->loc_stride_query +
                                  h * p->loc_stride_head;
            const float *weights_qh = t->attention_weights + ((b * Q + q) * H + h) * NL * P;
            for (int64_t l = 0; l < NL; l++) {
                const int64_t height = p->spatial_shapes[2 * l], width = p->spatial_shapes[2 * l + 1];
                const float *value_level = value_bh + p->level_start_index[l] * p->value_stride_pixel;
                for (int64_t pt = 0; pt < P; pt++) {
                    const float *loc = loc_qh + l * p->loc_stride_level + pt * p->loc_stride_point;
                    corners c;
                    if (!sample_corners(loc[0], loc[p->loc_stride_xy], height, width, p->align_corners,
                                        p->padding, p->value_stride_pixel, &c))
                        continue;
                    const float a = weights_qh[l * P + pt];
                    for (int k = 0; k < 4; k++)
                        if (c.valid[k]) axpy(out, a * c.weight[k], value_level + c.offset[k], C);
                }
            }
        }
    }
}

void msda__backward_range(const msda_plan *p, const msda_tensors *t, int64_t begin, int64_t end)
{
    const int64_t Q = p->num_queries, H = p->num_heads, C = p->channels, NL = p->num_levels,
                  P = p->num_points;
    for (int64_t unit = begin; unit < end; unit++) {
        const int64_t b = unit / (H * NL), h = (unit / NL) % H, l = unit % NL;
        const int64_t height = p->spatial_shapes[2 * l], width = p->spatial_shapes[2 * l + 1];
        const int64_t level_offset = b * p->value_stride_batch + h * p->value_stride_head +
                                     p->level_start_index[l] * p->value_stride_pixel;
        const float *value_level = t->value + level_offset;
        float *grad_value_level = t->grad_value + level_offset;
        for (int64_t pixel = 0; pixel < height * width; pixel++)
            memset(grad_value_level + pixel * p->value_stride_pixel, 0, (size_t)C * sizeof(float));

        for (int64_t q = 0; q < Q; q++) {
            const float *g = t->grad_output + ((b * Q + q) * H + h) * C;
            const int64_t weight_index = (((b * Q + q) * H + h) * NL + l) * P;
            const int64_t loc_index = b * p->loc_stride_batch + q * p->loc_stride_query +
                                      h * p->loc_stride_head + l * p->loc_stride_level;
            for (int64_t pt = 0; pt < P; pt++) {
                const int64_t li = loc_index + pt * p->loc_stride_point;
                const float *loc = t->sampling_locations + li;
                float *grad_loc = t->grad_sampling_locations + li;
                corners c;
                if (!sample_corners(loc[0], loc[p->loc_stride_xy], height, width, p->align_corners,
                                    p->padding, p->value_stride_pixel, &c)) {
                    grad_loc[0] = 0.0f;
                    grad_loc[p->loc_stride_xy] = 0.0f;
                    t->grad_attention_weights[weight_index + pt] = 0.0f;
                    continue;
                }
                const float a = t->attention_weights[weight_index + pt];
                float d[4];
                for (int k = 0; k < 4; k++) {
                    if (c.valid[k]) {
                        d[k] = dot(g, value_level + c.offset[k], C);
                        axpy(grad_value_level + c.offset[k], a * c.weight[k], g, C);
                    } else {
                        d[k] = 0.0f;
                    }
                }
                const float fx = c.fx, fy = c.fy;
                t->grad_attention_weights[weight_index + pt] =
                    c.weight[0] * d[0] + c.weight[1] * d[1] + c.weight[2] * d[2] + c.weight[3] * d[3];
                grad_loc[0] = a * ((1.0f - fy) * (d[1] - d[0]) + fy * (d[3] - d[2])) * c.grad_scale_x;
                grad_loc[p->loc_stride_xy] = a * ((1.0f - fx) * (d[2] - d[0]) + fx * (d[3] - d[1])) * c.grad_scale_y;
            }
        }
    }
}
