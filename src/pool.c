/* Splitting a job into parts, and the native thread pool that runs them.
 *
 * The pool is created on first use and reused by every later call: workers sleep on a
 * condition variable between calls. A call's parts are claimed one by one, by the calling thread
 * and by whichever workers wake up in time: a worker the system has not scheduled yet (a busy
 * machine, a small job) leaves its part to the others instead of making the call wait for it,
 * so more threads never make a call slower than one thread by more than a wake-up. Any thread
 * may run any part: the bits do not depend on it. One call uses the pool at a time; a call that
 * finds it busy (another thread of the program is inside a call) runs on its own thread, which
 * gives the same bits. Storage is static: no allocation. */
/* pthread_atfork and friends under -std=c11 */
#define _POSIX_C_SOURCE 200809L

#include "threads.h"

#include <stdint.h>
#include <string.h>

/* The fewest units of work (one multiply-add of a sample's channel; the backward zeroing four
 * grad_value elements) a part may have: 2^16, about 28 us natively and 40 us in wasm SIMD on the
 * 2-vCPU Xeon of docs/threads.md, where waking a thread and joining it measured 5-13 us in both
 * (tests/bench/threads_small.js). So a part costs at least 3x its thread's wake-up: 2 threads beat
 * 1 wherever a second core is free, and cost at most a wake-up more where none is. The same
 * number for the native pool and the wasm threads module, so both split a problem alike. */
#define MSDA_MIN_WORK_PER_PART (1 << 16)

/* The work of a job, in the units above. */
static double job_work(const msda_job *job)
{
    const msda_plan *p = &job->plan;
    const double macs = (double)p->batch * (double)p->num_queries * (double)p->num_heads *
                        (double)p->num_levels * (double)p->num_points * (double)p->channels;
    if (job->kind == MSDA_JOB_FORWARD) return macs;
    /* Every sample is visited once per pass, the backward doing about twice the forward's work
     * a sample; it also zeroes grad_value first, which splits with its units and can be most of
     * the work (8 queries on the encoder's pyramid: 5.7 M elements, 33 K multiply-adds). A
     * zeroed element measured 0.02-0.07 ns natively and 0.07-0.13 ns in wasm SIMD, a
     * multiply-add 0.2-0.6 ns: a quarter of a unit. */
    return 2.0 * macs + (double)p->value_elements / 4.0;
}

int msda__job_parts(const msda_job *job, int threads)
{
    if (threads > MSDA_MAX_THREADS) threads = MSDA_MAX_THREADS;
    if (threads < 1) threads = 1;
    const double by_work = job_work(job) / MSDA_MIN_WORK_PER_PART;
    int parts = threads;
    if ((double)parts > by_work) parts = by_work < 1.0 ? 1 : (int)by_work;
    if ((int64_t)parts > job->units) parts = (int)job->units;
    return parts < 1 ? 1 : parts;
}

void msda__job_run_part(const msda_job *job, int part, int parts)
{
    if (parts < 1 || part < 0 || part >= parts) return;
    /* units * part fits: units <= output or value elements, far below 2^56. */
    if (job->kind == MSDA_JOB_ZERO) {
        const int64_t n = job->plan.value_elements, begin = n * part / parts, end = n * (part + 1) / parts;
        memset(job->tensors.grad_value + begin, 0, (size_t)(end - begin) * sizeof(float));
        return;
    }
    const int64_t begin = job->units * part / parts, end = job->units * (part + 1) / parts;
    if (job->kind == MSDA_JOB_FORWARD)
        msda__forward_range(&job->plan, &job->tensors, begin, end);
    else
        msda__backward_range(&job->plan, &job->tensors, begin, end);
}

#if defined(__EMSCRIPTEN__) && defined(MSDA_WASM_THREADS)

/* The wasm threads module (dist/msda-simd-threads.wasm, on a shared memory): JS hands the parts
 * to its workers (bindings/wasm/threads.js), each of which calls msda_wasm_run_part on its own
 * instance, runs part 0 itself the same way, and returns when every part is done; nonzero when
 * a worker failed. */
__attribute__((import_module("env"), import_name("msda_wasm_run_parallel")))
int msda_wasm_run_parallel(const msda_job *job, int parts);
void msda_wasm_run_part(const msda_job *job, int part, int parts);

void msda_wasm_run_part(const msda_job *job, int part, int parts)
{
    msda__job_run_part(job, part, parts);
}

static msda_status run_parts(const msda_job *job, int parts, msda_error *err)
{
    if (parts == 1) {
        msda__job_run_part(job, 0, 1);
        return MSDA_OK;
    }
    if (msda_wasm_run_parallel(job, parts) != 0) {
        msda__set_error(err, MSDA_ERR_THREADS,
                        "threads is %d: a worker thread failed, expected every worker to finish its part",
                        job->threads);
        return MSDA_ERR_THREADS;
    }
    return MSDA_OK;
}

#elif defined(__EMSCRIPTEN__) || defined(MSDA_NO_THREADS)

/* The other wasm modules run on one thread. */
static msda_status run_parts(const msda_job *job, int parts, msda_error *err)
{
    (void)err;
    (void)parts;
    msda__job_run_part(job, 0, 1);
    return MSDA_OK;
}

#else

#include <errno.h>
#include <pthread.h>

