/* A validated call split into parts that threads run independently; not public.
 *
 * msda_forward/msda_backward build a job, then msda__run shares its parts over the native
 * thread pool (src/pool.c). The wasm threads module exports the same steps so that its own
 * workers (bindings/wasm/threads.js) run the parts on a shared memory. Every part is a contiguous
 * range of work units (internal.h), and every output element has one writer unit that sums
 * in a fixed order, so the bits never depend on how many parts there are. */
#ifndef MSDA_THREADS_H
#define MSDA_THREADS_H

#include "internal.h"

/* MSDA_JOB_ZERO: a threaded backward's first stage; part k of n zeroes grad_value's buffer
 * [E k / n, E (k + 1) / n) of its E elements, so each thread writes one contiguous run. */
typedef enum msda_job_kind { MSDA_JOB_FORWARD = 0, MSDA_JOB_BACKWARD = 1, MSDA_JOB_ZERO = 2 } msda_job_kind;

typedef struct msda_job {
    msda_plan plan;
    msda_tensors tensors;
    msda_job_kind kind;
    int threads;          /* problem->threads */
    int64_t units;
} msda_job;

/* Most threads the native pool starts; more requested run as this many (same bits). */
#define MSDA_MAX_THREADS 64

/* Validate the problem and buffers and fill job (src/entry.c). */
msda_status msda__forward_job(msda_job *job, const msda_problem *problem, const void *value,
                              const float *sampling_locations, const float *attention_weights, float *output,
                              msda_error *err);
msda_status msda__backward_job(msda_job *job, const msda_problem *problem, const float *grad_output,
                               const void *value, const float *sampling_locations,
                               const float *attention_weights, float *grad_value,
                               float *grad_sampling_locations, float *grad_attention_weights, msda_error *err);

/* How many parts to split the job into for `threads` threads: at most threads and units, and
 * fewer when the work is too small for a thread's wake-up to pay off. */
int msda__job_parts(const msda_job *job, int threads);
/* Runs part `part` of `parts`: units [units*part/parts, units*(part+1)/parts). */
void msda__job_run_part(const msda_job *job, int part, int parts);
/* Runs the whole job on msda__job_parts(job, job->threads) threads of the pool. */
msda_status msda__run(const msda_job *job, msda_error *err);

#endif
