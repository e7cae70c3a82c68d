/* The kernel entry points the rest of the library calls (internal.h), compiled once: how many
 * work units a problem has, and which ISA's copy of the kernels (src/kernel/, built by
 * kernel_base.c, kernel_scalar.c, kernel_avx2.c, kernel_avx512.c) runs them. */
#include "internal.h"
#include "simd.h"

#include <string.h>

int64_t msda__forward_units(const msda_plan *p)
{
    return p->batch * p->num_heads * ((p->num_queries + MSDA_FORWARD_QUERY_BLOCK - 1) / MSDA_FORWARD_QUERY_BLOCK);
}

int64_t msda__backward_units(const msda_plan *p)
{
    return p->batch * p->num_levels * p->num_heads;
}

/* ---- the ISA, chosen once ----
 * AVX2 if this CPU has it, else AVX-512 if it has that, else the baseline (cpuid, through the
 * compiler's builtin; F16C from cpuid.h), unless MSDA_ISA names one.
 * Every ISA gives the same bits (simd.h), so the choice is only about speed. */
#include <stdatomic.h>
#include <stdlib.h>

typedef void (*msda_range_fn)(const msda_plan *, const msda_tensors *, int64_t, int64_t);
typedef struct msda_isa_entry {
    const char *name;
    msda_range_fn forward, backward;
    int (*fast_dtypes)(void);   /* kernel/kernels.h: bit d, fast code for value rows of msda_dtype d */
} msda_isa_entry;

#define MSDA_DECLARE_ISA(isa)                                                                               \
    void msda__forward_range_##isa(const msda_plan *p, const msda_tensors *t, int64_t begin, int64_t end);  \
    void msda__backward_range_##isa(const msda_plan *p, const msda_tensors *t, int64_t begin, int64_t end); \
    int msda__fast_dtypes_##isa(void);
MSDA_DECLARE_ISA(base)
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__EMSCRIPTEN__) && !defined(MSDA_NO_SIMD)
#define MSDA_X86 1
#include <cpuid.h>
#define MSDA_SCALAR_TOO 1
#define MSDA_BASE_NAME "sse2"
MSDA_DECLARE_ISA(scalar)
MSDA_DECLARE_ISA(avx2)
MSDA_DECLARE_ISA(avx512)
#elif defined(__EMSCRIPTEN__)
#define MSDA_BASE_NAME (MSDA_SIMD ? "wasm-simd" : "wasm-scalar")
#elif MSDA_SIMD && defined(__ARM_NEON)
#define MSDA_BASE_NAME "neon"
#if defined(__aarch64__)   /* kernel_scalar.c: MSDA_ISA=scalar, as on x86 */
#define MSDA_SCALAR_TOO 1
MSDA_DECLARE_ISA(scalar)
#endif
#else
#define MSDA_BASE_NAME "scalar"
#endif

static const msda_isa_entry msda_isas[] = {
#ifdef MSDA_SCALAR_TOO
    {"scalar", msda__forward_range_scalar, msda__backward_range_scalar, msda__fast_dtypes_scalar},
#endif
    {MSDA_BASE_NAME, msda__forward_range_base, msda__backward_range_base, msda__fast_dtypes_base},
#ifdef MSDA_X86
    {"avx2", msda__forward_range_avx2, msda__backward_range_avx2, msda__fast_dtypes_avx2},
    {"avx512", msda__forward_range_avx512, msda__backward_range_avx512, msda__fast_dtypes_avx512},
#endif
};
#define MSDA_ISA_COUNT ((int)(sizeof msda_isas / sizeof msda_isas[0]))
#ifdef MSDA_SCALAR_TOO
#define MSDA_ISA_BASE 1
#else
#define MSDA_ISA_BASE 0
#endif

