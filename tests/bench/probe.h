/* The lower-bound probe (tests/bench/probe.c): data shared by its per-ISA passes. */
#include <stdint.h>

typedef struct probe_data {
    int64_t samples;
    const float *loc, *ring, *g;
    float *out, *grad_ring, *grad_loc, *grad_weight;
} probe_data;

void probe_run_base(const probe_data *p, int pass);
void probe_run_avx2(const probe_data *p, int pass);
void probe_run_avx512(const probe_data *p, int pass);
