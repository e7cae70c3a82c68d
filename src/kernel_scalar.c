/* The kernels on plain floats (four lanes as structs, no vector instructions), for MSDA_ISA=scalar
 * on x86 and arm64: the same bits as every other ISA, which the tests check. Defines
 * msda__forward_range_scalar and msda__backward_range_scalar (src/kernel/forward.h, backward.h,
 * named through MSDA_KFN). */
#if ((defined(__x86_64__) || defined(__i386__)) || (defined(__aarch64__) && defined(__ARM_NEON))) && \
    !defined(__EMSCRIPTEN__) && !defined(MSDA_NO_SIMD)
#define MSDA_NO_SIMD 1
#define MSDA_KERNEL_ISA scalar
#include "kernel/kernels.h"
#else
typedef int msda_kernel_scalar_unused;   /* ISO C: no empty translation unit */
#endif