static int isa_available(int i)
{
#ifdef MSDA_X86
    __builtin_cpu_init();
    /* F16C for float16 values (simd.h); every CPU with AVX2 or AVX-512 known has it. From
       CPUID: clang before 16 has no "f16c" in __builtin_cpu_supports */
    unsigned eax, ebx, ecx, edx;
    const int f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
    if (strcmp(msda_isas[i].name, "avx2") == 0) return f16c && __builtin_cpu_supports("avx2") != 0;
    if (strcmp(msda_isas[i].name, "avx512") == 0) return f16c && __builtin_cpu_supports("avx512f") != 0;
#endif
    return i >= 0 && i < MSDA_ISA_COUNT;
}

/* MSDA_ISA; WebAssembly has one ISA a module, and getenv would import WASI */
static const char *isa_env(void)
{
#ifdef __EMSCRIPTEN__
    return NULL;
#else
    return getenv("MSDA_ISA");
#endif
}

/* -2: not chosen yet; -1: MSDA_ISA names nothing this CPU has */
static _Atomic int msda_isa_index = -2;

static int isa_choose(void)
{
    int i = atomic_load_explicit(&msda_isa_index, memory_order_relaxed);
    if (i != -2) return i;
    const char *want = isa_env();
    if (want && *want) {
        i = -1;
        for (int k = 0; k < MSDA_ISA_COUNT; k++)
            if (strcmp(want, msda_isas[k].name) == 0 && isa_available(k)) i = k;
    } else {   /* AVX2 where the CPU has it: AVX-512 measured slower here (docs/benchmark.md, per ISA) */
        i = MSDA_ISA_BASE;
        if (MSDA_ISA_BASE + 1 < MSDA_ISA_COUNT && isa_available(MSDA_ISA_BASE + 1)) i = MSDA_ISA_BASE + 1;
        else if (MSDA_ISA_BASE + 2 < MSDA_ISA_COUNT && isa_available(MSDA_ISA_BASE + 2)) i = MSDA_ISA_BASE + 2;
    }
    atomic_store_explicit(&msda_isa_index, i, memory_order_relaxed);
    return i;
}

const char *msda_isa(void)
{
    const int i = isa_choose();
    return i >= 0 ? msda_isas[i].name : NULL;
}

const char *msda_isa_list(void)
{
#ifdef MSDA_X86
    static const char *const lists[4] = {"scalar sse2", "scalar sse2 avx2", "scalar sse2 avx512", "scalar sse2 avx2 avx512"};
    return lists[isa_available(2) + 2 * isa_available(3)];
#elif defined(MSDA_SCALAR_TOO)
    return "scalar " MSDA_BASE_NAME;
#else
    return MSDA_BASE_NAME;
#endif
}

int msda_fast_dtype(msda_dtype dtype)
{
    const int i = isa_choose();
    if (i < 0 || (unsigned)dtype > MSDA_BFLOAT16) return 0;
    return msda_isas[i].fast_dtypes() >> dtype & 1;
}

int msda__set_isa(const char *name)
{
    for (int k = 0; k < MSDA_ISA_COUNT; k++)
        if (name && strcmp(name, msda_isas[k].name) == 0 && isa_available(k)) {
            atomic_store(&msda_isa_index, k);
            return 1;
        }
    return 0;
}

msda_status msda__isa_check(msda_error *err)
{
    if (isa_choose() >= 0) return MSDA_OK;
    msda__set_error(err, MSDA_ERR_INVALID_OPTION, "MSDA_ISA is '%.16s', expected one of this CPU's: %s (or unset)",
                    isa_env() ? isa_env() : "", msda_isa_list());
    return MSDA_ERR_INVALID_OPTION;
}

void msda__forward_range(const msda_plan *p, const msda_tensors *t, int64_t begin, int64_t end)
{
    const int i = isa_choose();
    msda_isas[i >= 0 ? i : MSDA_ISA_BASE].forward(p, t, begin, end);
}

void msda__backward_range(const msda_plan *p, const msda_tensors *t, int64_t begin, int64_t end)
{
    const int i = isa_choose();
    msda_isas[i >= 0 ? i : MSDA_ISA_BASE].backward(p, t, begin, end);
}
