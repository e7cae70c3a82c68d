/* The kernels for x86 CPUs with AVX-512 (16 float lanes), chosen at run time by kernel_dispatch.c.
 * Defines msda__forward_range_avx512 and msda__backward_range_avx512 (src/kernel/forward.h,
 * backward.h, named through MSDA_KFN). The instruction set comes from MSDA_TARGET (kernels.h
 * applies it to every function it defines) rather than a compiler flag, so that every build that
 * compiles the library's sources in one command gets it (with F16C, for float16 values:
 * kernel_dispatch.c requires it too). Elsewhere: nothing. */
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__EMSCRIPTEN__) && !defined(MSDA_NO_SIMD)
#include "internal.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MSDA_KERNEL_ISA avx512
#define MSDA_VW 16
#define MSDA_TARGET "avx512f,f16c"
#include "kernel/kernels.h"
#else
typedef int msda_kernel_avx512_unused;   /* ISO C: no empty translation unit */
#endif
