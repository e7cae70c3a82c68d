/* Test helpers; see testutil.h. */
#include "testutil.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;

void tu_rng_seed(tu_rng *rng, uint64_t seed) { rng->state = seed; }

uint64_t tu_rng_next(tu_rng *rng)
{
    uint64_t z = (rng->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double tu_uniform(tu_rng *rng, double lo, double hi)
{
    return lo + (hi - lo) * ((double)(tu_rng_next(rng) >> 11) * 0x1.0p-53);
}

int64_t tu_int(tu_rng *rng, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(tu_rng_next(rng) % (uint64_t)(hi - lo + 1));
}

int tu_combos(void)
{
    int n = 1;
    for (int id = 0; id < MSDA_OPTION_COUNT; id++) n *= msda_options[id].count;
    return n;
}

/* The place value of option id's digit. */
static int combo_radix(int id)
{
    int r = 1;
    for (int k = 0; k < id; k++) r *= msda_options[k].count;
    return r;
}

int tu_combo_value(int combo, int id)
{
    return combo / combo_radix(id) % msda_options[id].count;
}

int tu_combo_with(int combo, int id, int value)
{
    return combo + (value - tu_combo_value(combo, id)) * combo_radix(id);
}

void tu_set_combo(msda_problem *p, int combo)
{
    for (int id = 0; id < MSDA_OPTION_COUNT; id++) msda_option_set(p, id, tu_combo_value(combo, id));
}

void *tu_xmalloc(size_t bytes)
{
    void *ptr = malloc(bytes ? bytes : 1);
    if (!ptr) {
        fprintf(stderr, "out of memory allocating %zu bytes\n", bytes);
        exit(2);
    }
    return ptr;
}

float *tu_floats(int64_t n) { return tu_xmalloc((size_t)n * sizeof(float)); }
double *tu_doubles(int64_t n) { return tu_xmalloc((size_t)n * sizeof(double)); }

uint16_t tu_half_of(float x, int bfloat16)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    if (bfloat16) return (uint16_t)((b >> 16) | ((b & 0x7f800000u) == 0x7f800000u && (b & 0x7fffffu) ? 0x40u : 0u));
    const uint32_t sign = b >> 16 & 0x8000u, man = b & 0x7fffffu;
    const int e = (int)(b >> 23 & 0xffu) - 112;
    if (e == 255 - 112) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | man >> 13 : 0u));
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) return (uint16_t)(sign | (e > -10 ? (man | 0x800000u) >> (14 - e) : 0u));
    return (uint16_t)(sign | (uint32_t)e << 10 | man >> 13);
}

uint16_t *tu_case_half_value(tu_case *tc, int bfloat16)
{
    uint16_t *bits = tu_xmalloc((size_t)tc->value_elements * sizeof *bits);
    for (int64_t i = 0; i < tc->value_elements; i++) bits[i] = tu_half_of(tc->value[i], bfloat16);
    msda_widen_half(bits, tc->value, tc->value_elements, bfloat16);
    return bits;
}

void tu_case_init(tu_case *tc, uint64_t seed, int64_t batch, int64_t num_queries, int64_t num_heads,
                  int64_t channels, int64_t num_levels, int64_t num_points, const int64_t *shapes, int combo)
{
    if (num_levels > TU_MAX_LEVELS) {
        fprintf(stderr, "tu_case_init: num_levels %lld > %d\n", (long long)num_levels, TU_MAX_LEVELS);
        exit(2);
    }
    memset(tc, 0, sizeof *tc);
    tc->seed = seed;
    msda_problem_init(&tc->p);
    int64_t total = 0;
    for (int64_t l = 0; l < num_levels; l++) {
        tc->spatial_shapes[2 * l] = shapes[2 * l];
        tc->spatial_shapes[2 * l + 1] = shapes[2 * l + 1];
        tc->level_start_index[l] = total;
        total += shapes[2 * l] * shapes[2 * l + 1];
    }
    tc->p.batch = batch;
    tc->p.num_queries = num_queries;
    tc->p.num_heads = num_heads;
    tc->p.channels = channels;
    tc->p.num_levels = num_levels;
    tc->p.num_points = num_points;
    tc->p.value_length = total;
    tc->p.spatial_shapes = tc->spatial_shapes;
    tc->p.level_start_index = tc->level_start_index;
    tu_set_combo(&tc->p, combo);
    tc->value_elements = batch * total * num_heads * channels;
    tc->weights_elements = batch * num_queries * num_heads * num_levels * num_points;
    tc->locations_elements = 2 * tc->weights_elements;
    tc->output_elements = batch * num_queries * num_heads * channels;
    tc->value = calloc((size_t)tc->value_elements, sizeof(float));
    tc->sampling_locations = calloc((size_t)tc->locations_elements, sizeof(float));
    tc->attention_weights = calloc((size_t)tc->weights_elements, sizeof(float));
    tc->grad_output = calloc((size_t)tc->output_elements, sizeof(float));
    if (!tc->value || !tc->sampling_locations || !tc->attention_weights || !tc->grad_output) {
        fprintf(stderr, "tu_case_init: out of memory\n");
        exit(2);
    }
}

void tu_case_fill(tu_case *tc, tu_rng *rng, double loc_lo, double loc_hi)
{
    for (int64_t i = 0; i < tc->value_elements; i++) tc->value[i] = (float)tu_uniform(rng, -1, 1);
    for (int64_t i = 0; i < tc->locations_elements; i++)
        tc->sampling_locations[i] = (float)tu_uniform(rng, loc_lo, loc_hi);
    for (int64_t i = 0; i < tc->weights_elements; i++) tc->attention_weights[i] = (float)tu_uniform(rng, 0, 1);
    for (int64_t i = 0; i < tc->output_elements; i++) tc->grad_output[i] = (float)tu_uniform(rng, -1, 1);
}

