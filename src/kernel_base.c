/* The kernels for the baseline ISA of the build: SSE2 on x86-64, NEON on arm64, wasm SIMD, or
 * plain floats (the scalar wasm module, or a build without SIMD). kernel_dispatch.c chooses
 * between this copy and the others at run time. Defines msda__forward_range_base and
 * msda__backward_range_base (src/kernel/forward.h, backward.h, named through MSDA_KFN). */
#define MSDA_KERNEL_ISA base
#include "kernel/kernels.h"
