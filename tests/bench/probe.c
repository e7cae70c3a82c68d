/* Lower-bound probe: the vector work of the encoder config's samples with every row in L1
 * (tests/bench/probe_body.h), on the ISA the library runs (msda_isa(), so MSDA_ISA picks it here
 * too), built with that ISA's flags. Prints one JSON line, each pass the minimum of 5 runs:
 *   {"probe":"limit","isa":"avx2","samples":N,"fwd_ms":..,"bwd_ms":..}
 * usage: limit_probe [samples]   (default 2844544: 22223 queries x 8 heads x 16 samples) */
#define _POSIX_C_SOURCE 199309L
#include "msda.h"
#include "probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static float *floats(int64_t n)
{
    float *p = calloc((size_t)n, sizeof *p);
    if (!p) {
        fprintf(stderr, "limit_probe: out of memory\n");
        exit(1);
    }
    return p;
}

int main(int argc, char **argv)
{
    int64_t samples = argc > 1 ? atoll(argv[1]) : 2844544;
    samples -= samples % 16;
    if (samples < 16) samples = 16;
    const char *isa = msda_isa();
    void (*run)(const probe_data *, int) = probe_run_base;
#if defined(__x86_64__) && !defined(__EMSCRIPTEN__)
    if (isa && strcmp(isa, "avx2") == 0) run = probe_run_avx2;
    if (isa && strcmp(isa, "avx512") == 0) run = probe_run_avx512;
#endif
    float *loc = floats(2 * samples), *ring = floats(64 * 32), *grad_ring = floats(64 * 32), *g = floats(32);
    for (int64_t s = 0; s < samples; s++) {
        loc[2 * s] = (float)(s % 97) / 97.0f;
        loc[2 * s + 1] = (float)(s % 89) / 89.0f;
    }
    for (int i = 0; i < 64 * 32; i++) ring[i] = (float)(i % 7) * 0.1f;
    for (int c = 0; c < 32; c++) g[c] = 0.5f + (float)c;
    probe_data p = {samples, loc, ring, g, floats(samples / 16 * 32), grad_ring, floats(2 * samples), floats(samples)};
    double best[2] = {1e30, 1e30};
    for (int r = 0; r < 5; r++)
        for (int pass = 0; pass < 2; pass++) {
            const double t0 = now_ms();
            run(&p, pass);
            const double t = now_ms() - t0;
            if (t < best[pass]) best[pass] = t;
        }
    double sink = 0;
    for (int64_t i = 0; i < samples / 16 * 32; i += 97) sink += p.out[i];
    for (int64_t i = 0; i < samples; i += 97) sink += p.grad_weight[i] + p.grad_loc[2 * i];
    printf("{\"probe\":\"limit\",\"isa\":\"%s\",\"samples\":%lld,\"C\":32,\"fwd_ms\":%.2f,\"bwd_ms\":%.2f,\"sink\":%g}\n",
           isa ? isa : "?", (long long)samples, best[0], best[1], sink);
    return 0;
}
