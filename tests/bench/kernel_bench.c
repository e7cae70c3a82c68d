/* Kernel microbenchmark: the CONTRACT.md configs through the C API, one thread, min of N.
 * Built natively and (with Emscripten's glue) as wasm SIMD and wasm scalar by mk/bench.mk,
 * so the kernel can be tuned before any JS exists. Prints one JSON line per config with a
 * hash of every output, so builds can be compared bit for bit.
 * encoder-shuffled is the encoder with its queries in a seeded random order (its unshuffled_hash,
 * the output put back in pixel order, must equal the encoder's fwd_hash); decoder-2stage is a
 * two-stage model's decoder, 900 queries at the level-0 pixels of its top-k proposals in score
 * (random) order, decoder-2stage-sorted the same queries in pixel order.
 *   kernel_bench [--config small|decoder|encoder|encoder-shuffled|decoder-2stage|decoder-2stage-sorted|all]
 *                [--repeats N] [--wall]
 *                [--pass fwd|bwd|both] [--spread PIXELS] [--fixed-ref] [--misalign BYTES]   (tuning: locality of the samples)
 *                [--value-dtype float16|bfloat16]
 * --value-dtype draws value as half-precision bits and times the call on them (value_dtype, the
 * kernels widening rows as they read them) against the float32 call on the same values, the two
 * alternating; half_fwd_ms / half_bwd_ms, and half_same: 1 when their outputs' hashes agree. */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "msda.h"

/* CPU time by default: the machine is shared, and a descheduled run is not the kernel's cost.
 * --wall switches to wall-clock time. */
static clockid_t bench_clock = CLOCK_PROCESS_CPUTIME_ID;
#ifdef __EMSCRIPTEN__
#include <emscripten.h>
/* wasm has no CPU clock: Node's process.cpuUsage() (the process's CPU time; its compiler and GC
 * threads are idle once the kernel runs) */
EM_JS(double, node_cpu_ms, (void), { const u = process.cpuUsage(); return (u.user + u.system) / 1000; });
#endif

