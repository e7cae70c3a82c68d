/* Threads: forward and backward give the same bits for every thread count (1, 2, 3, 8 and more
 * than the pool's maximum) on cases whose batch x heads does not divide by the thread count;
 * the pool is reused, not re-spawned per call; concurrent callers, fork(), a failing
 * pthread_create and a worker that does not run during a call are handled. */
#define _GNU_SOURCE
#include "msda.h"
#include "reference.h"
#include "testutil.h"
#include "threads.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* How long a call may take before it counts as a hang: long enough for a healthy one under
 * qemu and sanitizers on an over-committed machine (tests/patience.js says the same for JS). */
#define HANG_SECONDS 600

/* pthread_create, interposed so a test can make the pool fail to start a worker, or start one
 * that waits (as one the system has not scheduled yet) until the test lets it run. */
static int fail_thread_create, hold_new_workers;
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static int held;   /* workers waiting; -1 once released */
static void *(*held_start)(void *);

static void held_timeout(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL: threads 2 with its worker held: the call still waits after 20 s\n";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(1);
    _exit(1);
}

static void *held_worker(void *arg)
{
    pthread_mutex_lock(&hold_lock);
    held++;
    pthread_cond_broadcast(&hold_cond);
    while (held >= 0) pthread_cond_wait(&hold_cond, &hold_lock);
    pthread_mutex_unlock(&hold_lock);
    return held_start(arg);
}

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *), void *arg)
{
    typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    static create_fn real;
    if (fail_thread_create) return 11; /* EAGAIN */
    if (!real) real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    if (hold_new_workers) {
        held_start = start;
        return real(thread, attr, held_worker, arg);
    }
    return real(thread, attr, start, arg);
}

/* Threads of this process, from /proc (-1 when unreadable). */
static int process_threads(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    int n = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1) break;
    fclose(f);
    return n;
}

typedef struct outputs {
    float *output, *grad_value, *grad_sampling_locations, *grad_attention_weights;
} outputs;

static void outputs_alloc(outputs *o, const tu_case *tc)
{
    o->output = tu_floats(tc->output_elements);
    o->grad_value = tu_floats(tc->value_elements);
    o->grad_sampling_locations = tu_floats(tc->locations_elements);
    o->grad_attention_weights = tu_floats(tc->weights_elements);
}

static void outputs_free(outputs *o)
{
    free(o->output);
    free(o->grad_value);
    free(o->grad_sampling_locations);
    free(o->grad_attention_weights);
}

/* Runs forward and backward with `threads` into outputs first filled with NaN bits, so an
 * element no thread wrote shows up. Returns the first failing status, or MSDA_OK. */
static msda_status run_both(tu_case *tc, int threads, outputs *o, msda_error *err)
{
    memset(o->output, 0xff, (size_t)tc->output_elements * sizeof(float));
    memset(o->grad_value, 0xff, (size_t)tc->value_elements * sizeof(float));
    memset(o->grad_sampling_locations, 0xff, (size_t)tc->locations_elements * sizeof(float));
    memset(o->grad_attention_weights, 0xff, (size_t)tc->weights_elements * sizeof(float));
    tc->p.threads = threads;
    msda_status st = msda_forward(&tc->p, tc->value, tc->sampling_locations, tc->attention_weights, o->output, err);
    if (st != MSDA_OK) return st;
    return msda_backward(&tc->p, tc->grad_output, tc->value, tc->sampling_locations, tc->attention_weights,
                         o->grad_value, o->grad_sampling_locations, o->grad_attention_weights, err);
}

/* Bitwise equality of every output; on failure names the first differing element. */
static int same_bits(const char *what, const tu_case *tc, const outputs *a, const outputs *b)
{
    const struct { const char *name; const float *x, *y; int64_t n; } parts[] = {
        {"output", a->output, b->output, tc->output_elements},
        {"grad_value", a->grad_value, b->grad_value, tc->value_elements},
        {"grad_sampling_locations", a->grad_sampling_locations, b->grad_sampling_locations, tc->locations_elements},
        {"grad_attention_weights", a->grad_attention_weights, b->grad_attention_weights, tc->weights_elements},
    };
    for (int i = 0; i < 4; i++) {
        for (int64_t j = 0; j < parts[i].n; j++) {
            if (memcmp(&parts[i].x[j], &parts[i].y[j], sizeof(float)) != 0)
                return tu_check(0, "%s: %s[%lld] differs: %.9g vs %.9g (%s)", what, parts[i].name, (long long)j,
                                (double)parts[i].x[j], (double)parts[i].y[j], tu_case_describe(tc));
        }
    }
    return tu_check(1, "%s", what);
}

