/* The same bits on every ISA: runs a fixed battery of problems (the accuracy kinds: random
 * shapes and options, every channel count the vector paths split differently, encoder-style
 * one query per pixel, a long level; and non-finite ones: NaN payloads of both signs, +-Inf in
 * every tensor, infinite weights at pixel centres; one query per pixel in a random order, where
 * the backward's summation order comes from the locations) and prints one hash of all four outputs per
 * problem, and of the same problem with its value in float16 and in bfloat16 bits (value_dtype:
 * the kernels' half-precision rows). tests/c/isa_bits.sh compares the lines of every ISA this CPU has (natively, forced
 * one by one) and of the wasm SIMD and wasm scalar builds of this same file.
 *   isa_hashes ISA     run on ISA (native builds; "default" for the library's own choice)
 *   isa_hashes --list  print this CPU's ISAs
 *   isa_hashes --isa   print the ISA the library runs on (msda_isa: MSDA_ISA or its own choice) */
#include "internal.h"
#include "reference.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_floats(uint64_t h, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], sizeof bits);
        for (int b = 0; b < 4; b++) h = (h ^ (bits >> (8 * b) & 0xffu)) * 0x100000001b3ull;
    }
    return h;
}

static float bits_float(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static int cases = 0;

/* The hash of all four outputs of tc with value `value` of value_dtype `dtype`; 0 when refused. */
static uint64_t hash_case(const tu_case *tc, const void *value, msda_dtype dtype, msda_error *err)
{
    float *out = tu_floats(tc->output_elements), *gv = tu_floats(tc->value_elements),
          *gl = tu_floats(tc->locations_elements), *ga = tu_floats(tc->weights_elements);
    msda_problem p = tc->p;
    p.value_dtype = dtype;
    uint64_t h = 0;
    if (msda_forward(&p, value, tc->sampling_locations, tc->attention_weights, out, err) == MSDA_OK &&
        msda_backward(&p, tc->grad_output, value, tc->sampling_locations, tc->attention_weights, gv, gl, ga, err) ==
            MSDA_OK) {
        h = 0xcbf29ce484222325ull;
        h = hash_floats(h, out, tc->output_elements);
        h = hash_floats(h, gv, tc->value_elements);
        h = hash_floats(h, gl, tc->locations_elements);
        h = hash_floats(h, ga, tc->weights_elements);
    }
    free(out); free(gv); free(gl); free(ga);
    return h;
}

/* One line per problem: the hash of its outputs, then those of its value as float16 and as
 * bfloat16 bits (tu_case_half_value: read by the kernels as they are), each "=" when it equals
 * the float32 call's on the same values (else that call's hash too). */
static void run_case(const char *kind, tu_case *tc)
{
    msda_error err;
    const uint64_t h = hash_case(tc, tc->value, MSDA_FLOAT32, &err);
    if (h == 0) {
        printf("%s %d refused: %s\n", kind, cases++, err.message);
        return;
    }
    printf("%s %d C=%lld %s %016llx", kind, cases, (long long)tc->p.channels, tu_combo_name(&tc->p),
           (unsigned long long)h);
    float *original = tu_floats(tc->value_elements);
    memcpy(original, tc->value, (size_t)tc->value_elements * sizeof(float));
    for (int bf = 0; bf < 2; bf++) {
        uint16_t *bits = tu_case_half_value(tc, bf);
        const uint64_t wide = hash_case(tc, tc->value, MSDA_FLOAT32, &err),
                       half = hash_case(tc, bits, bf ? MSDA_BFLOAT16 : MSDA_FLOAT16, &err);
        if (half == wide) printf(" %s %016llx=", bf ? "bf16" : "f16", (unsigned long long)half);
        else printf(" %s %016llx!=%016llx", bf ? "bf16" : "f16", (unsigned long long)half, (unsigned long long)wide);
        memcpy(tc->value, original, (size_t)tc->value_elements * sizeof(float));
        free(bits);
    }
    free(original);
    printf("\n");
    cases++;
}

static void battery(void)
{
    /* accuracy kinds */
    for (int seed = 0; seed < 48; seed++) {
        /* as tu_case_random, with the draws sequenced (argument order differs between compilers) */
        static const int64_t random_channels[] = {1, 3, 5, 32, 33};
        tu_rng rng;
        tu_rng_seed(&rng, 7000 + (uint64_t)seed);
        const int64_t num_levels = tu_int(&rng, 1, 4);
        int64_t lv[2 * TU_MAX_LEVELS];
        for (int64_t l = 0; l < num_levels; l++) {
            lv[2 * l] = tu_int(&rng, 1, 9);
            lv[2 * l + 1] = tu_int(&rng, 1, 9);
        }
        const int64_t batch = tu_int(&rng, 1, 2), queries = tu_int(&rng, 1, 5), heads = tu_int(&rng, 1, 3);
        const int64_t ch = random_channels[tu_int(&rng, 0, 4)], points = tu_int(&rng, 1, 3);
        tu_case tc;
        tu_case_init(&tc, 7000 + (uint64_t)seed, batch, queries, heads, ch, num_levels, points, lv, seed % TU_COMBOS);
        tu_case_fill(&tc, &rng, -0.25, 1.25);
        run_case("random", &tc);
        tu_case_free(&tc);
    }
    static const int64_t channels[] = {4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 64, 67};
    static const int64_t shapes[] = {9, 13, 5, 7, 3, 4, 1, 2};
    for (int i = 0; i < 12; i++) {
        tu_case tc;
        tu_rng rng;
        tu_rng_seed(&rng, 7100 + (uint64_t)i);
        tu_case_init(&tc, 7100 + (uint64_t)i, 1, 9, 2, channels[i], 4, 4, shapes, (i * 5) % TU_COMBOS);
        tu_case_fill(&tc, &rng, -0.2, 1.2);
        run_case("channels", &tc);
        tu_case_free(&tc);
    }
    for (int combo = 0; combo < TU_COMBOS; combo += 5) {   /* one query per pixel, in pixel order */
        static const int64_t pyramid[] = {17, 11, 9, 6, 5, 3, 3, 2};
        tu_case tc;
        tu_rng rng;
        tu_rng_seed(&rng, 7200 + (uint64_t)combo);
        tu_case_init(&tc, 7200 + (uint64_t)combo, 1, 187 + 54 + 15 + 6, 2, 32, 4, 4, pyramid, combo);
        tu_case_fill(&tc, &rng, -0.1, 1.1);
        run_case("encoder", &tc);
        tu_case_free(&tc);
    }
    for (int combo = 1; combo < TU_COMBOS; combo += 4) {   /* one query per pixel, in a random order */
        static const int64_t pyramid[] = {17, 11, 9, 6, 5, 3, 3, 2};
        const int64_t L = 187 + 54 + 15 + 6, H = 2, NL = 4, P = 4;
        tu_case tc;
        tu_rng rng;
        tu_rng_seed(&rng, 7250 + (uint64_t)combo);
        tu_case_init(&tc, 7250 + (uint64_t)combo, 2, L, H, 32 + combo % 3, NL, P, pyramid, combo);
        tu_case_fill(&tc, &rng, 0, 1);
        int64_t perm[187 + 54 + 15 + 6];
        for (int64_t q = 0; q < L; q++) perm[q] = q;
        for (int64_t i = L - 1; i > 0; i--) {
            const int64_t j = tu_int(&rng, 0, i), x = perm[i];
            perm[i] = perm[j];
            perm[j] = x;
        }
        const int b2q = tc.p.locations_layout == MSDA_LOCATIONS_B2QHLP;
        for (int64_t b = 0; b < 2; b++)
            for (int64_t q = 0; q < L; q++) {   /* query q sits at pixel perm[q] */
                int64_t l = 0;
                while (l + 1 < NL && perm[q] >= tc.level_start_index[l + 1]) l++;
                const int64_t pix = perm[q] - tc.level_start_index[l], w = pyramid[2 * l + 1], h = pyramid[2 * l];
                for (int64_t i = 0; i < H * NL * P; i++) {
                    const int64_t sl = i / P % NL;
                    const double dx = tu_uniform(&rng, -2, 2), dy = tu_uniform(&rng, -2, 2);
                    float x = (float)((pix % w + 0.5) / w + dx / pyramid[2 * sl + 1]),
                          y = (float)((pix / w + 0.5) / h + dy / pyramid[2 * sl]);
                    if (combo > 8 && i < P && q % 4 == 0) {   /* first points dead: the place from another */
                        if (i % 2) x = NAN;
                        else tc.attention_weights[(b * L + q) * H * NL * P + i] = 0.0f;
                    }
                    const int64_t HNP = H * NL * P;
                    tc.sampling_locations[b2q ? ((b * 2) * L + q) * HNP + i : ((b * L + q) * HNP + i) * 2] = x;
                    tc.sampling_locations[b2q ? ((b * 2 + 1) * L + q) * HNP + i : ((b * L + q) * HNP + i) * 2 + 1] = y;
                }
            }
        run_case("shuffled", &tc);
        tu_case_free(&tc);
    }
    {   /* a level over 1024 pixels: the double position path */
        static const int64_t long_level[] = {2, 3001, 3, 3};
        tu_case tc;
        tu_rng rng;
        tu_rng_seed(&rng, 7300);
        tu_case_init(&tc, 7300, 1, 5, 1, 9, 2, 6, long_level, 9);
        tu_case_fill(&tc, &rng, -0.1, 1.1);
        run_case("long", &tc);
        tu_case_free(&tc);
    }
    /* non-finite kinds */
    static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7fc00123u, 0xffc45678u, 0x7f800001u, 0xff800abcu};
    static const int64_t nf_channels[] = {5, 32, 37, 8};
    for (int combo = 0; combo < TU_COMBOS; combo++) {
        static const int64_t nf_shapes[] = {4, 5, 2, 3};
        tu_case tc;
        tu_rng rng;
        tu_rng_seed(&rng, 7400 + (uint64_t)combo);
        tu_case_init(&tc, 7400 + (uint64_t)combo, 1, 12, 2, nf_channels[combo % 4], 2, 3, nf_shapes, combo);
        tu_case_fill(&tc, &rng, -0.3, 1.3);
        tu_case_sprinkle_far(&tc, &rng, 0.1);
        for (int k = 0; k < 6; k++) {
            tc.value[tu_int(&rng, 0, tc.value_elements - 1)] = bits_float(nans[tu_int(&rng, 0, 5)]);
            tc.value[tu_int(&rng, 0, tc.value_elements - 1)] = k % 2 ? INFINITY : -INFINITY;
            tc.attention_weights[tu_int(&rng, 0, tc.weights_elements - 1)] = bits_float(nans[tu_int(&rng, 0, 5)]);
            tc.attention_weights[tu_int(&rng, 0, tc.weights_elements - 1)] = k % 2 ? -INFINITY : INFINITY;
            tc.grad_output[tu_int(&rng, 0, tc.output_elements - 1)] = bits_float(nans[tu_int(&rng, 0, 5)]);
            tc.grad_output[tu_int(&rng, 0, tc.output_elements - 1)] = k % 2 ? INFINITY : -INFINITY;
            tc.value[tu_int(&rng, 0, tc.value_elements - 1)] = 3e38f;
            tc.grad_output[tu_int(&rng, 0, tc.output_elements - 1)] = -3e38f;
        }
        run_case("nonfinite", &tc);
        tu_case_free(&tc);
    }
    for (int combo = 0; combo < TU_COMBOS; combo += 3) {   /* infinite weights at pixel centres */
        static const int64_t centres[] = {4, 4, 2, 8};
        tu_case tc;
        tu_rng rng;
        tu_rng_seed(&rng, 7500 + (uint64_t)combo);
        tu_case_init(&tc, 7500 + (uint64_t)combo, 1, 6, 1, 32, 2, 4, centres, tu_combo_with(combo, MSDA_OPTION_ALIGN_CORNERS, 0));
        tu_case_fill(&tc, &rng, 0, 1);
        for (int64_t i = 0; i < tc.locations_elements; i++)
            tc.sampling_locations[i] = (float)(tu_int(&rng, 0, 7) + 0.5) / 8.0f;
        for (int64_t i = 0; i < tc.weights_elements; i += 3) tc.attention_weights[i] = i % 2 ? INFINITY : -INFINITY;
        run_case("infinite", &tc);
        tu_case_free(&tc);
    }
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        printf("%s\n", msda_isa_list());
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--isa") == 0) {
        const char *isa = msda_isa();
        printf("%s\n", isa ? isa : "(none)");
        return isa ? 0 : 2;
    }
    if (argc == 2 && strcmp(argv[1], "default") != 0 && !msda__set_isa(argv[1])) {
        fprintf(stderr, "isa_hashes: this CPU has no ISA '%s' (it has: %s)\n", argv[1], msda_isa_list());
        return 2;
    }
    battery();
    return 0;
}