void tu_case_sprinkle_far(tu_case *tc, tu_rng *rng, double fraction)
{
    static const float far[] = {1e30f, -1e30f, INFINITY, -INFINITY, NAN, 3.5f, -2.25f, 1e7f, -1e7f};
    for (int64_t i = 0; i < tc->locations_elements; i++)
        if (tu_uniform(rng, 0, 1) < fraction)
            tc->sampling_locations[i] = far[tu_int(rng, 0, (int64_t)(sizeof far / sizeof far[0]) - 1)];
}

void tu_case_random(tu_case *tc, uint64_t seed, int combo)
{
    static const int64_t channels[] = {1, 3, 5, 32, 33};
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    const int64_t num_levels = tu_int(&rng, 1, 4);
    int64_t shapes[2 * TU_MAX_LEVELS];
    for (int64_t l = 0; l < num_levels; l++) {
        switch (tu_int(&rng, 0, 4)) {
        case 0: shapes[2 * l] = 1; shapes[2 * l + 1] = 1; break;                      /* 1x1 */
        case 1: shapes[2 * l] = 1; shapes[2 * l + 1] = tu_int(&rng, 2, 7); break;     /* 1xN */
        case 2: shapes[2 * l] = tu_int(&rng, 2, 7); shapes[2 * l + 1] = 1; break;     /* Nx1 */
        default: shapes[2 * l] = tu_int(&rng, 2, 9); shapes[2 * l + 1] = tu_int(&rng, 2, 9); break;
        }
    }
    tu_case_init(tc, seed, tu_int(&rng, 1, 2), tu_int(&rng, 1, 5), tu_int(&rng, 1, 3),
                 channels[tu_int(&rng, 0, 4)], num_levels, tu_int(&rng, 1, 3), shapes, combo);
    tu_case_fill(tc, &rng, -0.25, 1.25);
}

void tu_case_free(tu_case *tc)
{
    free(tc->value);
    free(tc->sampling_locations);
    free(tc->attention_weights);
    free(tc->grad_output);
    memset(tc, 0, sizeof *tc);
}

const char *tu_combo_name(const msda_problem *p)
{
    static char buf[128];
    int n = 0;
    for (int id = 0; id < MSDA_OPTION_COUNT && n < (int)sizeof buf; id++) {
        const int v = msda_option_get(p, id);
        n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%s=%s", id ? " " : "", msda_options[id].field,
                      v >= 0 && v < msda_options[id].count ? msda_options[id].words[v] : "?");
    }
    return buf;
}

const char *tu_case_describe(const tu_case *tc)
{
    static char buf[512];
    const msda_problem *p = &tc->p;
    int n = snprintf(buf, sizeof buf, "seed=%llu B=%lld Nq=%lld Nh=%lld C=%lld Nl=%lld Np=%lld shapes=[",
                     (unsigned long long)tc->seed, (long long)p->batch, (long long)p->num_queries,
                     (long long)p->num_heads, (long long)p->channels, (long long)p->num_levels,
                     (long long)p->num_points);
    for (int64_t l = 0; l < p->num_levels && n < (int)sizeof buf; l++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%lldx%lld", l ? "," : "",
                      (long long)p->spatial_shapes[2 * l], (long long)p->spatial_shapes[2 * l + 1]);
    if (n < (int)sizeof buf) snprintf(buf + n, sizeof buf - (size_t)n, "] %s", tu_combo_name(p));
    return buf;
}

const tu_tol TU_TOL_F32 = {1e-5, 1e-4, 0.0};

/* Shared by both comparisons; got is read through a double accessor. */
static int compare(const char *what, const char *context, const float *got_f, const double *got_d,
                   const double *ref, int64_t n, tu_tol tol)
{
    double max_ref = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(ref[i]) && fabs(ref[i]) > max_ref) max_ref = fabs(ref[i]);
    int64_t bad = 0, worst = -1;
    double worst_ratio = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double g = got_f ? (double)got_f[i] : got_d[i], r = ref[i];
        double ratio;
        if (isnan(r) || isnan(g)) ratio = isnan(r) && isnan(g) ? 0.0 : INFINITY;
        else if (isinf(r) || isinf(g)) ratio = g == r ? 0.0 : INFINITY;
        else ratio = fabs(g - r) / (tol.abs + tol.rel * fabs(r) + tol.rel_max * max_ref);
        if (ratio > 1.0) bad++;
        if (ratio > worst_ratio || worst < 0) { worst_ratio = ratio; worst = i; }
    }
    if (bad == 0) return tu_check(1, "%s", what);
    const double g = got_f ? (double)got_f[worst] : got_d[worst];
    return tu_check(0, "%s [%s]: %lld of %lld elements beyond tolerance; worst [%lld] got %.9g expected %.9g "
                    "(|err| %.3g, %.3g x tolerance)",
                    what, context, (long long)bad, (long long)n, (long long)worst, g, ref[worst],
                    fabs(g - ref[worst]), worst_ratio);
}

int tu_compare_f(const char *what, const char *context, const float *got, const double *ref, int64_t n, tu_tol tol)
{
    return compare(what, context, got, NULL, ref, n, tol);
}

int tu_compare_d(const char *what, const char *context, const double *got, const double *ref, int64_t n, tu_tol tol)
{
    return compare(what, context, NULL, got, ref, n, tol);
}

int tu_check(int ok, const char *fmt, ...)
{
    if (ok) {
        passed++;
        return 1;
    }
    failed++;
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL: ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    fflush(stdout);
    return 0;
}

int tu_finish(void)
{
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
