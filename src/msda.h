/* ms-deform-attn: multi-scale deformable attention, forward and backward, in C11.
 *
 * What is computed is defined in SEMANTICS.md; this header is the whole public API.
 * The library never allocates, prints or aborts: callers own every buffer, and every
 * entry point validates its problem first and returns an msda_status.
 *
 * Typical use:
 *     msda_problem p;
 *     msda_problem_init(&p);
 *     p.batch = 1; p.num_queries = 300; p.num_heads = 8; p.channels = 32;
 *     p.num_levels = 4; p.num_points = 4;
 *     p.spatial_shapes = shapes;            // int64 [num_levels][2] rows (H, W)
 *     p.level_start_index = starts;         // int64 [num_levels]
 *     p.value_length = L;                   // sum of H*W
 *     msda_error err;
 *     if (msda_forward(&p, value, locations, weights, output, &err) != MSDA_OK)
 *         fprintf(stderr, "%s\n", err.message);
 */
#ifndef MSDA_H
#define MSDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MSDA_VERSION_MAJOR 0
#define MSDA_VERSION_MINOR 1
#define MSDA_VERSION_PATCH 0

typedef enum msda_status {
    MSDA_OK = 0,
    MSDA_ERR_NULL_POINTER = 1,    /* a required pointer is NULL */
    MSDA_ERR_INVALID_SIZE = 2,    /* a dimension or spatial shape is < 1 */
    MSDA_ERR_SHAPE_MISMATCH = 3,  /* value_length or level_start_index disagree with spatial_shapes */
    MSDA_ERR_INVALID_OPTION = 4,  /* an enum or flag outside its allowed values */
    MSDA_ERR_OVERFLOW = 5,        /* an element count or byte size does not fit in 64 bits / size_t */
    MSDA_ERR_OVERLAP = 6,         /* an output buffer overlaps an input or another output */
    MSDA_ERR_THREADS = 7          /* the thread pool could not be started */
} msda_status;

typedef enum msda_value_layout {
    MSDA_VALUE_BLNC = 0,          /* (B, L, N_h, C_h) */
    MSDA_VALUE_BNLC = 1           /* (B, N_h, L, C_h) */
} msda_value_layout;

typedef enum msda_locations_layout {
    MSDA_LOCATIONS_BQHLP2 = 0,    /* (B, N_q, N_h, N_l, N_p, 2) */
    MSDA_LOCATIONS_B2QHLP = 1     /* (B, 2, N_q, N_h, N_l, N_p) */
} msda_locations_layout;

typedef enum msda_padding {
    MSDA_PADDING_ZEROS = 0,       /* corners outside the level read as zero */
    MSDA_PADDING_BORDER = 1       /* coordinates clamp to the edge pixels */
} msda_padding;

/* The element type of value: float32 (const float *), or half-precision bits (const uint16_t *),
 * IEEE binary16 or bfloat16. Half values are widened exactly as the kernels read them, so the
 * outputs are the float32 call's bits on the same values; the value's rows take half the bytes. */
typedef enum msda_dtype {
    MSDA_FLOAT32 = 0,
    MSDA_FLOAT16 = 1,
    MSDA_BFLOAT16 = 2
} msda_dtype;

/* A problem description. Set every field (msda_problem_init gives the defaults of the
 * reference: BLNC, BQHLP2, align_corners off, zeros padding, one thread, float32 value). */
typedef struct msda_problem {
    int64_t batch;                      /* B   >= 1 */
    int64_t num_queries;                /* N_q >= 1 */
    int64_t num_heads;                  /* N_h >= 1 */
    int64_t channels;                   /* C_h >= 1, channels per head */
    int64_t num_levels;                 /* N_l >= 1 */
    int64_t num_points;                 /* N_p >= 1 */
    int64_t value_length;               /* L, must equal sum over levels of H*W */
    const int64_t *spatial_shapes;      /* [num_levels][2]: (H_l, W_l), each >= 1 */
    const int64_t *level_start_index;   /* [num_levels]: prefix sums of H*W, first 0 */
    msda_value_layout value_layout;
    msda_locations_layout locations_layout;
    int align_corners;                  /* 0 or 1 */
    msda_padding padding;
    int threads;                        /* >= 1; results do not depend on it */
    msda_dtype value_dtype;             /* what value points at (every other tensor is float32) */
} msda_problem;

