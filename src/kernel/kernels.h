/* src/kernel/: the forward and backward kernels, as headers that each ISA's translation unit
 * (src/kernel_base.c, kernel_scalar.c, kernel_avx2.c, kernel_avx512.c) includes once through this
 * file, after setting MSDA_KERNEL_ISA (the suffix of the two entry points it defines) and, for the
 * wide builds, MSDA_VW and MSDA_TARGET (the target attribute every function here is compiled
 * with, as libdeflate's ATTRIBUTES: "avx2,f16c"). The headers may use internal.h, simd.h and the C library only, and come in
 * this order: geometry.h (bilinear corners and weights, shared by both passes),
 * walks.h (the orders queries are walked in), forward.h, backward.h. The run-time choice between
 * the copies is not here: src/kernel_dispatch.c, compiled once.
 *
 * Bits do not depend on the build: every channel sums its terms in the same order in the
 * scalar and every SIMD build (simd.h), and a dot product over C channels is always four lane
 * partials over the first C - C % 4 channels, combined as (s0 + s1) + (s2 + s3), then the
 * remaining channels in order, whatever the vector width.
 *
 * Both passes walk (query, head) and, inside, the levels and the points four at a time: the
 * bilinear corners and weights of four points are computed in one go with the points as
 * vector lanes, then the channel work runs per point with the channels as vector lanes. */
#ifndef MSDA_KERNEL_ISA
#error "define MSDA_KERNEL_ISA before including kernel/kernels.h"
#endif
#include "../internal.h"

/* MSDA_TARGET over everything below, simd.h's helpers included; popped at the end of this file. */
#ifdef MSDA_TARGET
#define MSDA_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define MSDA_TARGET_PUSH(t) MSDA_PRAGMA(clang attribute push(__attribute__((target(t))), apply_to = function))
#define MSDA_TARGET_POP MSDA_PRAGMA(clang attribute pop)
#else
#define MSDA_TARGET_PUSH(t) MSDA_PRAGMA(GCC push_options) MSDA_PRAGMA(GCC target(t))
#define MSDA_TARGET_POP MSDA_PRAGMA(GCC pop_options)
#endif
MSDA_TARGET_PUSH(MSDA_TARGET)
#endif

#define MSDA_CAT2(a, b) a##_##b
#define MSDA_CAT(a, b) MSDA_CAT2(a, b)
#define MSDA_KFN(name) MSDA_CAT(name, MSDA_KERNEL_ISA)

#include "../simd.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#define MSDA_INLINE static inline __attribute__((always_inline))

/* The value kinds this copy has fast code for (msda_fast_dtype reports them, and halfRows in
 * bindings/core/half.js sends half rows there): float16 and bfloat16 in the AVX2 build (F16C),
 * bfloat16 in wasm SIMD. Other kinds run the forward's exact path and the backward's generic path
 * (one copy for every kind: the same bits, slower, less code); the bindings widen those values
 * up front. */
#if MSDA_F16C && MSDA_VW == 8
#define MSDA_FAST_F16 1
#define MSDA_FAST_BF16 1
#elif MSDA_SIMD && defined(__wasm_simd128__)
#define MSDA_FAST_F16 0
#define MSDA_FAST_BF16 1
#else
#define MSDA_FAST_F16 0
#define MSDA_FAST_BF16 0
#endif

#include "geometry.h"
#include "walks.h"
#include "forward.h"
#include "backward.h"

/* Bit d set: this copy has fast code for value rows of msda_dtype d (kernel_dispatch.c). */
int MSDA_KFN(msda__fast_dtypes)(void);
int MSDA_KFN(msda__fast_dtypes)(void)
{
    return 1 << MSDA_FLOAT32 | MSDA_FAST_F16 << MSDA_FLOAT16 | MSDA_FAST_BF16 << MSDA_BFLOAT16;
}

#ifdef MSDA_TARGET
MSDA_TARGET_POP
#endif
