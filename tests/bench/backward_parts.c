/* Where a backward's threads go (issue 37), natively, on the bench configs' shapes (DETR pyramid,
 * 8 heads, 32 channels, 4 points; samples within +-4 pixels of each query's place):
 *
 *   backward_parts work  [--config C] [--rounds N] [--pass fwd|bwd|both] [P ...]
 *     the work P parts do: the job split for P threads, its parts run one after another on this
 *     thread, their summed time over one part's (the whole job on one thread); a P-core machine
 *     shares that sum, so it is the work a split costs. CPU time of this thread, so time spent
 *     waiting for a core on a loaded machine does not count.
 *     Default P: 2 4 16 64.
 *   backward_parts zero  [--config C] [--rounds N]
 *     grad_value's zeroing alone: one memset on one thread, two threads each zeroing a contiguous
 *     half, and two threads each zeroing its heads' runs of every pixel (BLNC), as the backward's
 *     units did before msda__run zeroed in a stage of its own (src/pool.c).
 *   backward_parts pair  [--config C] [--rounds N] [--pass fwd|bwd]
 *     2 threads against 1, beside its ceiling: two 1-thread processes (forked once, their own
 *     copies of the data) running the same call at the same moment, against one of them alone.
 *     Each round runs every case once, interleaved; the minimum of the rounds is kept. Also each
 *     part's own time when the 2-part split runs on two threads of this program (per-part timers)
 *     and alone, and the same two threads with part 1 writing its own copy of grad_value, of
 *     every output, and of the inputs too: what the parts' sharing of rows costs.
 *   --value-layout blnc|bnlc: the value's (and grad_value's) layout, BLNC by default.
 *
 * Times are wall-clock (CLOCK_MONOTONIC). Configs: encoder, encoder-shuffled (its queries in a
 * seeded random order), decoder (300 queries). */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"
#include "threads.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* This thread's CPU time: what a part costs, whether or not the system ran it all the time. */
static double cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static float *floats(int64_t n)
{
    float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64));
    if (!p) exit(1);
    memset(p, 0, (size_t)n * 4);
    return p;
}

static uint64_t seed = 1;
static float unit(void)   /* [-0.5, 0.5) */
{
    seed = seed * 6364136223846793005ull + 1;
    return (float)(seed >> 40) / 16777216.0f - 0.5f;
}

typedef struct bench_case {
    msda_problem p;
    int64_t shapes[8], starts[4];
    float *value, *loc, *attn, *go, *out, *gv, *gl, *ga;
} bench_case;

static void make_case(bench_case *c, const char *name, int bnlc)
{
    static const int64_t detr[8] = {100, 167, 50, 84, 25, 42, 13, 21};
    memcpy(c->shapes, detr, sizeof detr);
    int64_t L = 0;
    for (int l = 0; l < 4; l++) { c->starts[l] = L; L += detr[2 * l] * detr[2 * l + 1]; }
    const int decoder = strcmp(name, "decoder") == 0, shuffled = strcmp(name, "encoder-shuffled") == 0;
    if (!decoder && !shuffled && strcmp(name, "encoder") != 0) {
        fprintf(stderr, "backward_parts: --config is '%s', expected encoder, encoder-shuffled or decoder\n", name);
        exit(2);
    }
    msda_problem *p = &c->p;
    msda_problem_init(p);
    p->batch = 1; p->num_queries = decoder ? 300 : L; p->num_heads = 8; p->channels = 32; p->num_levels = 4;
    p->num_points = 4; p->value_length = L; p->spatial_shapes = c->shapes; p->level_start_index = c->starts;
    p->value_layout = bnlc ? MSDA_VALUE_BNLC : MSDA_VALUE_BLNC;
    const int64_t Q = p->num_queries, ve = msda_value_elements(p), le = msda_locations_elements(p),
                  we = msda_weights_elements(p), oe = msda_output_elements(p);
    c->value = floats(ve); c->loc = floats(le); c->attn = floats(we); c->go = floats(oe);
    c->out = floats(oe); c->gv = floats(ve); c->gl = floats(le); c->ga = floats(we);
    for (int64_t i = 0; i < ve; i++) c->value[i] = unit();
    for (int64_t i = 0; i < oe; i++) c->go[i] = unit();
    for (int64_t i = 0; i < we; i++) c->attn[i] = (unit() + 0.5f) / 16.0f;
    int64_t *perm = malloc((size_t)Q * sizeof *perm);
    for (int64_t q = 0; q < Q; q++) perm[q] = q;
    if (shuffled)
        for (int64_t i = Q - 1; i > 0; i--) {
            seed = seed * 6364136223846793005ull + 1;
            const int64_t j = (int64_t)((seed >> 33) % (uint64_t)(i + 1)), x = perm[i];
            perm[i] = perm[j]; perm[j] = x;
        }
    for (int64_t i = 0; i < Q; i++) {
        const int64_t q = perm[i];
        float cx = unit() + 0.5f, cy = unit() + 0.5f;   /* the decoder: a random place */
        if (!decoder) {   /* the encoder: query q's own pixel centre */
            int l0 = 0;
            while (l0 < 3 && q >= c->starts[l0 + 1]) l0++;
            const int64_t px = q - c->starts[l0];
            cx = ((float)(px % detr[2 * l0 + 1]) + 0.5f) / (float)detr[2 * l0 + 1];
            cy = ((float)(px / detr[2 * l0 + 1]) + 0.5f) / (float)detr[2 * l0];
        }
        for (int64_t k = 0; k < 8 * 16; k++) {
            const int64_t l = k / 4 % 4;
            c->loc[(i * 128 + k) * 2] = cx + unit() * 8.0f / (float)detr[2 * l + 1];
            c->loc[(i * 128 + k) * 2 + 1] = cy + unit() * 8.0f / (float)detr[2 * l];
        }
    }
    free(perm);
}