/* The threads-1 result is the right answer, so that "same bits" means something. */
static void check_against_reference(const tu_case *tc, const outputs *o)
{
    double *out = tu_doubles(tc->output_elements), *gv = tu_doubles(tc->value_elements),
           *gl = tu_doubles(tc->locations_elements), *gw = tu_doubles(tc->weights_elements);
    ref_forward(&tc->p, tc->value, tc->sampling_locations, tc->attention_weights, out);
    ref_backward(&tc->p, tc->grad_output, tc->value, tc->sampling_locations, tc->attention_weights, gv, gl, gw);
    const char *ctx = tu_case_describe(tc);
    tu_compare_f("threads 1: output matches the reference", ctx, o->output, out, tc->output_elements, TU_TOL_F32);
    tu_compare_f("threads 1: grad_value matches the reference", ctx, o->grad_value, gv, tc->value_elements,
                 TU_TOL_F32);
    tu_compare_f("threads 1: grad_sampling_locations matches the reference", ctx, o->grad_sampling_locations, gl,
                 tc->locations_elements, (tu_tol){1e-4, 1e-3, 1e-5});
    tu_compare_f("threads 1: grad_attention_weights matches the reference", ctx, o->grad_attention_weights, gw,
                 tc->weights_elements, TU_TOL_F32);
    free(out);
    free(gv);
    free(gl);
    free(gw);
}

/* The split really uses min(threads, units) parts on these cases (else "same bits" proves
 * nothing about threads). */
static void check_parts(tu_case *tc, int threads, outputs *o)
{
    msda_job fwd, bwd;
    tc->p.threads = threads;
    if (msda__forward_job(&fwd, &tc->p, tc->value, tc->sampling_locations, tc->attention_weights, o->output,
                          NULL) != MSDA_OK ||
        msda__backward_job(&bwd, &tc->p, tc->grad_output, tc->value, tc->sampling_locations, tc->attention_weights,
                           o->grad_value, o->grad_sampling_locations, o->grad_attention_weights,
                           NULL) != MSDA_OK) {
        tu_check(0, "jobs for threads %d could not be built", threads);
        return;
    }
    const int64_t want_f = threads < fwd.units ? threads : fwd.units,
                  want_b = threads < bwd.units ? threads : bwd.units;
    tu_check(msda__job_parts(&fwd, threads) == want_f && msda__job_parts(&bwd, threads) == want_b,
             "threads %d: forward split into %d parts (expected %lld of %lld units), backward into %d "
             "(expected %lld of %lld)",
             threads, msda__job_parts(&fwd, threads), (long long)want_f, (long long)fwd.units,
             msda__job_parts(&bwd, threads), (long long)want_b, (long long)bwd.units);
}

/* One query per pixel, query q at pixel perm[q] of a random permutation, each sampling within
 * two pixels of its own on every level (locations layout B2QHLP). */
