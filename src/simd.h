/* Four-lane float and int32 vectors behind a few inline helpers, with a scalar twin, and a
 * float vector of the ISA's full width (vf, MSDA_VW lanes: 4, or 8 / 16 in the kernels built
 * for AVX2 / AVX-512) for the channel loops.
 * The SIMD build uses GCC/clang vector extensions, which become SSE2 (or AVX) natively, NEON on
 * arm64 and wasm SIMD under -msimd128; the twin is four plain lanes. Every helper does the same IEEE operation
 * lane by lane in both, so both builds give the same bits. Define MSDA_NO_SIMD to force the
 * twin (the scalar wasm module gets it because it has no -msimd128).
 * Comparisons give int lanes of -1 (true) or 0. */
#ifndef MSDA_SIMD_H
#define MSDA_SIMD_H

#include "msda.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if !defined(MSDA_NO_SIMD) && (defined(__wasm_simd128__) || defined(__SSE2__) || defined(__ARM_NEON))
#define MSDA_SIMD 1
#if defined(__aarch64__)
#include <arm_neon.h>   /* v4i_any */
#endif

typedef float v4 __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

static inline v4 v4_zero(void) { return (v4){0.0f, 0.0f, 0.0f, 0.0f}; }
static inline v4 v4_splat(float x) { return (v4){x, x, x, x}; }
static inline v4 v4_set(float a, float b, float c, float d) { return (v4){a, b, c, d}; }
/* memcpy: unaligned and free of aliasing questions; compiles to one load or store */
static inline v4 v4_load(const float *p) { v4 v; memcpy(&v, p, sizeof v); return v; }
static inline void v4_store(float *p, v4 v) { memcpy(p, &v, sizeof v); }
static inline v4 v4_add(v4 a, v4 b) { return a + b; }
static inline v4 v4_sub(v4 a, v4 b) { return a - b; }
static inline v4 v4_mul(v4 a, v4 b) { return a * b; }
static inline float v4_lane(v4 a, int i) { return a[i]; }
static inline v4i v4_lt(v4 a, v4 b) { return a < b; }
static inline v4i v4_le(v4 a, v4 b) { return a <= b; }
static inline v4i v4_gt(v4 a, v4 b) { return a > b; }
static inline v4i v4_ge(v4 a, v4 b) { return a >= b; }
static inline v4i v4_eq(v4 a, v4 b) { return a == b; }
static inline v4 v4_select(v4i m, v4 a, v4 b) { return (v4)((m & (v4i)a) | (~m & (v4i)b)); }
/* toward zero; only for lanes known to be within int32 range */
static inline v4i v4_trunc(v4 a) { return __builtin_convertvector(a, v4i); }
static inline v4 v4_abs(v4 a) { return (v4)((v4i)a & INT32_MAX); }   /* the sign bit cleared */
static inline v4 v4i_to_float(v4i a) { return __builtin_convertvector(a, v4); }

static inline v4i v4i_splat(int32_t x) { return (v4i){x, x, x, x}; }
static inline v4i v4i_set(int32_t a, int32_t b, int32_t c, int32_t d) { return (v4i){a, b, c, d}; }
static inline v4i v4i_add(v4i a, v4i b) { return a + b; }
static inline v4i v4i_mul(v4i a, v4i b) { return a * b; }
static inline v4i v4i_and(v4i a, v4i b) { return a & b; }
static inline v4i v4i_or(v4i a, v4i b) { return a | b; }
static inline v4i v4i_xor(v4i a, v4i b) { return a ^ b; }
static inline v4i v4i_lt(v4i a, v4i b) { return a < b; }
static inline void v4i_store(int32_t *p, v4i v) { memcpy(p, &v, sizeof v); }
static inline v4i v4i_shl(v4i a, int n) { return (v4i)((__attribute__((vector_size(16))) uint32_t)a << n); }
static inline v4i v4i_eq(v4i a, v4i b) { return a == b; }
/* four 16-bit patterns sign-extended: one widening load (wasm i32x4.load16x4_s, NEON vmovl, SSE2 unpack) */
static inline v4i v4i_load_s16(const uint16_t *p)
{
    __attribute__((vector_size(8))) int16_t h;
    memcpy(&h, p, sizeof h);
    return __builtin_convertvector(h, v4i);
}
static inline v4 v4i_as_v4(v4i a) { return (v4)a; }   /* the same bits */
static inline v4i v4_as_v4i(v4 a) { return (v4i)a; }

