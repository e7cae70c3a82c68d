/* Would half-precision storage of value pay in the kernels? A measurement
 * before any kernel work: the encoder forward's gathers (BLNC, 8 heads x 32 channels, 4 levels x
 * 4 points, samples within +-4 pixels of each query's own pixel, as tests/bench/cases.js makes
 * them) written once and run with value stored as float32 and as float16 (widened on load:
 * F16C's vcvtph2ps natively, integer operations under wasm SIMD), the same loop otherwise;
 * next to the library's own msda_forward on the same float32 data. Prints one JSON line; times
 * are the minimum of 15 alternating runs (CPU time natively) of each, in ms.
 *
 *   make native && cc -O3 -std=c11 -mavx2 -mf16c -mfma -Isrc tests/bench/half_probe.c build/native/libmsda.a \
 *       -lm -pthread -o build/bench/half_probe && build/bench/half_probe
 *   make build/bench/package.json && NODE_PATH=/usr/share/nodejs emcc -O3 -std=c11 -msimd128 -Isrc \
 *       -sALLOW_MEMORY_GROWTH tests/bench/half_probe.c src/[a-z]*.c -o build/bench/half_probe.js && \
 *       node --no-experimental-fetch --no-liftoff build/bench/half_probe.js
 *
 * Measured on 75a52cc's kernels (2-vCPU Xeon, shared, load ~6; three runs each): the same loop
 * reads float16 1.26-1.34 x faster than float32 natively, and that float16 loop is 1.08-1.15 x
 * the library's own float32 forward; under wasm SIMD the exact integer widening makes the
 * float16 loop 2.4 x slower (0.41-0.42 x). So float16 storage would not reach the 1.3 x
 * on wasm at all, and natively only if it took the library's whole walk as it is; not built.
 */
#define _POSIX_C_SOURCE 199309L
#include "msda.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#define ISA "wasm-simd128"
#elif defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>
#define ISA "avx2+f16c"
#else
#error "build with -mavx2 -mf16c (native) or -msimd128 (emcc)"
#endif

enum { H = 8, C = 32, NL = 4, P = 4 };
static const int LEVELS[NL][2] = {{100, 167}, {50, 84}, {25, 42}, {13, 21}};

static double now_ms(void)
{
    struct timespec t;
#ifdef __EMSCRIPTEN__
    clock_gettime(CLOCK_MONOTONIC, &t); /* no CPU clock in wasm */
#else
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); /* CPU time: the machine is shared */
#endif
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static uint64_t state = 12345;
static float uniform(float lo, float hi)
{
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (float)(state >> 40) * (1.0f / 16777216.0f);
}

static uint16_t to_half(float f) /* round to nearest even; the data are normal numbers in [-1, 1] */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u, rest = u & 0x7fffffffu;
    if (rest < 0x38800000u) return (uint16_t)sign; /* below the normal range: not in these data */
    rest -= 0x38000000u;
    uint32_t keep = rest >> 13, tail = rest & 0x1fffu;
    if (tail > 0x1000u || (tail == 0x1000u && (keep & 1))) keep++;
    return (uint16_t)(sign | keep);
}

/* 32 channels of a value row, times w, into acc: float32 or float16 storage. */
#if defined(__wasm_simd128__)
typedef v128_t vec;
#define VN 4
static inline vec vzero(void) { return wasm_f32x4_splat(0); }
static inline vec vmadd(vec a, vec w, vec x) { return wasm_f32x4_add(a, wasm_f32x4_mul(w, x)); }
static inline void row32(vec *acc, float w, const float *row)
{
    const vec wv = wasm_f32x4_splat(w);
    for (int v = 0; v < C / VN; v++) acc[v] = vmadd(acc[v], wv, wasm_v128_load(row + VN * v));
}
/* exact binary16 -> float32 of 4 lanes held as u32: magnitude bits moved up and scaled by 2^112
 * (subnormals come out right), infinities and NaNs given the top exponent, the sign put back */
