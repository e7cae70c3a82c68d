/* Float64 reference: a line-by-line transcription of SEMANTICS.md. Slow on purpose. */
#include "reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t level_pixels(const msda_problem *p)
{
    int64_t total = 0;
    for (int64_t l = 0; l < p->num_levels; l++)
        total += p->spatial_shapes[2 * l] * p->spatial_shapes[2 * l + 1];
    return total;
}

int64_t ref_value_elements(const msda_problem *p)
{
    return p->batch * level_pixels(p) * p->num_heads * p->channels;
}

int64_t ref_locations_elements(const msda_problem *p)
{
    return ref_weights_elements(p) * 2;
}

int64_t ref_weights_elements(const msda_problem *p)
{
    return p->batch * p->num_queries * p->num_heads * p->num_levels * p->num_points;
}

int64_t ref_output_elements(const msda_problem *p)
{
    return p->batch * p->num_queries * p->num_heads * p->channels;
}

int64_t ref_value_index(const msda_problem *p, int64_t b, int64_t pixel, int64_t h, int64_t c)
{
    const int64_t L = level_pixels(p), H = p->num_heads, C = p->channels;
    if (p->value_layout == MSDA_VALUE_BLNC) return ((b * L + pixel) * H + h) * C + c; /* (B, L, N_h, C_h) */
    return ((b * H + h) * L + pixel) * C + c;                                        /* (B, N_h, L, C_h) */
}

int64_t ref_location_index(const msda_problem *p, int64_t b, int64_t q, int64_t h, int64_t l,
                           int64_t pt, int xy)
{
    const int64_t Q = p->num_queries, H = p->num_heads, NL = p->num_levels, P = p->num_points;
    if (p->locations_layout == MSDA_LOCATIONS_BQHLP2)   /* (B, N_q, N_h, N_l, N_p, 2) */
        return ((((b * Q + q) * H + h) * NL + l) * P + pt) * 2 + xy;
    return ((((b * 2 + xy) * Q + q) * H + h) * NL + l) * P + pt; /* (B, 2, N_q, N_h, N_l, N_p) */
}

int64_t ref_weight_index(const msda_problem *p, int64_t b, int64_t q, int64_t h, int64_t l, int64_t pt)
{
    return (((b * p->num_queries + q) * p->num_heads + h) * p->num_levels + l) * p->num_points + pt;
}

int64_t ref_output_index(const msda_problem *p, int64_t b, int64_t q, int64_t h, int64_t c)
{
    return ((b * p->num_queries + q) * p->num_heads + h) * p->channels + c;
}

/* One bilinear sample, per SEMANTICS.md "Forward". */
typedef struct sample {
    int live;                /* 0: contributes nothing (NaN, or far outside with zeros padding) */
    int64_t y0, x0;
    double fx, fy;
    double su, sv;           /* d(u)/dx, d(v)/dy */
    double du, dv;           /* du'/du, dv'/dv */
} sample;

/* One axis: normalised coordinate -> (index0, fraction, scale, clamp derivative). */
static int map_axis(double coord, int64_t size, const msda_problem *p,
                    int64_t *index0, double *frac, double *scale, double *deriv)
{
    if (isnan(coord)) return 0;
    double u;
    if (p->align_corners) {
        *scale = (double)(size - 1);
        u = size == 1 ? 0.0 : coord * (double)(size - 1);  /* W = 1: u is 0 for every x, even inf */
    } else {
        *scale = (double)size;
        u = coord * (double)size - 0.5;
    }
    const double last = (double)(size - 1);
    if (p->padding == MSDA_PADDING_BORDER) {
        *deriv = (u > 0.0 && u < last) ? 1.0 : 0.0;
        if (u < 0.0) u = 0.0;
        if (u > last) u = last;
    } else {
        *deriv = 1.0;
        /* Every corner out of bounds (also +-inf): contributes exactly 0. */
        if (!(u >= -1.0 && u < (double)size)) return 0;
    }
    const double f = floor(u);
    *index0 = (int64_t)f;
    *frac = u - f;
    return 1;
}