#else
#define MSDA_SIMD 0

typedef struct v4 { float x[4]; } v4;
typedef struct v4i { int32_t x[4]; } v4i;

#define MSDA_LANES_F(expr) { v4 r; for (int i = 0; i < 4; i++) r.x[i] = (expr); return r; }
#define MSDA_LANES_I(expr) { v4i r; for (int i = 0; i < 4; i++) r.x[i] = (expr); return r; }

static inline v4 v4_zero(void) MSDA_LANES_F(0.0f)
static inline v4 v4_splat(float s) MSDA_LANES_F(s)
static inline v4 v4_set(float a, float b, float c, float d) { v4 r = {{a, b, c, d}}; return r; }
static inline v4 v4_load(const float *p) MSDA_LANES_F(p[i])
static inline void v4_store(float *p, v4 v) { for (int i = 0; i < 4; i++) p[i] = v.x[i]; }
static inline v4 v4_add(v4 a, v4 b) MSDA_LANES_F(a.x[i] + b.x[i])
static inline v4 v4_sub(v4 a, v4 b) MSDA_LANES_F(a.x[i] - b.x[i])
static inline v4 v4_mul(v4 a, v4 b) MSDA_LANES_F(a.x[i] * b.x[i])
static inline float v4_lane(v4 a, int i) { return a.x[i]; }
static inline v4i v4_lt(v4 a, v4 b) MSDA_LANES_I(-(a.x[i] < b.x[i]))
static inline v4i v4_le(v4 a, v4 b) MSDA_LANES_I(-(a.x[i] <= b.x[i]))
static inline v4i v4_gt(v4 a, v4 b) MSDA_LANES_I(-(a.x[i] > b.x[i]))
static inline v4i v4_ge(v4 a, v4 b) MSDA_LANES_I(-(a.x[i] >= b.x[i]))
static inline v4i v4_eq(v4 a, v4 b) MSDA_LANES_I(-(a.x[i] == b.x[i]))
static inline v4 v4_select(v4i m, v4 a, v4 b) MSDA_LANES_F(m.x[i] ? a.x[i] : b.x[i])
static inline v4i v4_trunc(v4 a) MSDA_LANES_I((int32_t)a.x[i])
static inline v4 v4_abs(v4 a) MSDA_LANES_F(fabsf(a.x[i]))
static inline v4 v4i_to_float(v4i a) MSDA_LANES_F((float)a.x[i])

static inline v4i v4i_splat(int32_t s) MSDA_LANES_I(s)
static inline v4i v4i_set(int32_t a, int32_t b, int32_t c, int32_t d) { v4i r = {{a, b, c, d}}; return r; }
static inline v4i v4i_add(v4i a, v4i b) MSDA_LANES_I(a.x[i] + b.x[i])
static inline v4i v4i_mul(v4i a, v4i b) MSDA_LANES_I(a.x[i] * b.x[i])
static inline v4i v4i_and(v4i a, v4i b) MSDA_LANES_I(a.x[i] & b.x[i])
static inline v4i v4i_or(v4i a, v4i b) MSDA_LANES_I(a.x[i] | b.x[i])
static inline v4i v4i_xor(v4i a, v4i b) MSDA_LANES_I(a.x[i] ^ b.x[i])
static inline v4i v4i_lt(v4i a, v4i b) MSDA_LANES_I(-(a.x[i] < b.x[i]))
static inline void v4i_store(int32_t *p, v4i v) { for (int i = 0; i < 4; i++) p[i] = v.x[i]; }
static inline v4i v4i_shl(v4i a, int n) MSDA_LANES_I((int32_t)((uint32_t)a.x[i] << n))
static inline v4i v4i_eq(v4i a, v4i b) MSDA_LANES_I(-(a.x[i] == b.x[i]))
static inline v4i v4i_load_s16(const uint16_t *p) MSDA_LANES_I((int16_t)p[i])
static inline v4 v4i_as_v4(v4i a) { v4 r; memcpy(&r, &a, sizeof r); return r; }
static inline v4i v4_as_v4i(v4 a) { v4i r; memcpy(&r, &a, sizeof r); return r; }

