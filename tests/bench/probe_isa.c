/* The probe's passes for one ISA: PROBE_ISA names it and the build gives this file that ISA's
 * flags and vector width (mk/bench.mk), as the kernels get theirs. */
#define PROBE_CAT2(a, b) probe_##a##_##b
#define PROBE_CAT(a, b) PROBE_CAT2(a, b)
#define PROBE_FN(name) PROBE_CAT(name, PROBE_ISA)
#include "probe_body.h"
#include "probe.h"

void PROBE_CAT(run, PROBE_ISA)(const probe_data *p, int pass)
{
    if (pass == 0) PROBE_FN(forward)(p->loc, p->samples, p->ring, p->out);
    else PROBE_FN(backward)(p->loc, p->samples, p->ring, p->grad_ring, p->g, p->grad_loc, p->grad_weight);
}