static sample make_sample(const msda_problem *p, double x, double y, int64_t height, int64_t width)
{
    sample s;
    memset(&s, 0, sizeof s);
    if (isnan(x) || isnan(y)) return s;
    if (!map_axis(x, width, p, &s.x0, &s.fx, &s.su, &s.du)) return s;
    if (!map_axis(y, height, p, &s.y0, &s.fy, &s.sv, &s.dv)) return s;
    s.live = 1;
    return s;
}

static int64_t level_start(const msda_problem *p, int64_t level)
{
    int64_t start = 0;
    for (int64_t l = 0; l < level; l++) start += p->spatial_shapes[2 * l] * p->spatial_shapes[2 * l + 1];
    return start;
}

/* V(i, j)[c], zero outside the level. */
static double corner_value(const msda_problem *p, const double *value, int64_t b, int64_t h, int64_t l,
                           int64_t i, int64_t j, int64_t c)
{
    const int64_t H = p->spatial_shapes[2 * l], W = p->spatial_shapes[2 * l + 1];
    if (i < 0 || i >= H || j < 0 || j >= W) return 0.0;
    return value[ref_value_index(p, b, level_start(p, l) + i * W + j, h, c)];
}

void ref_forward_d(const msda_problem *p, const double *value, const double *loc, const double *attn,
                   double *output)
{
    const int64_t B = p->batch, Q = p->num_queries, NH = p->num_heads, C = p->channels,
                  NL = p->num_levels, P = p->num_points;
    for (int64_t i = 0; i < ref_output_elements(p); i++) output[i] = 0.0;
    for (int64_t b = 0; b < B; b++)
    for (int64_t q = 0; q < Q; q++)
    for (int64_t h = 0; h < NH; h++)
    for (int64_t l = 0; l < NL; l++)
    for (int64_t pt = 0; pt < P; pt++) {
        const int64_t height = p->spatial_shapes[2 * l], width = p->spatial_shapes[2 * l + 1];
        const sample s = make_sample(p, loc[ref_location_index(p, b, q, h, l, pt, 0)],
                                     loc[ref_location_index(p, b, q, h, l, pt, 1)], height, width);
        if (!s.live) continue;
        const double a = attn[ref_weight_index(p, b, q, h, l, pt)];
        const double w00 = (1 - s.fy) * (1 - s.fx), w01 = (1 - s.fy) * s.fx,
                     w10 = s.fy * (1 - s.fx), w11 = s.fy * s.fx;
        for (int64_t c = 0; c < C; c++) {
            const double S = w00 * corner_value(p, value, b, h, l, s.y0, s.x0, c) +
                             w01 * corner_value(p, value, b, h, l, s.y0, s.x0 + 1, c) +
                             w10 * corner_value(p, value, b, h, l, s.y0 + 1, s.x0, c) +
                             w11 * corner_value(p, value, b, h, l, s.y0 + 1, s.x0 + 1, c);
            output[ref_output_index(p, b, q, h, c)] += a * S;
        }
    }
}

static void add_grad_value(const msda_problem *p, double *grad_value, int64_t b, int64_t h, int64_t l,
                           int64_t i, int64_t j, int64_t c, double g)
{
    const int64_t H = p->spatial_shapes[2 * l], W = p->spatial_shapes[2 * l + 1];
    if (i < 0 || i >= H || j < 0 || j >= W) return;
    grad_value[ref_value_index(p, b, level_start(p, l) + i * W + j, h, c)] += g;
}

