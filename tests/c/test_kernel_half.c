/* Kernels on half-precision values (float16, bfloat16): the float32 call's bits on the same
 * values, on every ISA this CPU has. */
#include "internal.h"
#include "threads.h"
#include "kernel_check.h"
#include "reference.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- half-precision values ----
 * A value of half-precision bits (value_dtype), read by the kernels as it is, gives the float32
 * call's bits on the same values, on every ISA this CPU has. */
static int half_calls_agree(const tu_case *tc, const uint16_t *bits, int bfloat16, const char *what)
{
    float *out[2], *gv[2], *gl[2], *ga[2];
    msda_problem hp = tc->p;
    hp.value_dtype = bfloat16 ? MSDA_BFLOAT16 : MSDA_FLOAT16;
    msda_error err;
    int ok = 1;
    for (int k = 0; k < 2; k++) {
        out[k] = tu_floats(tc->output_elements); gv[k] = tu_floats(tc->value_elements);
        gl[k] = tu_floats(tc->locations_elements); ga[k] = tu_floats(tc->weights_elements);
        const msda_problem *p = k ? &hp : &tc->p;
        const void *value = k ? (const void *)bits : (const void *)tc->value;
        ok &= tu_check(msda_forward(p, value, tc->sampling_locations, tc->attention_weights, out[k], &err) == MSDA_OK &&
                       msda_backward(p, tc->grad_output, value, tc->sampling_locations, tc->attention_weights, gv[k],
                                     gl[k], ga[k], &err) == MSDA_OK,
                       "%s [%s]: refused: %s", what, tu_case_describe(tc), err.message);
    }
    if (ok) {
        const struct { const char *name; float *const *x; int64_t n; } outs[] = {
            {"output", out, tc->output_elements}, {"grad_value", gv, tc->value_elements},
            {"grad_sampling_locations", gl, tc->locations_elements}, {"grad_attention_weights", ga, tc->weights_elements},
        };
        for (int i = 0; i < 4; i++)
            ok &= tu_check(memcmp(outs[i].x[0], outs[i].x[1], (size_t)outs[i].n * sizeof(float)) == 0,
                           "%s (%s value, ISA %s): %s differs from the float32 call's [%s]", what,
                           bfloat16 ? "bfloat16" : "float16", msda_isa(), outs[i].name, tu_case_describe(tc));
    }
    for (int k = 0; k < 2; k++) { free(out[k]); free(gv[k]); free(gl[k]); free(ga[k]); }
    return ok;
}

/* half_calls_agree on every ISA this CPU has (the library's own choice restored after). */
static void half_on_every_isa(const tu_case *tc, const uint16_t *bits, int bfloat16, const char *what)
{
    char list[128], chosen[32];
    snprintf(list, sizeof list, "%s", msda_isa_list());
    snprintf(chosen, sizeof chosen, "%s", msda_isa());
    for (char *isa = strtok(list, " "); isa; isa = strtok(NULL, " ")) {
        tu_check(msda__set_isa(isa), "%s: ISA %s is listed but cannot be set", what, isa);
        half_calls_agree(tc, bits, bfloat16, what);
    }
    msda__set_isa(chosen);
}

/* msda_fast_dtype on every ISA this CPU has: float32 always, both half dtypes on AVX2 (F16C), none
 * elsewhere natively (kernel/kernels.h's MSDA_FAST_*), nothing outside msda_dtype. */
static void test_fast_dtype(void)
{
    char list[128], chosen[32];
    snprintf(list, sizeof list, "%s", msda_isa_list());
    snprintf(chosen, sizeof chosen, "%s", msda_isa());
    for (char *isa = strtok(list, " "); isa; isa = strtok(NULL, " ")) {
        msda__set_isa(isa);
        const int half = strcmp(isa, "avx2") == 0;
        tu_check(msda_fast_dtype(MSDA_FLOAT32) == 1 && msda_fast_dtype(MSDA_FLOAT16) == half &&
                     msda_fast_dtype(MSDA_BFLOAT16) == half,
                 "msda_fast_dtype on %s: float32 %d, float16 %d, bfloat16 %d, expected 1, %d, %d", isa,
                 msda_fast_dtype(MSDA_FLOAT32), msda_fast_dtype(MSDA_FLOAT16), msda_fast_dtype(MSDA_BFLOAT16), half, half);
        tu_check(msda_fast_dtype((msda_dtype)3) == 0 && msda_fast_dtype((msda_dtype)-1) == 0,
                 "msda_fast_dtype on %s: a dtype outside msda_dtype is not fast", isa);
    }
    msda__set_isa(chosen);
}

