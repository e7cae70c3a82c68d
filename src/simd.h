/* Four-lane float and int32 vectors behind a few inline helpers, with a scalar twin.
 * The SIMD build uses GCC/clang vector extensions, which become SSE2 natively and wasm SIMD
 * under -msimd128; the twin is four plain lanes. Every helper does the same IEEE operation
 * lane by lane in both, so both builds give the same bits. Define MSDA_NO_SIMD to force the
 * twin (the scalar wasm module gets it because it has no -msimd128).
 * Comparisons give int lanes of -1 (true) or 0. */
#ifndef MSDA_SIMD_H
#define MSDA_SIMD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if !defined(MSDA_NO_SIMD) && (defined(__wasm_simd128__) || defined(__SSE2__))
#define MSDA_SIMD 1

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

#undef MSDA_LANES_F
#undef MSDA_LANES_I
#endif

static inline v4i v4_isinf(v4 a) { return v4i_or(v4_eq(a, v4_splat(INFINITY)), v4_eq(a, v4_splat(-INFINITY))); }
static inline int v4i_any(v4i m)
{
    int32_t x[4];
    v4i_store(x, m);
    return (x[0] | x[1] | x[2] | x[3]) != 0;
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

#endif