#undef MSDA_LANES_F
#undef MSDA_LANES_I
#endif

/* ---- half-precision elements, widened exactly on load ----
 * s: the 16-bit patterns sign-extended to 32 bits. binary16: s << 13 puts the 15 low bits in
 * float32's place and copies of the sign in bits 28 to 31; keeping bit 31 of those, the lanes read as
 * float32 are the values times 2^-112 (a subnormal half lands on a subnormal float32), so one
 * exact multiply by 2^112 gives the value, its sign included. Exponent 31 (Inf, NaN with its
 * payload) lands on 2^16 and up, keeping its mantissa: ORing in float32's exponent 255 (the lanes
 * an integer compare of the exponent bits picks) makes it Inf or the NaN. Eight operations a
 * vector in all (an unsigned 16-bit compare, as clang makes of some other forms, V8 lowers slowly:
 * 3x in wasm). bfloat16 is float32's upper half: s << 16. */
static inline v4i v4i_widen_half(v4i s, int bfloat16)
{
    if (bfloat16) return v4i_shl(s, 16);
    const v4 scaled = v4_mul(v4i_as_v4(v4i_and(v4i_shl(s, 13), v4i_splat((int32_t)0x8fffe000u))), v4_splat(0x1p112f));
    const v4i special = v4i_eq(v4i_and(s, v4i_splat(0x7c00)), v4i_splat(0x7c00));
    return v4i_or(v4_as_v4i(scaled), v4i_and(special, v4i_splat(0x7f800000)));
}

/* Element kinds a kernel reads its value rows in (msda.h's msda_dtype): float32, or
 * half-precision bits widened as they are loaded, by the rule above. A constant after inlining. */
#define MSDA_ELEM_BYTES(dtype) ((dtype) == MSDA_FLOAT32 ? 4 : 2)