static inline vec widen4(v128_t h)
{
    const v128_t mag = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x7fff)), 13);
    v128_t f = wasm_f32x4_mul(mag, wasm_f32x4_splat(0x1p112f));
    const v128_t special = wasm_i32x4_ge(mag, wasm_i32x4_splat(0x0f800000));
    f = wasm_v128_or(f, wasm_v128_and(special, wasm_i32x4_splat(0x7f800000)));
    return wasm_v128_or(f, wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16));
}
static inline void row32h(vec *acc, float w, const uint16_t *row)
{
    const vec wv = wasm_f32x4_splat(w);
    for (int v = 0; v < C / 8; v++) {
        const v128_t h = wasm_v128_load(row + 8 * v);
        acc[2 * v] = vmadd(acc[2 * v], wv, widen4(wasm_u32x4_extend_low_u16x8(h)));
        acc[2 * v + 1] = vmadd(acc[2 * v + 1], wv, widen4(wasm_u32x4_extend_high_u16x8(h)));
    }
}
static inline void store(float *out, const vec *acc)
{
    for (int v = 0; v < C / VN; v++) wasm_v128_store(out + VN * v, acc[v]);
}
#else
typedef __m256 vec;
#define VN 8
static inline vec vzero(void) { return _mm256_setzero_ps(); }
static inline void row32(vec *acc, float w, const float *row)
{
    const vec wv = _mm256_set1_ps(w);
    for (int v = 0; v < C / VN; v++) acc[v] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(row + VN * v), acc[v]);
}
static inline void row32h(vec *acc, float w, const uint16_t *row)
{
    const vec wv = _mm256_set1_ps(w);
    for (int v = 0; v < C / VN; v++)
        acc[v] = _mm256_fmadd_ps(wv, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + VN * v))), acc[v]);
}
static inline void store(float *out, const vec *acc)
{
    for (int v = 0; v < C / VN; v++) _mm256_storeu_ps(out + VN * v, acc[v]);
}
#endif

/* The forward, zeros padding, align_corners false, BLNC / BQHLP2; half selects the storage. */
static void forward(int half, int64_t L, int64_t Q, const int64_t *starts, const void *value, const float *loc,
                    const float *w, float *out)
{
    for (int64_t q = 0; q < Q; q++)
        for (int h = 0; h < H; h++) {
            vec acc[C / VN];
            for (int v = 0; v < C / VN; v++) acc[v] = vzero();
            for (int l = 0; l < NL; l++) {
                const int Hl = LEVELS[l][0], Wl = LEVELS[l][1];
                for (int p = 0; p < P; p++) {
                    const int64_t s = ((q * H + h) * NL + l) * P + p;
                    const float u = loc[2 * s] * (float)Wl - 0.5f, v = loc[2 * s + 1] * (float)Hl - 0.5f;
                    if (!(u >= -1 && u < Wl && v >= -1 && v < Hl)) continue;
                    const float fu = floorf(u), fv = floorf(v), fx = u - fu, fy = v - fv, a = w[s];
                    const int x0 = (int)fu, y0 = (int)fv;
                    const float cw[4] = {a * (1 - fy) * (1 - fx), a * (1 - fy) * fx, a * fy * (1 - fx), a * fy * fx};
                    for (int k = 0; k < 4; k++) {
                        const int y = y0 + (k >> 1), x = x0 + (k & 1);
                        if (y < 0 || y >= Hl || x < 0 || x >= Wl) continue;
                        const int64_t at = ((starts[l] + (int64_t)y * Wl + x) * H + h) * C;
                        if (half) row32h(acc, cw[k], (const uint16_t *)value + at);
                        else row32(acc, cw[k], (const float *)value + at);
                    }
                }
            }
            store(out + (q * H + h) * C, acc);
        }
    (void)L;
}