static void make_job(msda_job *job, bench_case *c, int threads, int backward)
{
    msda_error err;
    c->p.threads = threads;
    const msda_status st =
        backward ? msda__backward_job(job, &c->p, c->go, c->value, c->loc, c->attn, c->gv, c->gl, c->ga, &err)
                 : msda__forward_job(job, &c->p, c->value, c->loc, c->attn, c->out, &err);
    if (st != MSDA_OK) {
        fprintf(stderr, "backward_parts: %s\n", err.message);
        exit(1);
    }
}

/* The whole call through the library (its pool for threads > 1). */
static double call_ms(bench_case *c, int threads, int backward)
{
    msda_error err;
    c->p.threads = threads;
    const double t0 = now_ms();
    const msda_status st = backward ? msda_backward(&c->p, c->go, c->value, c->loc, c->attn, c->gv, c->gl, c->ga, &err)
                                    : msda_forward(&c->p, c->value, c->loc, c->attn, c->out, &err);
    const double t = now_ms() - t0;
    if (st != MSDA_OK) {
        fprintf(stderr, "backward_parts: %s\n", err.message);
        exit(1);
    }
    return t;
}

static void work(bench_case *c, int rounds, int backward, const int *ps, int n)
{
    double one = 1e30, sum[64], worst[64];
    int parts[64];
    for (int k = 0; k < n; k++) sum[k] = worst[k] = 1e30;
    for (int r = 0; r < rounds; r++) {
        msda_job job;
        make_job(&job, c, 1, backward);
        double t0 = cpu_ms();
        msda__job_run_part(&job, 0, 1);
        const double t = cpu_ms() - t0;
        if (t < one) one = t;
        for (int k = 0; k < n; k++) {
            make_job(&job, c, ps[k], backward);
            parts[k] = msda__job_parts(&job, ps[k]);
            double s = 0, w = 0;
            /* msda__run's stages: a split backward's parts zero grad_value first, then walk */
            msda_job zero = job;
            zero.kind = MSDA_JOB_ZERO;
            job.plan.grad_value_zeroed = backward && parts[k] > 1;
            for (int part = 0; part < parts[k]; part++) {
                double tp = 0;
                if (backward && parts[k] > 1) {
                    t0 = cpu_ms();
                    msda__job_run_part(&zero, part, parts[k]);
                    tp += cpu_ms() - t0;
                }
                t0 = cpu_ms();
                msda__job_run_part(&job, part, parts[k]);
                tp += cpu_ms() - t0;
                s += tp;
                if (tp > w) w = tp;
            }
            if (s < sum[k]) sum[k] = s;
            if (w < worst[k]) worst[k] = w;
        }
    }
    printf("| P | parts | sum of parts ms | over one part | slowest part ms | P x slowest over one |\n"
           "|---:|---:|---:|---:|---:|---:|\n| 1 | 1 | %.2f | 1.00 | %.2f | 1.00 |\n", one, one);
    for (int k = 0; k < n; k++)
        printf("| %d | %d | %.2f | %.2f | %.2f | %.2f |\n", ps[k], parts[k], sum[k], sum[k] / one, worst[k],
               parts[k] * worst[k] / one);
}