/* Filled in by a failing call when the caller passes one: the status and a one-line
 * message naming the argument, the expected and the actual value. */
typedef struct msda_error {
    msda_status status;
    char message[256];
} msda_error;

/* Sets defaults: every size 0 (so it must be filled in), NULL arrays, BLNC, BQHLP2,
 * align_corners 0, zeros padding, 1 thread, MSDA_FLOAT32 value. */
void msda_problem_init(msda_problem *problem);

/* The status's name, e.g. "MSDA_ERR_SHAPE_MISMATCH"; "MSDA_UNKNOWN_STATUS" otherwise. */
const char *msda_status_string(msda_status status);

/* Checks the problem alone (no tensors): sizes, shapes, level starts, options and that every
 * tensor's element count and byte size fits. err may be NULL. */
msda_status msda_validate(const msda_problem *problem, msda_error *err);

/* Element counts of each tensor for a valid problem (0 when the problem is invalid). */
int64_t msda_value_elements(const msda_problem *problem);
int64_t msda_locations_elements(const msda_problem *problem);
int64_t msda_weights_elements(const msda_problem *problem);
int64_t msda_output_elements(const msda_problem *problem);

/* output (B, N_q, N_h*C_h) = the multi-scale deformable attention of value.
 * value:              per value_layout, of problem->value_dtype (a float *, or a uint16_t * of half bits)
 * sampling_locations: per locations_layout, x then y, normalised to [0, 1]
 * attention_weights:  (B, N_q, N_h, N_l, N_p)
 * output is overwritten; it must not overlap any input. err may be NULL. */
msda_status msda_forward(const msda_problem *problem,
                         const void *value,
                         const float *sampling_locations,
                         const float *attention_weights,
                         float *output,
                         msda_error *err);

/* Gradients of sum(grad_output * output) with respect to value, sampling_locations and
 * attention_weights, each in its input's shape and layout (value of problem->value_dtype, as
 * in msda_forward; the gradients are float32). All three outputs are
 * overwritten (not accumulated into) and must not overlap each other or any input.
 * err may be NULL. */
msda_status msda_backward(const msda_problem *problem,
                          const float *grad_output,
                          const void *value,
                          const float *sampling_locations,
                          const float *attention_weights,
                          float *grad_value,
                          float *grad_sampling_locations,
                          float *grad_attention_weights,
                          msda_error *err);

/* dst[i] = the float32 value of the half-precision bits src[i], for i < n: IEEE binary16 when
 * bfloat16 is 0, else bfloat16. Exact: subnormals are normalised, infinities kept, and a NaN keeps
 * its sign and payload (not quietened). In place too: src may be the upper half of dst's bytes,
 * (const uint16_t *)(dst + n) - n (where the JS bindings copy a half tensor's bits); no other
 * overlap. */
void msda_widen_half(const uint16_t *src, float *dst, int64_t n, int bfloat16);

/* The instruction set the kernels run on: on x86-64 "avx2" where the CPU has it (AVX-512 measured
 * slower for these kernels, so "avx512" only when asked for), else "sse2"; "neon" on arm64;
 * "wasm-simd" / "wasm-scalar" in WebAssembly; or the one the
 * environment variable MSDA_ISA names (read once, at the first call); NULL when MSDA_ISA names
 * one this CPU lacks (forward and backward then return MSDA_ERR_INVALID_OPTION). Every ISA
 * gives the same bits. msda_isa_list: this CPU's choices, separated by spaces. */
const char *msda_isa(void);
const char *msda_isa_list(void);

/* 1 when the kernels msda_isa() runs have fast code for value rows of `dtype`, read as they are
 * (half bits widened as each row is loaded): always MSDA_FLOAT32; MSDA_FLOAT16 and MSDA_BFLOAT16
 * on "avx2"; MSDA_BFLOAT16 on "wasm-simd". Else 0, and 0 for a dtype outside msda_dtype or when
 * msda_isa() is NULL: such a value still gives the same bits, by a slower path (the bindings
 * widen it up front instead). */
int msda_fast_dtype(msda_dtype dtype);

#ifdef __cplusplus
}
#endif

#endif /* MSDA_H */