/* element i of p, of kind dtype, as a float32 */
static inline float f_load_as(const void *p, ptrdiff_t i, int dtype)
{
    if (dtype == MSDA_FLOAT32) return ((const float *)p)[i];
    const uint32_t h = ((const uint16_t *)p)[i];
    uint32_t bits = h << 16;
    if (dtype == MSDA_FLOAT16) {   /* v4i_widen_half's rule */
        const uint32_t shifted = (h & 0x8000u) << 16 | (h & 0x7fffu) << 13;
        float scaled;
        memcpy(&scaled, &shifted, sizeof scaled);
        scaled *= 0x1p112f;
        memcpy(&bits, &scaled, sizeof bits);
        bits |= (h & 0x7c00u) == 0x7c00u ? 0x7f800000u : 0u;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The x86 builds of 8 and 16 lanes (kernel_avx2.c, kernel_avx512.c, which require F16C) widen
 * binary16 with F16C's vcvtph2ps: exact, but it quietens a signalling NaN, which changes no output
 * (every output NaN is the canonical one, whatever NaNs went in). bfloat16 and the other builds
 * use the bit rule above. */
#if MSDA_SIMD && MSDA_VW > 4
#include <immintrin.h>
#define MSDA_F16C 1
#else
#define MSDA_F16C 0
#endif

/* elements i .. i + 3 of p, of kind dtype */
static inline v4 v4_load_as(const void *p, ptrdiff_t i, int dtype)
{
    if (dtype == MSDA_FLOAT32) return v4_load((const float *)p + i);
#if MSDA_F16C
    const __m128i h = _mm_loadl_epi64((const __m128i *)(const void *)((const uint16_t *)p + i));
    if (dtype == MSDA_FLOAT16) return (v4)_mm_cvtph_ps(h);
    return (v4)_mm_unpacklo_epi16(_mm_setzero_si128(), h);   /* each pattern above 16 zero bits */
#endif
    return v4i_as_v4(v4i_widen_half(v4i_load_s16((const uint16_t *)p + i), dtype == MSDA_BFLOAT16));
}

/* elements i .. i + 7 of p, of kind dtype, as two v4 (lo: i .. i + 3). bfloat16 takes one 16-byte
 * load and puts each pattern above 16 zero bits by two interleaves with zero (x86 punpcklwd /
 * punpckhwd; in wasm an i8x16.shuffle, which V8 lowers to those): three operations for eight
 * elements, against two widening loads and two shifts. */
static inline void v4_load2_as(const void *p, ptrdiff_t i, int dtype, v4 *lo, v4 *hi)
{
#if MSDA_F16C
    if (dtype == MSDA_BFLOAT16) {
        const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)p + i));
        *lo = (v4)_mm_unpacklo_epi16(_mm_setzero_si128(), h);
        *hi = (v4)_mm_unpackhi_epi16(_mm_setzero_si128(), h);
        return;
    }
#elif MSDA_SIMD && defined(__wasm_simd128__)
    if (dtype == MSDA_BFLOAT16) {
        typedef int16_t v8s __attribute__((vector_size(16)));
        v8s h;
        memcpy(&h, (const uint16_t *)p + i, sizeof h);
        const v8s z = {0, 0, 0, 0, 0, 0, 0, 0};
        *lo = (v4)__builtin_shufflevector(z, h, 0, 8, 1, 9, 2, 10, 3, 11);
        *hi = (v4)__builtin_shufflevector(z, h, 4, 12, 5, 13, 6, 14, 7, 15);
        return;
    }
#endif
    *lo = v4_load_as(p, i, dtype);
    *hi = v4_load_as(p, i + 4, dtype);
}

#if MSDA_F16C
typedef float v8 __attribute__((vector_size(32)));
static inline v8 v8_load_as(const void *p, ptrdiff_t i, int dtype)
{
    if (dtype == MSDA_FLOAT32) { v8 v; memcpy(&v, (const float *)p + i, sizeof v); return v; }
    const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)p + i));
    if (dtype == MSDA_FLOAT16) return (v8)_mm256_cvtph_ps(h);
    return (v8)_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
}
#if MSDA_VW == 16
typedef float v16 __attribute__((vector_size(64)));
static inline v16 v16_load_as(const void *p, ptrdiff_t i, int dtype)
{
    if (dtype == MSDA_FLOAT32) { v16 v; memcpy(&v, (const float *)p + i, sizeof v); return v; }
    const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)p + i));
    if (dtype == MSDA_FLOAT16) return (v16)_mm512_cvtph_ps(h);
    return (v16)_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
}
#endif
#endif

static inline v4i v4_isinf(v4 a) { return v4i_or(v4_eq(a, v4_splat(INFINITY)), v4_eq(a, v4_splat(-INFINITY))); }
/* any lane nonzero: one instruction where there is one (a predicate: the same on every ISA) */
static inline int v4i_any(v4i m)
{
#if MSDA_SIMD && defined(__wasm_simd128__)
    return __builtin_wasm_any_true_v128((__attribute__((vector_size(16))) long long)m);
#elif MSDA_SIMD && defined(__SSE2__)
    return __builtin_ia32_movmskps((__attribute__((vector_size(16))) float)m) != 0;
#elif MSDA_SIMD && defined(__aarch64__)
    return vmaxvq_u32((uint32x4_t)m) != 0;
#else
    int32_t x[4];
    v4i_store(x, m);
    return (x[0] | x[1] | x[2] | x[3]) != 0;
#endif
}