/* ---- pair: 2 threads, per-part timers, and the two-process ceiling ---- */

typedef struct part_thread {
    const msda_job *job;
    int part, parts;
    pthread_barrier_t *go;
    double ms;
} part_thread;

static void *part_main(void *arg)
{
    part_thread *pt = arg;
    pthread_barrier_wait(pt->go);
    const double t0 = cpu_ms();
    msda__job_run_part(pt->job, pt->part, pt->parts);
    pt->ms = cpu_ms() - t0;
    return NULL;
}

typedef struct zero_thread {
    float *gv;
    int64_t pixels, row, k;   /* k: 0 or 1, which half; row: floats a pixel (all heads) */
    int by_heads;
    pthread_barrier_t *go;
} zero_thread;

static void zero_half(const zero_thread *z)
{
    if (!z->by_heads) {
        const int64_t n = z->pixels * z->row, b = n * z->k / 2, e = n * (z->k + 1) / 2;
        memset(z->gv + b, 0, (size_t)(e - b) * sizeof(float));
        return;
    }
    for (int64_t p = 0; p < z->pixels; p++)
        memset(z->gv + p * z->row + z->k * z->row / 2, 0, (size_t)(z->row / 2) * sizeof(float));
}

static void *zero_main(void *arg)
{
    zero_thread *z = arg;
    pthread_barrier_wait(z->go);
    zero_half(z);
    return NULL;
}

static void zero(bench_case *c, int rounds)
{
    const int64_t pixels = c->p.value_length, row = c->p.num_heads * c->p.channels;
    double one = 1e30, two[2] = {1e30, 1e30};
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 2);
    for (int r = 0; r < rounds; r++) {
        double t0 = now_ms();
        memset(c->gv, 0, (size_t)(pixels * row) * sizeof(float));
        const double t = now_ms() - t0;
        if (t < one) one = t;
        for (int by_heads = 0; by_heads < 2; by_heads++) {
            zero_thread z[2] = {{c->gv, pixels, row, 0, by_heads, &go}, {c->gv, pixels, row, 1, by_heads, &go}};
            pthread_t th;
            pthread_create(&th, NULL, zero_main, &z[1]);
            pthread_barrier_wait(&go);
            t0 = now_ms();
            zero_half(&z[0]);
            pthread_join(th, NULL);
            const double u = now_ms() - t0;
            if (u < two[by_heads]) two[by_heads] = u;
        }
    }
    printf("| one memset ms | 2 threads, contiguous halves | 2 threads, by heads (BLNC) |\n|---:|---:|---:|\n");
    printf("| %.3f | %.3f (%.2f x) | %.3f (%.2f x) |\n", one, two[0], one / two[0], two[1], one / two[1]);
}

static float *clone(const float *src, int64_t n)
{
    float *p = floats(n);
    memcpy(p, src, (size_t)n * sizeof(float));
    return p;
}

/* Part 0 of job0 and part 1 of job1 on two threads started together: the wall time, and each
 * part's thread CPU time in ms[]. */
static double run_two(const msda_job *job0, const msda_job *job1, pthread_barrier_t *go, double ms[2])
{
    part_thread pt[2] = {{job0, 0, 2, go, 0}, {job1, 1, 2, go, 0}};
    pthread_t th[2];
    for (int k = 0; k < 2; k++) pthread_create(&th[k], NULL, part_main, &pt[k]);
    pthread_barrier_wait(go);
    const double t0 = now_ms();
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    for (int k = 0; k < 2; k++) ms[k] = pt[k].ms;
    return now_ms() - t0;
}

/* A forked 1-thread worker: reads a byte, runs the call, writes its time. */
typedef struct child {
    pid_t pid;
    int to, from;
} child;