static void shuffle_encoder(tu_case *tc, tu_rng *rng)
{
    const int64_t Q = tc->p.num_queries, NL = tc->p.num_levels, HNP = tc->p.num_heads * NL * tc->p.num_points;
    int64_t *perm = tu_xmalloc((size_t)Q * sizeof *perm);
    for (int64_t q = 0; q < Q; q++) perm[q] = q;
    for (int64_t i = Q - 1; i > 0; i--) {
        const int64_t j = tu_int(rng, 0, i), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    for (int64_t q = 0; q < Q; q++) {
        int64_t l = 0;
        while (l + 1 < NL && perm[q] >= tc->level_start_index[l + 1]) l++;
        const int64_t pix = perm[q] - tc->level_start_index[l], h = tc->spatial_shapes[2 * l],
                      w = tc->spatial_shapes[2 * l + 1];
        for (int64_t i = 0; i < HNP; i++) {
            const int64_t sl = i / tc->p.num_points % NL;
            tc->sampling_locations[q * HNP + i] =
                (float)((pix % w + 0.5) / w + tu_uniform(rng, -2, 2) / tc->spatial_shapes[2 * sl + 1]);
            tc->sampling_locations[(Q + q) * HNP + i] =
                (float)((pix / w + 0.5) / h + tu_uniform(rng, -2, 2) / tc->spatial_shapes[2 * sl]);
        }
    }
    free(perm);
}

typedef struct concurrent_arg {
    tu_case *tc;
    outputs out;
    int ok;
} concurrent_arg;

static void *concurrent_caller(void *p)
{
    concurrent_arg *a = p;
    tu_case local = *a->tc;       /* own problem struct: threads is written per call */
    a->ok = 1;
    for (int i = 0; i < 3 && a->ok; i++)
        a->ok = run_both(&local, 4, &a->out, NULL) == MSDA_OK;
    return NULL;
}

int main(void)
{
    /* 1 natively; an emulator (qemu-user, make test-arm64) may run a thread of its own */
    const int own_threads = process_threads();
    /* qemu-user 7.2 aborts in a fork() of a threaded process: make test-arm64 sets this */
    const int no_fork = getenv("MSDA_TEST_NO_FORK") != NULL;
    /* batch x heads: 3, 10, 7, 14, 5 (none divides by 3 or 8). Case 3 has one query per pixel
     * (296) in pixel order, whose forward parts end inside a query block's heads; case 4 the same
     * shapes with its queries in a random order, each sampling around its own pixel, so the
     * backward's order comes from the locations. */
    static const int64_t shapes_a[] = {40, 30, 20, 15, 7, 9};
    static const int64_t shapes_b[] = {17, 23, 5, 1};
    static const int64_t shapes_c[] = {64, 48};
    static const int64_t shapes_d[] = {16, 14, 8, 7, 4, 4};
    enum { CASES = 5 };
    tu_case cases[CASES];
    tu_case_init(&cases[0], 101, 1, 3000, 3, 5, 3, 4, shapes_a, 0);
    tu_case_init(&cases[1], 202, 2, 300, 5, 33, 2, 3, shapes_b, 15);
    tu_case_init(&cases[2], 303, 1, 5000, 7, 4, 1, 4, shapes_c, 6);
    tu_case_init(&cases[3], 505, 2, 296, 7, 32, 3, 4, shapes_d, 0);
    tu_case_init(&cases[4], 606, 1, 296, 5, 32, 3, 4, shapes_d, 2);
    for (int i = 0; i < CASES; i++) {
        tu_rng rng;
        tu_rng_seed(&rng, cases[i].seed);
        tu_case_fill(&cases[i], &rng, -0.1, 1.1);
        if (i == 1) tu_case_sprinkle_far(&cases[i], &rng, 0.05);
        if (i == 4) shuffle_encoder(&cases[i], &rng);
    }

    /* A worker that does not run during a call (here: held from its start; on a busy machine: not
     * scheduled yet) does not hold the call up: the caller claims every part itself, with the
     * same bits. Before any other call, so that this one starts the pool's first worker. A hang
     * here is the failure: alarm turns it into one. */
    {
        outputs one, two;
        outputs_alloc(&one, &cases[3]);
        outputs_alloc(&two, &cases[3]);
        msda_error err = {0};
        run_both(&cases[3], 1, &one, &err);
        hold_new_workers = 1;
        signal(SIGALRM, held_timeout);
        alarm(HANG_SECONDS);
        tu_check(run_both(&cases[3], 2, &two, &err) == MSDA_OK, "held worker: threads 2 failed: %s", err.message);
        hold_new_workers = 0;
        pthread_mutex_lock(&hold_lock);
        while (held < 1) pthread_cond_wait(&hold_cond, &hold_lock);   /* it was started */
        alarm(0);
        tu_check(held == 1, "held worker: %d workers were started and held, expected 1", held);
        held = -1;
        pthread_cond_broadcast(&hold_cond);
        pthread_mutex_unlock(&hold_lock);
        same_bits("threads 2 with its worker held: the caller ran every part, the bits of threads 1", &cases[3], &one,
                  &two);
        outputs_free(&one);
        outputs_free(&two);
    }

    outputs base[CASES], got;
    outputs_alloc(&got, &cases[1]);
    static const int thread_counts[] = {2, 3, 8, 1000};
    for (int i = 0; i < CASES; i++) {
        tu_case *tc = &cases[i];
        outputs_alloc(&base[i], tc);
        msda_error err;
        tu_check(run_both(tc, 1, &base[i], &err) == MSDA_OK, "threads 1 failed: %s", err.message);
        check_against_reference(tc, &base[i]);
        outputs o;
        outputs_alloc(&o, tc);
        for (size_t k = 0; k < sizeof thread_counts / sizeof thread_counts[0]; k++) {
            const int threads = thread_counts[k];
            char what[64];
            snprintf(what, sizeof what, "case %d: threads %d gives the bits of threads 1", i, threads);
            if (!tu_check(run_both(tc, threads, &o, &err) == MSDA_OK, "threads %d failed: %s", threads, err.message))
                continue;
            same_bits(what, tc, &base[i], &o);
            if (threads <= 8) check_parts(tc, threads, &o);
        }
        outputs_free(&o);
    }

    /* More threads than the pool's maximum: all of them start, and a call with a full pool
     * needs no new thread (so succeeds even when pthread_create would fail). */
    {
        tu_case big;
        static const int64_t shapes_big[] = {8, 8};
        tu_case_init(&big, 404, 1, 4096, 8, 32, 1, 4, shapes_big, 0);   /* work for 64 parts */
        tu_rng rng;
        tu_rng_seed(&rng, 404);
        tu_case_fill(&big, &rng, 0, 1);
        outputs one, many;
        outputs_alloc(&one, &big);
        outputs_alloc(&many, &big);
        msda_job job;
        big.p.threads = 1000;
        msda__forward_job(&job, &big.p, big.value, big.sampling_locations, big.attention_weights, one.output, NULL);
        tu_check(msda__job_parts(&job, 1000) == MSDA_MAX_THREADS, "threads 1000 split into %d parts, expected %d",
                 msda__job_parts(&job, 1000), MSDA_MAX_THREADS);
        msda_error err = {0};
        tu_check(run_both(&big, 1, &one, &err) == MSDA_OK, "big, threads 1: %s", err.message);
        tu_check(run_both(&big, 1000, &many, &err) == MSDA_OK, "big, threads 1000: %s", err.message);
        same_bits("threads 1000 (64 parts) gives the bits of threads 1", &big, &one, &many);
        tu_check(process_threads() - own_threads + 1 == MSDA_MAX_THREADS,
                 "pool of %d threads (with the caller) after threads 1000, found %d (and %d before any call)",
                 MSDA_MAX_THREADS, process_threads(), own_threads);
        fail_thread_create = 1;
        tu_check(run_both(&big, 1000, &many, &err) == MSDA_OK, "a full pool needs no new thread, got %s",
                 err.message);
        fail_thread_create = 0;
        outputs_free(&one);
        outputs_free(&many);
        tu_case_free(&big);
    }

    /* Reused pool: the thread count stays at main + workers however many calls follow. */
    const int after_first = process_threads();
    outputs o1;
    outputs_alloc(&o1, &cases[0]);
    for (int i = 0; i < 6; i++) run_both(&cases[0], 2 + i % 7, &o1, NULL);
    tu_check(process_threads() == after_first, "6 more calls changed the thread count from %d to %d", after_first,
             process_threads());

    /* Two callers at once: one gets the pool, the other runs alone; both get the same bits. */
    concurrent_arg args[2] = {{&cases[1], {0}, 0}, {&cases[1], {0}, 0}};
    pthread_t callers[2];
    for (int i = 0; i < 2; i++) outputs_alloc(&args[i].out, &cases[1]);
    int created = 0;
    for (int i = 0; i < 2; i++) created += pthread_create(&callers[i], NULL, concurrent_caller, &args[i]) == 0;
    if (tu_check(created == 2, "could not start the two caller threads")) {
        for (int i = 0; i < 2; i++) pthread_join(callers[i], NULL);
        for (int i = 0; i < 2; i++) {
            tu_check(args[i].ok, "concurrent caller %d: a call failed", i);
            same_bits("concurrent callers get the bits of threads 1", &cases[1], &base[1], &args[i].out);
        }
    }
    for (int i = 0; i < 2; i++) outputs_free(&args[i].out);

    /* A forked child has no workers; it must start its own pool instead of waiting forever. */
    if (no_fork) printf("skipped (MSDA_TEST_NO_FORK): the two fork() checks\n");
    fflush(stdout);
    pid_t pid = no_fork ? -1 : fork();
    if (pid == 0) {
        alarm(HANG_SECONDS);
        outputs_alloc(&got, &cases[1]);
        int ok = run_both(&cases[1], 3, &got, NULL) == MSDA_OK &&
                 memcmp(got.output, base[1].output, (size_t)cases[1].output_elements * sizeof(float)) == 0 &&
                 memcmp(got.grad_value, base[1].grad_value, (size_t)cases[1].value_elements * sizeof(float)) == 0;
        _exit(ok ? 0 : 1);
    }
    int status = -1;
    const int waited = pid > 0 && waitpid(pid, &status, 0) == pid;
    if (!no_fork)
        tu_check(waited && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                 "after fork(), the child's threads-3 call failed or hung (wait status %d)", status);

    /* In a fresh child (no pool yet), a failing pthread_create surfaces as MSDA_ERR_THREADS. */
    fflush(stdout);
    pid = no_fork ? -1 : fork();
    if (pid == 0) {
        alarm(HANG_SECONDS);
        fail_thread_create = 1;
        msda_error err = {0};
        outputs_alloc(&got, &cases[0]);
        const msda_status st = run_both(&cases[0], 3, &got, &err);
        const int ok = st == MSDA_ERR_THREADS && err.status == MSDA_ERR_THREADS &&
                       strstr(err.message, "threads is 3") != NULL;
        if (!ok) printf("child: status %s, message \"%s\"\n", msda_status_string(st), err.message);
        fail_thread_create = 0;
        /* and the next call, once threads can start again, works */
        const int ok2 = run_both(&cases[0], 3, &got, &err) == MSDA_OK &&
                        memcmp(got.output, base[0].output, (size_t)cases[0].output_elements * sizeof(float)) == 0;
        fflush(stdout);
        _exit(ok && ok2 ? 0 : 1);
    }
    status = -1;
    const int waited2 = pid > 0 && waitpid(pid, &status, 0) == pid;
    if (!no_fork)
        tu_check(waited2 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                 "a failing pthread_create did not give MSDA_ERR_THREADS naming threads, or the retry failed "
                 "(wait status %d)", status);

    /* Tiny work stays on one thread: waking a worker would cost more than it saves. */
    {
        tu_case tiny;
        static const int64_t shapes_tiny[] = {4, 4};
        tu_case_init(&tiny, 505, 3, 10, 5, 4, 1, 2, shapes_tiny, 0);
        msda_job job;
        tiny.p.threads = 8;
        outputs ot;
        outputs_alloc(&ot, &tiny);
        tu_check(msda__forward_job(&job, &tiny.p, tiny.value, tiny.sampling_locations, tiny.attention_weights,
                                   ot.output, NULL) == MSDA_OK &&
                     msda__job_parts(&job, 8) == 1,
                 "a tiny forward asked for 8 threads splits into %d parts, expected 1", msda__job_parts(&job, 8));
        outputs_free(&ot);
        tu_case_free(&tiny);
    }

    /* Parts follow the work (src/pool.c): at least 2^16 units each, a unit one multiply-add
     * (1,024 a query here) or, in the backward, a quarter of a zeroed grad_value element. */
    {
        static const int64_t shapes_q[] = {16, 16}, shapes_wide[] = {128, 64}, shapes_mid[] = {64, 64};
        const struct { int64_t q, h; const int64_t *shapes; int fwd, bwd; } want[] = {
            {127, 8, shapes_q, 1, 3},    /* forward 130,048 units: 1 part; backward 276,480: 4 parts > 3 threads */
            {128, 8, shapes_q, 2, 3},    /* forward 131,072: 2 parts */
            {4, 2, shapes_wide, 1, 2},   /* backward: 2,048 + 524,288 / 4 = 133,120 units */
            {4, 2, shapes_mid, 1, 1},    /* backward: 2,048 + 262,144 / 4 = 67,584 units */
        };
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            tu_case tc;
            tu_case_init(&tc, 606 + i, 1, want[i].q, want[i].h, 32, 1, 4, want[i].shapes, 0);
            outputs ow;
            outputs_alloc(&ow, &tc);
            msda_job fwd, bwd;
            tc.p.threads = 3;
            const int ok = msda__forward_job(&fwd, &tc.p, tc.value, tc.sampling_locations, tc.attention_weights,
                                             ow.output, NULL) == MSDA_OK &&
                           msda__backward_job(&bwd, &tc.p, tc.grad_output, tc.value, tc.sampling_locations,
                                              tc.attention_weights, ow.grad_value, ow.grad_sampling_locations,
                                              ow.grad_attention_weights, NULL) == MSDA_OK;
            tu_check(ok && msda__job_parts(&fwd, 3) == want[i].fwd && msda__job_parts(&bwd, 3) == want[i].bwd,
                     "%lld queries, %lld heads at 3 threads: forward %d parts (expected %d), backward %d (expected %d)",
                     (long long)want[i].q, (long long)want[i].h, ok ? msda__job_parts(&fwd, 3) : -1, want[i].fwd,
                     ok ? msda__job_parts(&bwd, 3) : -1, want[i].bwd);
            outputs_free(&ow);
            tu_case_free(&tc);
        }
    }

    outputs_free(&o1);
    outputs_free(&got);
    for (int i = 0; i < CASES; i++) {
        outputs_free(&base[i]);
        tu_case_free(&cases[i]);
    }
    return tu_finish();
}