/* Random cases of every combination (every other one with NaN and Inf values and an infinite
 * weight: the forward's exact path; some with more threads than heads: split heads), in both
 * half formats. */
static void test_half_values(void)
{
    for (int seed = 0; seed < 2 * TU_COMBOS; seed++) {
        tu_case tc;
        tu_case_random(&tc, 120000 + (uint64_t)seed, seed % TU_COMBOS);
        if (seed % 2) {
            tu_rng rng;
            tu_rng_seed(&rng, 120000 + (uint64_t)seed);
            tc.value[tu_int(&rng, 0, tc.value_elements - 1)] = NAN;
            tc.value[tu_int(&rng, 0, tc.value_elements - 1)] = -INFINITY;
            tc.attention_weights[tu_int(&rng, 0, tc.weights_elements - 1)] = INFINITY;
        }
        if (seed % 3 == 0) tc.p.threads = (int)(3 * tc.p.batch * tc.p.num_heads);
        float *original = tu_floats(tc.value_elements);
        memcpy(original, tc.value, (size_t)tc.value_elements * sizeof(float));
        for (int bf = 0; bf < 2; bf++) {
            memcpy(tc.value, original, (size_t)tc.value_elements * sizeof(float));
            uint16_t *bits = tu_case_half_value(&tc, bf);
            half_on_every_isa(&tc, bits, bf, "half-precision value");
            free(bits);
        }
        free(original);
        tu_case_free(&tc);
    }
}

/* Every one of the 65,536 bit patterns as a value element, each alone in an output element: one
 * 1 x 1 level sampled at its pixel's centre with weight 1, so output[h, c] = value[h, c] (NaNs
 * canonical); C = 63 reaches every channel path (32-channel blocks, 16, 8, 4, the last 3). */
static void test_half_patterns(void)
{
    static const int64_t shapes[] = {1, 1};
    const int64_t H = 1041, C = 63;   /* 65,583 elements: every pattern, the first 47 twice */
    for (int bf = 0; bf < 2; bf++) {
        tu_case tc;
        tu_case_init(&tc, 130000, 1, 1, H, C, 1, 1, shapes, 0);
        tu_rng rng;
        tu_rng_seed(&rng, 130000);
        tu_case_fill(&tc, &rng, 0.5, 0.5);
        for (int64_t i = 0; i < tc.weights_elements; i++) tc.attention_weights[i] = 1.0f;
        uint16_t *bits = tu_xmalloc((size_t)tc.value_elements * sizeof *bits);
        for (int64_t i = 0; i < tc.value_elements; i++) bits[i] = (uint16_t)i;
        msda_widen_half(bits, tc.value, tc.value_elements, bf);
        half_on_every_isa(&tc, bits, bf, "every half-precision pattern");
        /* the output is the value itself: each element its own pattern's float32 */
        float *out = tu_floats(tc.output_elements);
        msda_problem hp = tc.p;
        hp.value_dtype = bf ? MSDA_BFLOAT16 : MSDA_FLOAT16;
        int64_t wrong = 0;
        if (msda_forward(&hp, bits, tc.sampling_locations, tc.attention_weights, out, NULL) == MSDA_OK) {
            for (int64_t i = 0; i < tc.value_elements; i++) {
                const float v = tc.value[i];
                wrong += !(v != v ? out[i] != out[i] : out[i] == v);
            }
        } else {
            wrong = -1;
        }
        tu_check(wrong == 0, "every %s pattern: the output is not the value itself (%lld wrong)",
                 bf ? "bfloat16" : "float16", (long long)wrong);
        free(out);
        free(bits);
        tu_case_free(&tc);
    }
}

int main(void)
{
    test_half_values();
    test_fast_dtype();
    test_half_patterns();
    return tu_finish();
}