static child start_child(bench_case *c, int backward)
{
    int down[2], up[2];
    if (pipe(down) || pipe(up)) exit(1);
    child ch = {fork(), down[1], up[0]};
    if (ch.pid == 0) {
        close(down[1]); close(up[0]);
        char cmd;
        while (read(down[0], &cmd, 1) == 1) {
            const double c0 = cpu_ms(), w = call_ms(c, 1, backward), t[2] = {w, cpu_ms() - c0};
            if (write(up[1], t, sizeof t) != sizeof t) _exit(1);
        }
        _exit(0);
    }
    close(down[0]); close(up[1]);
    return ch;
}

static void pair(bench_case *c, int rounds, int backward)
{
    call_ms(c, 1, backward);   /* the pages touched before the fork: children start warm */
    child a = start_child(c, backward), b = start_child(c, backward);
    double one = 1e30, two = 1e30, solo = 1e30, both = 1e30, both_max = 1e30, part_alone[2] = {1e30, 1e30},
           part_pair[2] = {1e30, 1e30}, pair_wall = 1e30, solo_cpu = 1e30, both_cpu = 1e30;
    msda_job job;
    make_job(&job, c, 2, backward);
    const int parts = msda__job_parts(&job, 2);
    double part_apart[3][2] = {{1e30, 1e30}, {1e30, 1e30}, {1e30, 1e30}};
    bench_case copy = *c;
    copy.gv = floats(msda_value_elements(&c->p));
    msda_job gv_apart;
    make_job(&gv_apart, &copy, 2, backward);
    copy.gl = floats(msda_locations_elements(&c->p));
    copy.ga = floats(msda_weights_elements(&c->p));
    msda_job out_apart;
    make_job(&out_apart, &copy, 2, backward);
    copy.value = clone(c->value, msda_value_elements(&c->p));
    copy.loc = clone(c->loc, msda_locations_elements(&c->p));
    copy.attn = clone(c->attn, msda_weights_elements(&c->p));
    copy.go = clone(c->go, msda_output_elements(&c->p));
    msda_job whole_apart;
    make_job(&whole_apart, &copy, 2, backward);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 3);
    for (int r = 0; r < rounds; r++) {
        double t = call_ms(c, 1, backward);
        if (t < one) one = t;
        t = call_ms(c, 2, backward);
        if (t < two) two = t;
        const char cmd = 1;
        double xa[2], xb[2];
        if (write(a.to, &cmd, 1) != 1 || read(a.from, xa, sizeof xa) != sizeof xa) exit(1);
        if (xa[0] < solo) solo = xa[0];
        if (xa[1] < solo_cpu) solo_cpu = xa[1];
        if (write(a.to, &cmd, 1) != 1 || write(b.to, &cmd, 1) != 1) exit(1);
        if (read(a.from, xa, sizeof xa) != sizeof xa || read(b.from, xb, sizeof xb) != sizeof xb) exit(1);
        const double ta = xa[0], tb = xb[0];
        if ((ta + tb) / 2 < both) both = (ta + tb) / 2;
        if ((ta > tb ? ta : tb) < both_max) both_max = ta > tb ? ta : tb;
        if ((xa[1] + xb[1]) / 2 < both_cpu) both_cpu = (xa[1] + xb[1]) / 2;
        if (parts == 2) {
            for (int k = 0; k < 2; k++) {
                const double t0 = cpu_ms();
                msda__job_run_part(&job, k, 2);
                t = cpu_ms() - t0;
                if (t < part_alone[k]) part_alone[k] = t;
            }
            double ms[2];
            t = run_two(&job, &job, &go, ms);
            if (t < pair_wall) pair_wall = t;
            for (int k = 0; k < 2; k++)
                if (ms[k] < part_pair[k]) part_pair[k] = ms[k];
            /* the same two parts at once, part 1 writing its own copy of grad_value, then of every
             * output, then reading its own copy of the inputs too: what sharing the rows costs,
             * against sharing the cores */
            const msda_job *apart[3] = {&gv_apart, &out_apart, &whole_apart};
            for (int v = 0; v < 3; v++) {
                t = run_two(&job, apart[v], &go, ms);
                for (int k = 0; k < 2; k++)
                    if (ms[k] < part_apart[v][k]) part_apart[v][k] = ms[k];
            }
        }
    }
    close(a.to); close(b.to);
    waitpid(a.pid, NULL, 0);
    waitpid(b.pid, NULL, 0);
    printf("| 1 thread ms | 2 threads ms | 2 over 1 | 1-thread process alone ms | two at once ms (mean, slower) | "
           "ceiling 2 x alone / at once | 2 threads of the ceiling |\n|---:|---:|---:|---:|---:|---:|---:|\n");
    const double ceiling = 2.0 * solo / both_max;
    printf("| %.2f | %.2f | %.2f | %.2f | %.2f, %.2f | %.2f | %.2f |\n", one, two, one / two, solo, both, both_max, ceiling,
           one / two / ceiling);
    if (parts == 2)
        printf("\nparts of the 2-part split (thread CPU time): alone %.2f + %.2f ms (sum %.2f, %.2f of 1 thread); on two threads at once "
               "%.2f and %.2f ms (%.2f and %.2f x alone), %.2f ms wall\n",
               part_alone[0], part_alone[1], part_alone[0] + part_alone[1], (part_alone[0] + part_alone[1]) / one,
               part_pair[0], part_pair[1], part_pair[0] / part_alone[0], part_pair[1] / part_alone[1], pair_wall);
    if (parts == 2)
        for (int v = 0; v < 3; v++) {
            static const char *what[3] = {"its own copy of grad_value", "its own copy of every output",
                                          "its own copies of the inputs and outputs"};
            printf("%sthe same two parts at once, part 1 with %s: %.2f and %.2f ms (%.2f and %.2f x alone)\n",
                   v ? "" : "\n", what[v], part_apart[v][0], part_apart[v][1], part_apart[v][0] / part_alone[0],
                   part_apart[v][1] / part_alone[1]);
        }
    printf("\nCPU time of a 1-thread process: alone %.2f ms, two at once %.2f ms (%.2f x)\n", solo_cpu, both_cpu,
           both_cpu / solo_cpu);
    printf("pair solo_cpu=%.3f both_cpu=%.3f one=%.3f two=%.3f solo=%.3f at_once=%.3f alone0=%.3f alone1=%.3f both0=%.3f both1=%.3f\n",
           solo_cpu, both_cpu, one, two, solo, both_max, part_alone[0], part_alone[1], part_pair[0], part_pair[1]);
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "work") && strcmp(argv[1], "pair") && strcmp(argv[1], "zero"))) {
        fprintf(stderr, "usage: backward_parts work|pair|zero [--config C] [--rounds N] [--pass fwd|bwd|both] [--value-layout blnc|bnlc] [P ...]\n");
        return 2;
    }
    const char *config = "encoder", *pass = "bwd", *layout = "blnc";
    int rounds = 5, ps[64], n = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) config = argv[++i];
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--pass") == 0 && i + 1 < argc) pass = argv[++i];
        else if (strcmp(argv[i], "--value-layout") == 0 && i + 1 < argc) layout = argv[++i];
        else if (n < 64 && atoi(argv[i]) > 0) ps[n++] = atoi(argv[i]);
        else {
            fprintf(stderr, "backward_parts: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (n == 0) { ps[0] = 2; ps[1] = 4; ps[2] = 16; ps[3] = 64; n = 4; }
    if (strcmp(layout, "blnc") && strcmp(layout, "bnlc")) {
        fprintf(stderr, "backward_parts: --value-layout is '%s', expected blnc or bnlc\n", layout);
        return 2;
    }
    bench_case c;
    make_case(&c, config, strcmp(layout, "bnlc") == 0);
    if (strcmp(argv[1], "zero") == 0) {
        printf("%s grad_value zeroing, %d rounds\n\n", config, rounds);
        zero(&c, rounds);
        return 0;
    }
    for (int backward = 0; backward < 2; backward++) {
        if ((backward && strcmp(pass, "fwd") == 0) || (!backward && strcmp(pass, "bwd") == 0)) continue;
        printf("%s %s (value %s), %d rounds\n\n", config, backward ? "backward" : "forward", layout, rounds);
        if (strcmp(argv[1], "work") == 0) work(&c, rounds, backward, ps, n);
        else pair(&c, rounds, backward);
        printf("\n");
    }
    return 0;
}
