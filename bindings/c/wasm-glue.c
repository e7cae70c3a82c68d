/* WebAssembly entry points, compiled only into dist/msda-*.wasm. JS passes a flat int64
 * problem description (problem_desc.h; its value_dtype says whether value holds float32 or
 * half-precision bits the kernels widen as they read them) and heap pointers; a failing call
 * leaves its status name and message for msda_wasm_error_message(). */
#include "msda.h"
#include "problem_desc.h"

#include <emscripten/emmalloc.h>
#include <stddef.h>
#include <stdint.h>

/* One instance runs one call at a time, so a single error slot is enough. */
static msda_error last_error;

int msda_wasm_forward(const int64_t *desc, int desc_count, const void *value, const float *sampling_locations,
                      const float *attention_weights, float *output);
int msda_wasm_backward(const int64_t *desc, int desc_count, const float *grad_output, const void *value,
                       const float *sampling_locations, const float *attention_weights, float *grad_value,
                       float *grad_sampling_locations, float *grad_attention_weights);
int msda_wasm_fast_dtype(int dtype);
void msda_wasm_widen_half(const uint16_t *src, float *dst, size_t n, int bfloat16);
const char *msda_wasm_error_message(void);
const char *msda_wasm_status_name(int status);
size_t msda_wasm_heap_in_use(void);
int msda_wasm_simd(void);
size_t msda_wasm_heap_base(void);

int msda_wasm_forward(const int64_t *desc, int desc_count, const void *value, const float *sampling_locations,
                      const float *attention_weights, float *output)
{
    msda_problem p;
    msda_status st = msda_problem_from_desc(desc, desc_count, &p, &last_error);
    if (st == MSDA_OK) st = msda_forward(&p, value, sampling_locations, attention_weights, output, &last_error);
    return (int)st;
}

int msda_wasm_backward(const int64_t *desc, int desc_count, const float *grad_output, const void *value,
                       const float *sampling_locations, const float *attention_weights, float *grad_value,
                       float *grad_sampling_locations, float *grad_attention_weights)
{
    msda_problem p;
    msda_status st = msda_problem_from_desc(desc, desc_count, &p, &last_error);
    if (st == MSDA_OK)
        st = msda_backward(&p, grad_output, value, sampling_locations, attention_weights, grad_value,
                           grad_sampling_locations, grad_attention_weights, &last_error);
    return (int)st;
}

/* n elements: a size_t, as JS passes a number (an int64_t would be a BigInt). */
void msda_wasm_widen_half(const uint16_t *src, float *dst, size_t n, int bfloat16)
{
    msda_widen_half(src, dst, (int64_t)n, bfloat16);
}

/* msda_fast_dtype: which value dtypes this module's kernels read as they are (core/half.js). */
int msda_wasm_fast_dtype(int dtype) { return msda_fast_dtype((msda_dtype)dtype); }

const char *msda_wasm_error_message(void) { return last_error.message; }

const char *msda_wasm_status_name(int status) { return msda_status_string((msda_status)status); }

/* Bytes handed out by malloc and not yet freed: lets tests prove that no call leaks. */
size_t msda_wasm_heap_in_use(void)
{
    return emmalloc_dynamic_heap_size() - emmalloc_free_dynamic_memory();
}

/* The first address malloc can hand out: below it are the static data and the C stack. */
size_t msda_wasm_heap_base(void)
{
    extern unsigned char __heap_base;
    return (size_t)&__heap_base;
}

/* Which build this is, so a module passed in by the caller reports it truthfully. */
int msda_wasm_simd(void)
{
#ifdef __wasm_simd128__
    return 1;
#else
    return 0;
#endif
}
