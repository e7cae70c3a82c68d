/* Backward thread scaling on paper: the encoder config's backward units, each timed alone on
 * one thread, then the time T threads would take with the pool's contiguous split of units
 * (the slowest part; memory bandwidth shared between threads is not modelled, so this is a
 * bound a real machine approaches only while the rows fit its caches). For T threads over
 * the B * N_l * N_h = 32 (level, head) units (src/kernel/backward.h).
 *   split_sim [threads...]   (default 1 2 4 8 16 32 48 64) */
#define _POSIX_C_SOURCE 199309L
#include "internal.h"
#include "threads.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);   /* CPU time: a loaded machine's waits do not count */
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static float *floats(int64_t n)
{
    float *p = malloc((size_t)n * sizeof *p);
    if (!p) exit(1);
    return p;
}

int main(int argc, char **argv)
{
    int64_t shapes[4][2] = {{100, 167}, {50, 84}, {25, 42}, {13, 21}}, starts[4];
    int64_t L = 0;
    for (int l = 0; l < 4; l++) { starts[l] = L; L += shapes[l][0] * shapes[l][1]; }
    msda_problem p;
    msda_problem_init(&p);
    p.batch = 1; p.num_queries = L; p.num_heads = 8; p.channels = 32; p.num_levels = 4; p.num_points = 4;
    p.value_length = L; p.spatial_shapes = &shapes[0][0]; p.level_start_index = starts;
    const int64_t ve = msda_value_elements(&p), le = msda_locations_elements(&p), we = msda_weights_elements(&p),
                  oe = msda_output_elements(&p);
    float *value = floats(ve), *loc = floats(le), *attn = floats(we), *go = floats(oe), *gv = floats(ve),
          *gl = floats(le), *ga = floats(we);
    uint64_t s = 1;
    for (int64_t i = 0; i < ve; i++) { s = s * 6364136223846793005ull + 1; value[i] = (float)(s >> 40) / 16777216.0f - 0.5f; }
    for (int64_t i = 0; i < oe; i++) { s = s * 6364136223846793005ull + 1; go[i] = (float)(s >> 40) / 16777216.0f - 0.5f; }
    for (int64_t i = 0; i < we; i++) attn[i] = 1.0f / 16.0f;
    /* every query samples within +-4 pixels of its own place, as tests/bench/bench.js's encoder */
    for (int64_t q = 0; q < L; q++) {
        int l0 = 0;
        while (l0 < 3 && q >= starts[l0 + 1]) l0++;
        const int64_t px = q - starts[l0];
        const float cx = ((float)(px % shapes[l0][1]) + 0.5f) / (float)shapes[l0][1];
        const float cy = ((float)(px / shapes[l0][1]) + 0.5f) / (float)shapes[l0][0];
        for (int64_t i = 0; i < 8 * 16; i++) {
            const int64_t l = i / 4 % 4;
            s = s * 6364136223846793005ull + 1;
            const float dx = ((float)(s >> 40) / 16777216.0f - 0.5f) * 8.0f / (float)shapes[l][1];
            s = s * 6364136223846793005ull + 1;
            const float dy = ((float)(s >> 40) / 16777216.0f - 0.5f) * 8.0f / (float)shapes[l][0];
            loc[(q * 128 + i) * 2] = cx + dx;
            loc[(q * 128 + i) * 2 + 1] = cy + dy;
        }
    }
    static const int defaults[] = {1, 2, 4, 8, 16, 32, 48, 64};
    const int n = argc > 1 ? argc - 1 : 8;
    printf("| threads | units | simulated backward ms | speed-up over 1 thread |\n|---:|---:|---:|---:|\n");
    /* the units do not depend on the thread count: timed once (the minimum of 5), shared out for each */
    msda_job job;
    msda_error err;
    if (msda__backward_job(&job, &p, go, value, loc, attn, gv, gl, ga, &err) != MSDA_OK) {
        fprintf(stderr, "split_sim: %s\n", err.message);
        return 1;
    }
    double *unit_ms = calloc((size_t)job.units, sizeof *unit_ms);
    for (int rep = 0; rep < 5; rep++)
        for (int64_t u = 0; u < job.units; u++) {
            const double t0 = now_ms();
            msda__backward_range(&job.plan, &job.tensors, u, u + 1);
            const double t = now_ms() - t0;
            if (rep == 0 || t < unit_ms[u]) unit_ms[u] = t;
        }
    double one = 0;
    for (int k = 0; k < n; k++) {
        const int threads = argc > 1 ? atoi(argv[k + 1]) : defaults[k];
        const int parts = msda__job_parts(&job, threads);
        double worst = 0;
        for (int part = 0; part < parts; part++) {
            double sum = 0;
            for (int64_t u = job.units * part / parts; u < job.units * (part + 1) / parts; u++) sum += unit_ms[u];
            if (sum > worst) worst = sum;
        }
        if (k == 0) one = worst;
        printf("| %d | %lld | %.1f | %.2f |\n", threads, (long long)job.units, worst, one / worst);
    }
    free(unit_ms);
    return 0;
}
