/* Half-precision inputs widened to float32 (msda_widen_half) by bit operations on four lanes at a
 * time (src/simd.h's v4i_widen_half: wasm SIMD, SSE2, NEON or the scalar twin, the same bits in
 * each; the kernels widen half-precision value rows on load by the same rule). */
#include "msda.h"
#include "simd.h"

#include <string.h>

void msda_widen_half(const uint16_t *src, float *dst, int64_t n, int bfloat16)
{
    /* In place, lanes i..i+3 are read before their 16 bytes are written, and those bytes end at or
     * before the first unread half (byte 2n + 2i + 8, since i + 4 <= n). Every access is a memcpy,
     * so nothing assumes src and dst apart. */
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const v4i w = v4i_widen_half(v4i_load_s16(src + i), bfloat16);
        memcpy(dst + i, &w, sizeof w);
    }
    if (i < n) {   /* the last one to three through the same lanes */
        uint16_t h[4] = {0, 0, 0, 0};
        memcpy(h, src + i, (size_t)(n - i) * sizeof *h);
        const v4i w = v4i_widen_half(v4i_load_s16(h), bfloat16);
        memcpy(dst + i, &w, (size_t)(n - i) * sizeof *dst);
    }
}
