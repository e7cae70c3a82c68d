/* The kernels for x86 CPUs with AVX2 (8 float lanes), chosen at run time by kernel_dispatch.c.
 * The instruction set comes from a target pragma rather than a compiler flag, so that every
 * build that compiles the library's sources in one command gets it (with F16C, for float16 values:
 * kernel_dispatch.c requires it too). Elsewhere: nothing. */
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__EMSCRIPTEN__) && !defined(MSDA_NO_SIMD)
#include "internal.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MSDA_KERNEL_ISA avx2
#define MSDA_VW 8
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,f16c")
#endif
#include "kernel/kernels.h"
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#else
typedef int msda_kernel_avx2_unused;   /* ISO C: no empty translation unit */
#endif