int main(void)
{
    int64_t starts[NL], L = 0;
    for (int l = 0; l < NL; l++) { starts[l] = L; L += LEVELS[l][0] * LEVELS[l][1]; }
    const int64_t Q = L, samples = Q * H * NL * P;
    float *value = malloc((size_t)(L * H * C) * 4), *loc = malloc((size_t)samples * 8), *w = malloc((size_t)samples * 4);
    uint16_t *half = malloc((size_t)(L * H * C) * 2);
    float *out = malloc((size_t)(Q * H * C) * 4), *out_h = malloc((size_t)(Q * H * C) * 4), *out_lib = malloc((size_t)(Q * H * C) * 4);
    if (!value || !loc || !w || !half || !out || !out_h || !out_lib) return 1;
    for (int64_t i = 0; i < L * H * C; i++) {
        half[i] = to_half(uniform(-1, 1));
        /* the float32 run reads the same numbers (those a float16 file holds) */
        uint32_t m = (uint32_t)(half[i] & 0x7fff) << 13, bits = m ? m + 0x38000000u : 0;
        bits |= (uint32_t)(half[i] & 0x8000u) << 16;
        memcpy(&value[i], &bits, 4);
    }
    for (int64_t q = 0; q < Q; q++) {
        int l = 0;
        while (l + 1 < NL && q >= starts[l + 1]) l++;
        const int64_t pix = q - starts[l];
        const float rx = ((float)(pix % LEVELS[l][1]) + 0.5f) / (float)LEVELS[l][1];
        const float ry = ((float)(pix / LEVELS[l][1]) + 0.5f) / (float)LEVELS[l][0];
        for (int i = 0; i < H * NL * P; i++) {
            const int ll = (i / P) % NL;
            const int64_t s = q * H * NL * P + i;
            loc[2 * s] = rx + uniform(-4, 4) / (float)LEVELS[ll][1];
            loc[2 * s + 1] = ry + uniform(-4, 4) / (float)LEVELS[ll][0];
            w[s] = uniform(0, 1) / (NL * P);
        }
    }
    msda_problem p;
    msda_problem_init(&p);
    int64_t shapes[2 * NL];
    for (int l = 0; l < NL; l++) { shapes[2 * l] = LEVELS[l][0]; shapes[2 * l + 1] = LEVELS[l][1]; }
    p.batch = 1; p.num_queries = Q; p.num_heads = H; p.channels = C; p.num_levels = NL; p.num_points = P;
    p.value_length = L; p.spatial_shapes = shapes; p.level_start_index = starts;
    double best[3] = {1e30, 1e30, 1e30};
    msda_error e;
    for (int r = 0; r < 15; r++) {
        double t0 = now_ms();
        forward(0, L, Q, starts, value, loc, w, out);
        double t1 = now_ms();
        forward(1, L, Q, starts, half, loc, w, out_h);
        double t2 = now_ms();
        if (msda_forward(&p, value, loc, w, out_lib, &e) != MSDA_OK) { fprintf(stderr, "%s\n", e.message); return 1; }
        double t3 = now_ms();
        if (t1 - t0 < best[0]) best[0] = t1 - t0;
        if (t2 - t1 < best[1]) best[1] = t2 - t1;
        if (t3 - t2 < best[2]) best[2] = t3 - t2;
    }
    double diff = 0, lib = 0;
    for (int64_t i = 0; i < Q * H * C; i++) {
        diff = fmax(diff, fabs((double)out[i] - out_h[i]));
        lib = fmax(lib, fabs((double)out[i] - out_lib[i]));
    }
    printf("{\"probe\":\"half-storage\",\"isa\":\"%s\",\"config\":\"encoder\",\"fwd_f32_ms\":%.2f,\"fwd_f16_ms\":%.2f,"
           "\"f32_over_f16\":%.3f,\"library_fwd_ms\":%.2f,\"max_diff_f16_f32\":%g,\"max_diff_library\":%g}\n",
           ISA, best[0], best[1], best[0] / best[1], best[2], diff, lib);
    return 0;
}