/* The one NaN every output holds (0x7fc00000, positive and quiet, as JavaScript writes it):
 * which NaN an operation returns depends on the ISA and on operand order. */
static inline float f_canonical_nan(void)
{
    const uint32_t bits = 0x7fc00000u;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
static inline float f_canonical(float x) { return x == x ? x : f_canonical_nan(); }
static inline v4 v4_canonical(v4 x) { return v4_select(v4_eq(x, x), x, v4_splat(f_canonical_nan())); }

/* acc + a * b, never fused (the build uses -ffp-contract=off; wasm SIMD has no FMA) */
static inline v4 v4_madd(v4 acc, v4 a, v4 b) { return v4_add(acc, v4_mul(a, b)); }

/* The canonical horizontal sum of a dot product's four lane partials. */
static inline float v4_sum(v4 a) { return (v4_lane(a, 0) + v4_lane(a, 1)) + (v4_lane(a, 2) + v4_lane(a, 3)); }

/* ---- wider vectors: vf (MSDA_VW lanes) and vb (the backward's, 4 or 8 lanes) ----
 * Channel loops run on them. A lane-wise result (a forward sum, a grad_value update) does not
 * depend on the width. A dot product does through its partial sums, so every width computes the
 * same four lane partials (partial j sums channels c = j mod 4 in order, over channels
 * 0 .. C - C % 4), combined as (s0 + s1) + (s2 + s3), then the last C % 4 channels in order:
 * 8 lanes form eight products at once and add them as two steps of four (vb_dot_step).
 * (Eight partials would let 8 lanes add in one step, but they cost the 4-lane builds a tenth
 * of their backward.) */
#ifndef MSDA_VW
#define MSDA_VW 4
#endif
/* The backward runs its channel loop on 4 lanes in every build: on AVX2 and AVX-512 here the
 * 8-lane loop (vb_dot_step below, the same bits) measured 5-10 % slower, being bound by memory,
 * not arithmetic. -DMSDA_BACKWARD_4=0 builds it, for measuring again. */
#ifndef MSDA_BACKWARD_4
#define MSDA_BACKWARD_4 1
#endif
#if MSDA_VW != 4 && MSDA_VW != 8 && MSDA_VW != 16
#error "MSDA_VW must be 4, 8 or 16"
#endif
#if MSDA_VW > 4
#define MSDA_SCALAR_REG(x) __asm__("" : "+r"(x))   /* x stays a scalar: nothing vectorises it */
#else
#define MSDA_SCALAR_REG(x) (void)0
#endif

#if MSDA_VW == 4
typedef v4 vf;
static inline vf vf_zero(void) { return v4_zero(); }
static inline vf vf_splat(float x) { return v4_splat(x); }
static inline vf vf_load(const float *p) { return v4_load(p); }
static inline vf vf_load_as(const void *p, ptrdiff_t i, int dtype) { return v4_load_as(p, i, dtype); }
static inline void vf_load2_as(const void *p, ptrdiff_t i, int dtype, vf *lo, vf *hi) { v4_load2_as(p, i, dtype, lo, hi); }
static inline void vf_store(float *p, vf v) { v4_store(p, v); }
static inline vf vf_add(vf a, vf b) { return v4_add(a, b); }
static inline vf vf_sub(vf a, vf b) { return v4_sub(a, b); }
static inline vf vf_mul(vf a, vf b) { return v4_mul(a, b); }
static inline vf vf_canonical(vf x) { return v4_canonical(x); }
/* 1 when every lane of x - x (summed over values) is 0: all those values were finite */
static inline int vf_zero_all(vf x) { return !v4i_any(v4i_xor(v4_eq(x, v4_zero()), v4i_splat(-1))); }
#else
typedef float vf __attribute__((vector_size(4 * MSDA_VW)));
typedef int32_t vfi __attribute__((vector_size(4 * MSDA_VW)));
static inline vf vf_zero(void) { return (vf){0}; }
static inline vf vf_splat(float x) { return x - (vf){0}; }
static inline vf vf_load(const float *p) { vf v; memcpy(&v, p, sizeof v); return v; }
#if MSDA_VW == 8
static inline vf vf_load_as(const void *p, ptrdiff_t i, int dtype) { return v8_load_as(p, i, dtype); }
#else
static inline vf vf_load_as(const void *p, ptrdiff_t i, int dtype) { return v16_load_as(p, i, dtype); }
#endif
static inline void vf_load2_as(const void *p, ptrdiff_t i, int dtype, vf *lo, vf *hi)
{
    *lo = vf_load_as(p, i, dtype);
    *hi = vf_load_as(p, i + MSDA_VW, dtype);
}
static inline void vf_store(float *p, vf v) { memcpy(p, &v, sizeof v); }
static inline vf vf_add(vf a, vf b) { return a + b; }
static inline vf vf_sub(vf a, vf b) { return a - b; }
static inline vf vf_mul(vf a, vf b) { return a * b; }
static inline vf vf_canonical(vf x)
{
    const vfi m = x == x;
    return (vf)((m & (vfi)x) | (~m & (vfi)vf_splat(f_canonical_nan())));
}
static inline int vf_zero_all(vf x)
{
    const vfi m = x == vf_zero();
    int32_t lanes[MSDA_VW], all = -1;
    memcpy(lanes, &m, sizeof m);
    for (int i = 0; i < MSDA_VW; i++) all &= lanes[i];
    return all != 0;
}
#endif
static inline vf vf_madd(vf acc, vf a, vf b) { return vf_add(acc, vf_mul(a, b)); }

#if MSDA_VW == 4 || MSDA_BACKWARD_4
#define MSDA_VB 4
typedef v4 vb;
static inline vb vb_splat(float x) { return v4_splat(x); }
static inline vb vb_load(const float *p) { return v4_load(p); }
static inline vb vb_load_as(const void *p, ptrdiff_t i, int dtype) { return v4_load_as(p, i, dtype); }
static inline void vb_store(float *p, vb v) { v4_store(p, v); }
static inline vb vb_madd(vb acc, vb a, vb b) { return v4_madd(acc, a, b); }
static inline vb vb_canonical(vb x) { return v4_canonical(x); }
/* s + the products g * v of one vb of channels, into the four lane partials */
static inline v4 vb_dot_step(v4 s, vb g, vb v) { return v4_madd(s, g, v); }
#else
#define MSDA_VB 8
typedef float vb __attribute__((vector_size(32)));
typedef int32_t vbi __attribute__((vector_size(32)));
static inline vb vb_splat(float x) { return x - (vb){0}; }
static inline vb vb_load(const float *p) { vb v; memcpy(&v, p, sizeof v); return v; }
static inline vb vb_load_as(const void *p, ptrdiff_t i, int dtype) { return v8_load_as(p, i, dtype); }
static inline void vb_store(float *p, vb v) { memcpy(p, &v, sizeof v); }
static inline vb vb_madd(vb acc, vb a, vb b) { return acc + a * b; }
static inline vb vb_canonical(vb x)
{
    const vbi m = x == x;
    return (vb)((m & (vbi)x) | (~m & (vbi)vb_splat(f_canonical_nan())));
}
/* eight products at once, added to the four partials as two steps of four channels: the
 * 4-lane order exactly */
static inline v4 vb_dot_step(v4 s, vb g, vb v)
{
    const vb prod = g * v;
    v4 lo, hi;
    memcpy(&lo, &prod, sizeof lo);
    memcpy(&hi, (const char *)&prod + sizeof lo, sizeof hi);
    return v4_add(v4_add(s, lo), hi);
}
#endif

#endif