void ref_backward_d(const msda_problem *p, const double *grad_output, const double *value,
                    const double *loc, const double *attn, double *grad_value, double *grad_loc,
                    double *grad_attn)
{
    const int64_t B = p->batch, Q = p->num_queries, NH = p->num_heads, C = p->channels,
                  NL = p->num_levels, P = p->num_points;
    for (int64_t i = 0; i < ref_value_elements(p); i++) grad_value[i] = 0.0;
    for (int64_t i = 0; i < ref_locations_elements(p); i++) grad_loc[i] = 0.0;
    for (int64_t i = 0; i < ref_weights_elements(p); i++) grad_attn[i] = 0.0;
    for (int64_t b = 0; b < B; b++)
    for (int64_t q = 0; q < Q; q++)
    for (int64_t h = 0; h < NH; h++)
    for (int64_t l = 0; l < NL; l++)
    for (int64_t pt = 0; pt < P; pt++) {
        const int64_t height = p->spatial_shapes[2 * l], width = p->spatial_shapes[2 * l + 1];
        const int64_t ix = ref_location_index(p, b, q, h, l, pt, 0);
        const int64_t iy = ref_location_index(p, b, q, h, l, pt, 1);
        const int64_t iw = ref_weight_index(p, b, q, h, l, pt);
        const sample s = make_sample(p, loc[ix], loc[iy], height, width);
        if (!s.live) continue;   /* contributes nothing: every gradient stays 0 */
        const double a = attn[iw];
        const double fx = s.fx, fy = s.fy;
        const double w00 = (1 - fy) * (1 - fx), w01 = (1 - fy) * fx, w10 = fy * (1 - fx), w11 = fy * fx;
        double dot_s = 0, dot_dx = 0, dot_dy = 0;
        for (int64_t c = 0; c < C; c++) {
            const double G = grad_output[ref_output_index(p, b, q, h, c)];
            const double v00 = corner_value(p, value, b, h, l, s.y0, s.x0, c);
            const double v01 = corner_value(p, value, b, h, l, s.y0, s.x0 + 1, c);
            const double v10 = corner_value(p, value, b, h, l, s.y0 + 1, s.x0, c);
            const double v11 = corner_value(p, value, b, h, l, s.y0 + 1, s.x0 + 1, c);
            dot_s += G * (w00 * v00 + w01 * v01 + w10 * v10 + w11 * v11);
            dot_dx += G * ((1 - fy) * (v01 - v00) + fy * (v11 - v10));
            dot_dy += G * ((1 - fx) * (v10 - v00) + fx * (v11 - v01));
            add_grad_value(p, grad_value, b, h, l, s.y0, s.x0, c, a * w00 * G);
            add_grad_value(p, grad_value, b, h, l, s.y0, s.x0 + 1, c, a * w01 * G);
            add_grad_value(p, grad_value, b, h, l, s.y0 + 1, s.x0, c, a * w10 * G);
            add_grad_value(p, grad_value, b, h, l, s.y0 + 1, s.x0 + 1, c, a * w11 * G);
        }
        grad_attn[iw] = dot_s;
        grad_loc[ix] = a * dot_dx * s.su * s.du;
        grad_loc[iy] = a * dot_dy * s.sv * s.dv;
    }
}

static double *widen(const float *src, int64_t n)
{
    double *dst = malloc((size_t)n * sizeof *dst);
    if (!dst) abort();
    for (int64_t i = 0; i < n; i++) dst[i] = (double)src[i];
    return dst;
}

void ref_forward(const msda_problem *p, const float *value, const float *sampling_locations,
                 const float *attention_weights, double *output)
{
    double *v = widen(value, ref_value_elements(p));
    double *s = widen(sampling_locations, ref_locations_elements(p));
    double *a = widen(attention_weights, ref_weights_elements(p));
    ref_forward_d(p, v, s, a, output);
    free(v); free(s); free(a);
}

void ref_backward(const msda_problem *p, const float *grad_output, const float *value,
                  const float *sampling_locations, const float *attention_weights,
                  double *grad_value, double *grad_sampling_locations, double *grad_attention_weights)
{
    double *g = widen(grad_output, ref_output_elements(p));
    double *v = widen(value, ref_value_elements(p));
    double *s = widen(sampling_locations, ref_locations_elements(p));
    double *a = widen(attention_weights, ref_weights_elements(p));
    ref_backward_d(p, g, v, s, a, grad_value, grad_sampling_locations, grad_attention_weights);
    free(g); free(v); free(s); free(a);
}