/* Held by the call that uses the pool, for the whole call. */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
/* Guards everything below. */
static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_ready = PTHREAD_COND_INITIALIZER;
static pthread_cond_t work_done = PTHREAD_COND_INITIALIZER;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static int started;                                   /* workers 1..started exist */
static unsigned long start_generation[MSDA_MAX_THREADS];
static unsigned long generation;                      /* bumped once per call */
static const msda_job *current_job;
static int current_parts;                             /* parts of the current call */
static int next_part;                                 /* the next part to claim */
static int parts_done;                                /* parts finished */

/* Claims and runs parts of the current call until none is left. Called with state_lock held;
 * returns with it held. */
static void run_claimed_parts(void)
{
    while (current_job && next_part < current_parts) {
        const msda_job *job = current_job;
        const int part = next_part++, parts = current_parts;
        pthread_mutex_unlock(&state_lock);
        msda__job_run_part(job, part, parts);
        pthread_mutex_lock(&state_lock);
        if (++parts_done == parts) pthread_cond_signal(&work_done);
    }
}

static void *worker_main(void *arg)
{
    const int index = (int)(intptr_t)arg;
    pthread_mutex_lock(&state_lock);
    unsigned long seen = start_generation[index];
    for (;;) {
        while (generation == seen) pthread_cond_wait(&work_ready, &state_lock);
        seen = generation;
        run_claimed_parts();   /* nothing left when it woke up late: back to sleep */
    }
    return NULL;
}

/* A child of fork() has none of the workers: lock around fork so no call is half-way, then
 * let the child start its own pool on first use. */
static void before_fork(void)
{
    pthread_mutex_lock(&pool_lock);
    pthread_mutex_lock(&state_lock);
}

static void after_fork_parent(void)
{
    pthread_mutex_unlock(&state_lock);
    pthread_mutex_unlock(&pool_lock);
}

static void after_fork_child(void)
{
    started = 0;
    pthread_cond_init(&work_ready, NULL);
    pthread_cond_init(&work_done, NULL);
    pthread_mutex_unlock(&state_lock);
    pthread_mutex_unlock(&pool_lock);
}

static void register_fork_handlers(void)
{
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* Starts workers up to index parts - 1. Called with pool_lock held. */
static msda_status grow_pool(int parts, msda_error *err)
{
    while (started < parts - 1) {
        const int index = started + 1;
        pthread_mutex_lock(&state_lock);
        start_generation[index] = generation;
        pthread_mutex_unlock(&state_lock);
        pthread_attr_t attr;
        int rc = pthread_attr_init(&attr);
        if (rc == 0) {
            /* The kernels use little stack; a small one keeps 64 workers cheap. Workers live
             * as long as the process, so nobody joins them. */
            pthread_attr_setstacksize(&attr, (size_t)1 << 20);
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            pthread_t thread;
            rc = pthread_create(&thread, &attr, worker_main, (void *)(intptr_t)index);
            pthread_attr_destroy(&attr);
        }
        if (rc != 0) {
            msda__set_error(err, MSDA_ERR_THREADS,
                            "threads is %d: could not start worker thread %d of the pool (error %d%s), "
                            "expected the system to allow %d threads",
                            parts, index + 1, rc, rc == EAGAIN ? ", EAGAIN: too many threads" : "", parts);
            return MSDA_ERR_THREADS;
        }
        started = index;
    }
    return MSDA_OK;
}

static msda_status run_parts(const msda_job *job, int parts, msda_error *err)
{
    if (parts == 1) {
        msda__job_run_part(job, 0, 1);
        return MSDA_OK;
    }
    pthread_once(&fork_once, register_fork_handlers);
    if (pthread_mutex_trylock(&pool_lock) != 0) {
        msda__job_run_part(job, 0, 1);              /* pool busy with another caller's call */
        return MSDA_OK;
    }
    msda_status st = grow_pool(parts, err);
    if (st != MSDA_OK) {
        pthread_mutex_unlock(&pool_lock);
        return st;
    }
    pthread_mutex_lock(&state_lock);
    current_job = job;
    current_parts = parts;
    next_part = 0;
    parts_done = 0;
    generation++;
    pthread_cond_broadcast(&work_ready);
    run_claimed_parts();
    while (parts_done < parts) pthread_cond_wait(&work_done, &state_lock);
    current_job = NULL;
    pthread_mutex_unlock(&state_lock);
    pthread_mutex_unlock(&pool_lock);
    return MSDA_OK;
}

#endif

/* A threaded backward runs in two stages. Its units own grad_value by level and head, and in
 * BLNC a pixel's row holds every head: zeroed by the units, two threads wrote alternate 512-byte
 * runs and took as long as one thread's single memset (DETR's 22.8 MB: 0.73-0.79 ms against 0.83;
 * contiguous halves 0.38-0.39 ms, `make backward-parts BENCH_ARGS=zero`). So its parts first
 * zero contiguous ranges of the buffer, then walk. */
msda_status msda__run(const msda_job *job, msda_error *err)
{
    const int parts = msda__job_parts(job, job->threads);
    if (job->kind != MSDA_JOB_BACKWARD || parts == 1) return run_parts(job, parts, err);
    msda_job stage = *job;
    stage.kind = MSDA_JOB_ZERO;
    msda_status st = run_parts(&stage, parts, err);
    if (st != MSDA_OK) return st;
    stage.kind = MSDA_JOB_BACKWARD;
    stage.plan.grad_value_zeroed = 1;
    return run_parts(&stage, parts, err);
}
