/* Half-precision inputs widened to float32 (msda_widen_half) by bit operations on four lanes at a
 * time (src/simd.h: wasm SIMD, SSE2, NEON or the scalar twin, the same bits in each). */
#include "msda.h"
#include "simd.h"

#include <string.h>

/* binary16: the 15 low bits moved to float32's place (<< 13) are, read as a float32, the value
 * times 2^-112 (a subnormal half lands on a subnormal float32), so one exact multiply by 2^112
 * gives the magnitude. Exponent 31 (Inf, NaN with its payload) lands on 2^16 and up, keeping its
 * mantissa: ORing in float32's exponent 255 (one float compare picks those lanes; an integer one
 * measured 3x slower in wasm, as V8 lowers the unsigned 16-bit compare clang makes of it) makes
 * it Inf or the NaN. Then the sign goes back. bfloat16 is float32's upper half. */
static inline v4i widen4(v4i h, int bfloat16)
{
    if (bfloat16) return v4i_shl(h, 16);
    const v4i mag = v4i_and(h, v4i_splat(0x7fff));
    const v4 scaled = v4_mul(v4i_as_v4(v4i_shl(mag, 13)), v4_splat(0x1p112f));
    const v4i special = v4_ge(scaled, v4_splat(65536.0f));   /* the largest finite half is 65504 */
    const v4i top = v4i_or(v4i_shl(v4i_xor(h, mag), 16), v4i_and(special, v4i_splat(0x7f800000)));
    return v4i_or(v4_as_v4i(scaled), top);
}

void msda_widen_half(const uint16_t *src, float *dst, int64_t n, int bfloat16)
{
    /* In place, lanes i..i+3 are read before their 16 bytes are written, and those bytes end at or
     * before the first unread half (byte 2n + 2i + 8, since i + 4 <= n). Every access is a memcpy,
     * so nothing assumes src and dst apart. */
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const v4i w = widen4(v4i_load_u16(src + i), bfloat16);
        memcpy(dst + i, &w, sizeof w);
    }
    if (i < n) {   /* the last one to three through the same lanes */
        uint16_t h[4] = {0, 0, 0, 0};
        memcpy(h, src + i, (size_t)(n - i) * sizeof *h);
        const v4i w = widen4(v4i_load_u16(h), bfloat16);
        memcpy(dst + i, &w, (size_t)(n - i) * sizeof *dst);
    }
}