static double now_ms(void)
{
#ifdef __EMSCRIPTEN__
    if (bench_clock == CLOCK_PROCESS_CPUTIME_ID) return node_cpu_ms();
#endif
    struct timespec t;
    clock_gettime(bench_clock, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static uint64_t rng_state;
static uint32_t rng_next(void)   /* splitmix64, upper half */
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}
static int value_dtype = MSDA_FLOAT32;

static float uniform(float lo, float hi) { return lo + (hi - lo) * (float)(rng_next() >> 8) * (1.0f / 16777216.0f); }

typedef struct config {
    const char *name;
    int64_t batch, queries;     /* queries 0: one per value pixel (encoder self-attention) */
    int near_reference;         /* locations within a few pixels of a per-query reference point */
} config;

static const int64_t SMALL_SHAPES[8] = {32, 32, 16, 16, 8, 8, 4, 4};
static const int64_t DETR_SHAPES[8] = {100, 167, 50, 84, 25, 42, 13, 21};

/* FNV-1a over the bits of a float array. */
static uint64_t hash_floats(const float *x, int64_t n, uint64_t h)
{
    const unsigned char *b = (const unsigned char *)x;
    for (int64_t i = 0; i < n * (int64_t)sizeof(float); i++) h = (h ^ b[i]) * 0x100000001B3ull;
    return h;
}

/* 64-byte aligned plus --misalign bytes: where rows start relative to cache lines matters */
static int misalign = 0;

static void *xmalloc(int64_t bytes)
{
    char *p = aligned_alloc(64, (size_t)((bytes + misalign + 63) / 64 * 64));
    if (p) p += misalign;
    if (!p) {
        fprintf(stderr, "kernel_bench: out of memory (%lld bytes)\n", (long long)bytes);
        exit(1);
    }
    return p;
}

/* tuning knobs, not part of the configs: offset spread in pixels, one reference point for all */
static float spread = 4.0f;
static int run_fwd = 1, run_bwd = 1;
static int fixed_ref = 0;

/* Rows q of an array of Q rows of `row` floats, permuted: out row i = in row perm[i]. */
static void permute_rows(float *x, const int64_t *perm, int64_t Q, int64_t row)
{
    float *tmp = xmalloc(Q * row * 4);
    for (int64_t i = 0; i < Q; i++) memcpy(tmp + i * row, x + perm[i] * row, (size_t)row * 4);
    memcpy(x, tmp, (size_t)(Q * row) * 4);
    free((char *)tmp - misalign);
}

static int run(const char *name, int repeats)
{
    const int shuffled = strcmp(name, "encoder-shuffled") == 0;
    const int two_stage = strncmp(name, "decoder-2stage", 14) == 0, two_stage_sorted = strcmp(name, "decoder-2stage-sorted") == 0;
    const int64_t *shapes = strcmp(name, "small") == 0 ? SMALL_SHAPES : DETR_SHAPES;
    int64_t starts[4], L = 0;
    for (int l = 0; l < 4; l++) { starts[l] = L; L += shapes[2 * l] * shapes[2 * l + 1]; }
    msda_problem p;
    msda_problem_init(&p);
    p.batch = strcmp(name, "small") == 0 ? 2 : 1;
    p.num_queries = strcmp(name, "decoder") == 0 ? 300 : two_stage ? 900 : L;
    p.num_heads = 8; p.channels = 32; p.num_levels = 4; p.num_points = 4; p.value_length = L;
    p.spatial_shapes = shapes; p.level_start_index = starts;
    const int64_t B = p.batch, Q = p.num_queries, H = 8, NL = 4, P = 4;

    rng_state = 12345;
    const int64_t nv = msda_value_elements(&p), nl = msda_locations_elements(&p),
                  nw = msda_weights_elements(&p), no = msda_output_elements(&p);
    float *value = xmalloc(nv * 4), *loc = xmalloc(nl * 4), *attn = xmalloc(nw * 4), *gout = xmalloc(no * 4);
    float *out = xmalloc(no * 4), *gv = xmalloc(nv * 4), *gl = xmalloc(nl * 4), *ga = xmalloc(nw * 4);
    memset(out, 0, (size_t)no * 4); memset(gv, 0, (size_t)nv * 4);
    memset(gl, 0, (size_t)nl * 4); memset(ga, 0, (size_t)nw * 4);
    for (int64_t i = 0; i < nv; i++) value[i] = uniform(-1, 1);
    /* half: random finite bits of magnitude below 1 (and value their float32 values) */
    uint16_t *half = NULL;
    if (value_dtype != MSDA_FLOAT32) {
        half = xmalloc(nv * 2);
        for (int64_t i = 0; i < nv; i++) {
            const uint32_t r = rng_next();
            half[i] = (uint16_t)(value_dtype == MSDA_BFLOAT16 ? (r & 0x807fu) | (113u + (r >> 16) % 14u) << 7
                                                              : (r & 0x83ffu) | (1u + (r >> 16) % 14u) << 10);
        }
        msda_widen_half(half, value, nv, value_dtype == MSDA_BFLOAT16);
    }
    for (int64_t i = 0; i < no; i++) gout[i] = uniform(-1, 1);
    for (int64_t i = 0; i < nw; i++) attn[i] = uniform(0, 1) / (float)(NL * P);
    const int near = strcmp(name, "small") != 0;
    /* two-stage: the proposals' level-0 pixels, random (score order) or sorted (pixel order) */
    int64_t *proposal = NULL;
    if (two_stage) {
        proposal = malloc((size_t)Q * sizeof *proposal);
        for (int64_t q = 0; q < Q; q++) proposal[q] = rng_next() % (uint32_t)(shapes[0] * shapes[1]);
        if (two_stage_sorted)
            for (int64_t i = 1; i < Q; i++)
                for (int64_t j = i; j > 0 && proposal[j - 1] > proposal[j]; j--) {
                    const int64_t x = proposal[j]; proposal[j] = proposal[j - 1]; proposal[j - 1] = x;
                }
    }

    for (int64_t b = 0; b < B; b++)
        for (int64_t q = 0; q < Q; q++) {
            float rx = uniform(0, 1), ry = uniform(0, 1);
            if (fixed_ref) rx = ry = 0.5f;
            else if (two_stage) {
                rx = ((float)(proposal[q] % shapes[1]) + 0.5f) / (float)shapes[1];
                ry = ((float)(proposal[q] / shapes[1]) + 0.5f) / (float)shapes[0];
            } else if (near && Q == L) {   /* encoder: the query's own pixel centre */
                int l = 0;
                while (l < 3 && q >= starts[l + 1]) l++;
                int64_t pix = q - starts[l], w = shapes[2 * l + 1], h = shapes[2 * l];
                rx = ((float)(pix % w) + 0.5f) / (float)w;
                ry = ((float)(pix / w) + 0.5f) / (float)h;
            }
            for (int64_t i = 0; i < H * NL * P; i++) {
                const int64_t l = (i / P) % NL;
                float *xy = loc + (((b * Q + q) * H * NL * P) + i) * 2;
                if (near) {
                    xy[0] = rx + uniform(-spread, spread) / (float)shapes[2 * l + 1];
                    xy[1] = ry + uniform(-spread, spread) / (float)shapes[2 * l];
                } else {
                    xy[0] = uniform(0, 1);
                    xy[1] = uniform(0, 1);
                }
            }
        }
    free(proposal);
    /* shuffled: query i is the encoder's query perm[i] (Fisher-Yates, seeded) */
    int64_t *perm = NULL;
    if (shuffled) {
        perm = xmalloc(Q * (int64_t)sizeof *perm);
        for (int64_t q = 0; q < Q; q++) perm[q] = q;
        for (int64_t i = Q - 1; i > 0; i--) {
            const int64_t j = rng_next() % (uint32_t)(i + 1), x = perm[i];
            perm[i] = perm[j]; perm[j] = x;
        }
        permute_rows(loc, perm, Q, H * NL * P * 2);
        permute_rows(attn, perm, Q, H * NL * P);
        permute_rows(gout, perm, Q, H * 32);
    }

    double fwd = 1e30, bwd = 1e30, half_fwd = 1e30, half_bwd = 1e30;
    uint64_t half_hf = 0, half_hb = 0;
    msda_error err;
    for (int r = 0; r < repeats; r++) {
        if (half) {   /* the half call first, its hashes kept for comparison */
            msda_problem ph = p;
            ph.value_dtype = (msda_dtype)value_dtype;
            const double h0 = now_ms();
            if (run_fwd && msda_forward(&ph, half, loc, attn, out, &err) != MSDA_OK) {
                fprintf(stderr, "kernel_bench: %s\n", err.message);
                return 1;
            }
            const double h1 = now_ms();
            if (run_bwd && msda_backward(&ph, gout, half, loc, attn, gv, gl, ga, &err) != MSDA_OK) {
                fprintf(stderr, "kernel_bench: %s\n", err.message);
                return 1;
            }
            const double h2 = now_ms();
            if (h1 - h0 < half_fwd) half_fwd = h1 - h0;
            if (h2 - h1 < half_bwd) half_bwd = h2 - h1;
            half_hf = hash_floats(out, no, 0xCBF29CE484222325ull);
            half_hb = hash_floats(ga, nw, hash_floats(gl, nl, hash_floats(gv, nv, 0xCBF29CE484222325ull)));
        }
        double t0 = now_ms();
        if (run_fwd && msda_forward(&p, value, loc, attn, out, &err) != MSDA_OK) {
            fprintf(stderr, "kernel_bench: %s\n", err.message);
            return 1;
        }
        double t1 = now_ms();
        if (run_bwd && msda_backward(&p, gout, value, loc, attn, gv, gl, ga, &err) != MSDA_OK) {
            fprintf(stderr, "kernel_bench: %s\n", err.message);
            return 1;
        }
        double t2 = now_ms();
        if (t1 - t0 < fwd) fwd = t1 - t0;
        if (t2 - t1 < bwd) bwd = t2 - t1;
    }
    uint64_t hf = hash_floats(out, no, 0xCBF29CE484222325ull);
    uint64_t hb = hash_floats(ga, nw, hash_floats(gl, nl, hash_floats(gv, nv, 0xCBF29CE484222325ull)));
    printf("{\"config\":\"%s\",\"fwd_ms\":%.2f,\"bwd_ms\":%.2f,\"fwd_hash\":\"%016llx\",\"bwd_hash\":\"%016llx\"",
           name, fwd, bwd, (unsigned long long)hf, (unsigned long long)hb);
    if (half)
        printf(",\"value_dtype\":\"%s\",\"half_fwd_ms\":%.2f,\"half_bwd_ms\":%.2f,\"half_same\":%d",
               value_dtype == MSDA_BFLOAT16 ? "bfloat16" : "float16", half_fwd, half_bwd, half_hf == hf && half_hb == hb);
    if (half) free((char *)half - misalign);
    if (perm) {   /* the output back in pixel order: the encoder's fwd_hash */
        float *back = xmalloc(no * 4);
        for (int64_t i = 0; i < Q; i++) memcpy(back + perm[i] * H * 32, out + i * H * 32, (size_t)(H * 32) * 4);
        printf(",\"unshuffled_hash\":\"%016llx\"", (unsigned long long)hash_floats(back, no, 0xCBF29CE484222325ull));
        free((char *)back - misalign);
        free((char *)perm - misalign);
    }
    printf("}\n");
    float *all[8] = {value, loc, attn, gout, out, gv, gl, ga};
    for (int i = 0; i < 8; i++) free((char *)all[i] - misalign);
    return 0;
}

int main(int argc, char **argv)
{
    const char *which = "all";
    int repeats = 5;
    for (int i = 1; i < argc; i += 2) {
        if (strcmp(argv[i], "--wall") == 0) { bench_clock = CLOCK_MONOTONIC; i--; continue; }
        if (strcmp(argv[i], "--fixed-ref") == 0) { fixed_ref = 1; i--; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "kernel_bench: %s needs a value\n", argv[i]); return 2; }
        if (strcmp(argv[i], "--config") == 0) which = argv[i + 1];
        else if (strcmp(argv[i], "--repeats") == 0) repeats = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--pass") == 0) {
            run_fwd = strcmp(argv[i + 1], "bwd") != 0;
            run_bwd = strcmp(argv[i + 1], "fwd") != 0;
        }
        else if (strcmp(argv[i], "--misalign") == 0) misalign = atoi(argv[i + 1]) & ~3;
        else if (strcmp(argv[i], "--spread") == 0) spread = (float)atof(argv[i + 1]);
        else if (strcmp(argv[i], "--value-dtype") == 0) {
            value_dtype = strcmp(argv[i + 1], "float16") == 0 ? MSDA_FLOAT16 : strcmp(argv[i + 1], "bfloat16") == 0 ? MSDA_BFLOAT16 : -1;
            if (value_dtype < 0) { fprintf(stderr, "kernel_bench: --value-dtype is float16 or bfloat16\n"); return 2; }
        }
        else { fprintf(stderr, "kernel_bench: unknown argument %s\n", argv[i]); return 2; }
    }
    if (repeats < 1) repeats = 1;
    const char *names[6] = {"small", "decoder", "encoder", "encoder-shuffled", "decoder-2stage", "decoder-2stage-sorted"};
    int known = strcmp(which, "all") == 0;
    for (int i = 0; i < 6; i++) known |= strcmp(which, names[i]) == 0;
    if (!known) {
        fprintf(stderr, "kernel_bench: --config is '%s', expected small, decoder, encoder, encoder-shuffled, decoder-2stage, decoder-2stage-sorted or all\n", which);
        return 2;
    }
    for (int i = 0; i < 6; i++)
        if (strcmp(which, "all") == 0 || strcmp(which, names[i]) == 0)
            if (run(names[i], repeats)) return 1;
    return 0;
}
