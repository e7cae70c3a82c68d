/* The probe's passes, over simd.h's vectors at the width of the including file (MSDA_VW):
 * what no kernel can skip for one sample of C = 32 channels, on 4 corner rows kept in L1 (a
 * small ring of rows, so no cache misses, no bounds checks, no layout strides):
 *   forward:  the bilinear weights, then out += (a w_k) * row_k over the channels;
 *   backward: the weights, d_k = <G, row_k>, grad_row_k += (a w_k) G, and the location and
 *             weight gradients from d_k.
 * A kernel near it has little left to remove but its memory traffic. */
#include "simd.h"

#include <math.h>
#include <stdint.h>

#define PROBE_C 32
#define PROBE_RING 64   /* rows in the ring: 8 KB of values, 8 KB of gradients */

static inline int probe_row(float x, float y, float *fx, float *fy)
{
    const float u = x * 167.0f - 0.5f, v = y * 100.0f - 0.5f, i = floorf(u), j = floorf(v);
    *fx = u - i;
    *fy = v - j;
    return ((int)i * 3 + (int)j) & (PROBE_RING - 4);
}

/* 16 samples (4 levels x 4 points) per (query, head), as the encoder */
static void PROBE_FN(forward)(const float *loc, int64_t samples, const float *ring, float *out)
{
    for (int64_t s0 = 0; s0 < samples; s0 += 16) {
        vf acc[PROBE_C / MSDA_VW];
        for (int v = 0; v < PROBE_C / MSDA_VW; v++) acc[v] = vf_zero();
        for (int64_t s = s0; s < s0 + 16; s++) {
            float fx, fy;
            const int r = probe_row(loc[2 * s], loc[2 * s + 1], &fx, &fy);
            const float a = 0.0625f, w[4] = {(1 - fy) * (1 - fx), (1 - fy) * fx, fy * (1 - fx), fy * fx};
            for (int k = 0; k < 4; k++) {
                const vf wk = vf_splat(a * w[k]);
                const float *row = ring + (r + k) * PROBE_C;
                for (int v = 0; v < PROBE_C / MSDA_VW; v++) acc[v] = vf_madd(acc[v], wk, vf_load(row + v * MSDA_VW));
            }
        }
        for (int v = 0; v < PROBE_C / MSDA_VW; v++) vf_store(out + (s0 / 16) * PROBE_C + v * MSDA_VW, acc[v]);
    }
}

static void PROBE_FN(backward)(const float *loc, int64_t samples, const float *ring, float *grad_ring,
                               const float *g, float *grad_loc, float *grad_weight)
{
    for (int64_t s = 0; s < samples; s++) {
        float fx, fy;
        const int r = probe_row(loc[2 * s], loc[2 * s + 1], &fx, &fy);
        const float a = 0.0625f, w[4] = {(1 - fy) * (1 - fx), (1 - fy) * fx, fy * (1 - fx), fy * fx};
        float d[4];
        for (int k = 0; k < 4; k++) {
            const float *row = ring + (r + k) * PROBE_C;
            float *grad_row = grad_ring + (r + k) * PROBE_C;
            const vb wk = vb_splat(a * w[k]);
            v4 part = v4_zero();
            for (int c = 0; c < PROBE_C; c += MSDA_VB) {
                const vb gc = vb_load(g + c);
                part = vb_dot_step(part, gc, vb_load(row + c));
                vb_store(grad_row + c, vb_madd(vb_load(grad_row + c), wk, gc));
            }
            d[k] = v4_sum(part);
        }
        grad_weight[s] = ((w[0] * d[0] + w[1] * d[1]) + w[2] * d[2]) + w[3] * d[3];
        grad_loc[2 * s] = a * ((1 - fy) * (d[1] - d[0]) + fy * (d[3] - d[2])) * 167.0f;
        grad_loc[2 * s + 1] = a * ((1 - fx) * (d[2] - d[0]) + fx * (d[3] - d[1])) * 100.0f;
    }
}
