/* Memory-floor probe: the kernels' own row reads and writes, replayed. For one of the bench
 * configs (tests/bench/cases.js's distributions, one thread) it walks the queries in the kernel's
 * order (src/kernel/walks.h: sample_order, the next query's rows fetched ahead) and, for every
 * (query, head, sample), the inside corners the kernel reads (geometry.h's group_corners: the
 * same addresses), with the least arithmetic that still touches every byte:
 *   forward:  the kernel's taps (emit_taps: each inside corner's row, in the kernel's order),
 *             summed with one add a vector and no weights, the output row written;
 *   backward: the same reads plus grad_output's row, each inside corner's grad_value row read,
 *             one add, written back; the location and weight gradients written.
 * The bilinear corner math is the kernel's (it decides the addresses); the channel work is one
 * vector add a row. A kernel near this floor is limited by its walk's memory traffic, not by
 * its arithmetic: the limit probe (probe.c) bounds the other side. Built with AVX2 natively on
 * x86-64 (the library's default ISA there; refused on a CPU without it), with the kernel's
 * flags in wasm. Prints one JSON line, each
 * pass the minimum of 5 runs:
 *   {"probe":"walk","config":"encoder","fwd_ms":..,"bwd_ms":..}
 * usage: walk_probe CONFIG [--cpu]   (small, decoder, encoder, encoder-shuffled, decoder-2stage,
 *                                     decoder-2stage-sorted) */
#define _POSIX_C_SOURCE 199309L
#define MSDA_KERNEL_ISA walkprobe
#include "kernel/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* wall clock, as the limit probe and tests/bench/bench.js time; --cpu: CPU time, as kernel_bench */
static int cpu_time;
#ifdef __EMSCRIPTEN__
#include <emscripten.h>
EM_JS(double, node_cpu_ms, (void), { const u = process.cpuUsage(); return (u.user + u.system) / 1000; });
#endif

static double now_ms(void)
{
#ifdef __EMSCRIPTEN__
    if (cpu_time) return node_cpu_ms();
#endif
    struct timespec t;
    clock_gettime(cpu_time ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static uint64_t rng_state = 12345;
static float uniform(float lo, float hi)   /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return lo + (hi - lo) * (float)((uint32_t)((z ^ (z >> 31)) >> 32) >> 8) * (1.0f / 16777216.0f);
}

static float *floats(int64_t n)
{
    float *p = calloc((size_t)n, sizeof *p);
    if (!p) {
        fprintf(stderr, "walk_probe: out of memory\n");
        exit(1);
    }
    return p;
}

#define WALK_C 32   /* the bench configs' channels: 8 vectors a row, 8 independent sums */

/* forward: the kernel's taps (forward.h's emit_taps: the same rows in the same order), summed
 * with one add a vector and no weights */
static void replay_forward_query(const msda_plan *p, const msda_tensors *t, geom_cache *gc, taps *tp, int64_t b,
                                 int64_t q, int64_t h)
{
    const int64_t Q = p->num_queries, H = p->num_heads, NL = p->num_levels, P = p->num_points;
    const ptrdiff_t xy = (ptrdiff_t)p->loc_stride_xy, ps = (ptrdiff_t)p->loc_stride_point;
    const float *value_bh = t->value + b * p->value_stride_batch + h * p->value_stride_head;
    const float *loc_qh = t->sampling_locations + b * p->loc_stride_batch + q * p->loc_stride_query +
                          h * p->loc_stride_head;
    const float *weights = t->attention_weights + ((b * Q + q) * H + h) * NL * P;
    float *out = t->output + ((b * Q + q) * H + h) * WALK_C;
    vf acc[WALK_C / MSDA_VW];
    for (int v = 0; v < WALK_C / MSDA_VW; v++) acc[v] = vf_zero();
    int n = 0;
    for (int64_t l = 0; l < NL; l++) {
        const level_geom *lg = geom_of(gc, p, l);
        for (int64_t pt = 0; pt < P; pt += 4) {
            const int count = P - pt < 4 ? (int)(P - pt) : 4;
            v4 x, y;
            load_points(loc_qh + l * p->loc_stride_level + pt * ps, ps, xy, count, &x, &y);
            point_group pg;
            group_corners(x, y, lg, &pg);
            const v4 a = load_partial(weights + l * P + pt, count);
            const v4 aw[4] = {v4_mul(a, pg.weight[0]), v4_mul(a, pg.weight[1]), v4_mul(a, pg.weight[2]),
                              v4_mul(a, pg.weight[3])};
            if (n + 16 > MSDA_TAPS) {   /* as the kernel: sum what fits */
                for (int i = 0; i < n; i++)
                    for (int v = 0; v < WALK_C / MSDA_VW; v++) acc[v] = vf_add(acc[v], vf_load((const float *)(const void *)tp->row[i] + MSDA_VW * v));
                n = 0;
            }
            n = emit_taps(tp, n, &pg, aw, count, (const char *)(value_bh + lg->start), lg, (int)sizeof(float));
        }
    }
    for (int i = 0; i < n; i++)
        for (int v = 0; v < WALK_C / MSDA_VW; v++) acc[v] = vf_add(acc[v], vf_load((const float *)(const void *)tp->row[i] + MSDA_VW * v));
    for (int v = 0; v < WALK_C / MSDA_VW; v++) vf_store(out + MSDA_VW * v, acc[v]);
}

/* The rows of every inside corner of (b, q, h): summed per vector (forward: into the output
 * row), or each grad_value row += grad_output's row (backward). */
static void replay_query(const msda_plan *p, const msda_tensors *t, geom_cache *gc, int64_t b, int64_t q, int64_t h,
                         int backward, v4 *sink)
{
    const int64_t Q = p->num_queries, H = p->num_heads, NL = p->num_levels, P = p->num_points;
    const ptrdiff_t xy = (ptrdiff_t)p->loc_stride_xy, ps = (ptrdiff_t)p->loc_stride_point;
    const int64_t head = b * p->value_stride_batch + h * p->value_stride_head;
    const float *loc_qh = t->sampling_locations + b * p->loc_stride_batch + q * p->loc_stride_query +
                          h * p->loc_stride_head;
    const float *weights = t->attention_weights + ((b * Q + q) * H + h) * NL * P;
    vf acc[WALK_C / MSDA_VW], g[WALK_C / MSDA_VW];
    for (int v = 0; v < WALK_C / MSDA_VW; v++) {
        acc[v] = vf_zero();
        g[v] = backward ? vf_load(t->grad_output + ((b * Q + q) * H + h) * WALK_C + MSDA_VW * v) : vf_zero();
    }
    v4 weight_sum = v4_zero();
    for (int64_t l = 0; l < NL; l++) {
        const level_geom *lg = geom_of(gc, p, l);
        const ptrdiff_t delta[4] = {0, lg->pixel_stride, lg->row_stride, lg->row_stride + lg->pixel_stride};
        for (int64_t pt = 0; pt < P; pt += 4) {
            const int count = P - pt < 4 ? (int)(P - pt) : 4;
            v4 x, y;
            load_points(loc_qh + l * p->loc_stride_level + pt * ps, ps, xy, count, &x, &y);
            point_group pg;
            group_corners(x, y, lg, &pg);
            weight_sum = v4_add(weight_sum, load_partial(weights + l * P + pt, count));
            for (int i = 0; i < count; i++)
                for (int k = 0; k < 4; k++) {
                    if (!(pg.mask[i] >> k & 1u)) continue;
                    const ptrdiff_t o = head + lg->start + pg.offset[i] + delta[k];
                    const float *row = t->value + o;
                    for (int v = 0; v < WALK_C / MSDA_VW; v++) acc[v] = vf_add(acc[v], vf_load(row + MSDA_VW * v));
                    if (!backward) continue;
                    float *grad_row = t->grad_value + o;
                    for (int v = 0; v < WALK_C / MSDA_VW; v++)
                        vf_store(grad_row + MSDA_VW * v, vf_add(vf_load(grad_row + MSDA_VW * v), g[v]));
                }
        }
    }
    if (!backward) {
        float *out = t->output + ((b * Q + q) * H + h) * WALK_C;
        for (int v = 0; v < WALK_C / MSDA_VW; v++) vf_store(out + MSDA_VW * v, acc[v]);
        out[0] += v4_lane(weight_sum, 0);
        return;
    }
    float lanes[WALK_C];
    for (int v = 0; v < WALK_C / MSDA_VW; v++) vf_store(lanes + MSDA_VW * v, acc[v]);
    *sink = v4_add(*sink, v4_set(lanes[0], lanes[1], v4_lane(weight_sum, 0), 0.0f));
    float *gw = t->grad_attention_weights + ((b * Q + q) * H + h) * NL * P;
    float *gl = t->grad_sampling_locations + b * p->loc_stride_batch + q * p->loc_stride_query + h * p->loc_stride_head;
    for (int64_t i = 0; i < NL * P; i++) {
        gw[i] = lanes[0];
        gl[i * 2] = gl[i * 2 + 1] = lanes[1];
    }
}

/* One pass over every query of every batch, in the kernel's order (forward_range / backward_walk). */
static void replay(const msda_plan *p, const msda_tensors *t, int backward, v4 *acc)
{
    geom_cache gc;
    geom_cache_init(&gc, p);
    sample_grid sg;
    sample_grid_init(&sg, p, backward ? MSDA_BACKWARD_STRIP : MSDA_FORWARD_STRIP);
    static uint16_t order[MSDA_ORDER_CHUNK];
    static taps tp;
    fetch_ahead fa = {0.0f};
    if (backward) memset(t->grad_value, 0, (size_t)p->value_elements * sizeof(float));
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t q0 = 0; q0 < p->num_queries; q0 += MSDA_ORDER_CHUNK) {
            const int64_t left = p->num_queries - q0;
            const int n = (int)(left < MSDA_ORDER_CHUNK ? left : MSDA_ORDER_CHUNK);
            sample_order(p, t, &sg, b, q0, n, order);
            const int fetch = backward || fetch_walk(&sg, order, n);
            for (int i = 0; i < n; i++) {
                if (fetch && i + 1 < n) fetch_query(&fa, p, t, b, q0 + order[i + 1], backward);
                for (int64_t h = 0; h < p->num_heads; h++)
                    if (backward) replay_query(p, t, &gc, b, q0 + order[i], h, 1, acc);
                    else replay_forward_query(p, t, &gc, &tp, b, q0 + order[i], h);
            }
        }
    *acc = v4_add(*acc, v4_splat(fa.sink));
}

int main(int argc, char **argv)
{
#if MSDA_VW == 8 && defined(__x86_64__)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2")) {
        fprintf(stderr, "walk_probe: built for AVX2, which this CPU does not have\n");
        return 2;
    }
#endif
    static const char *const names[] = {"small", "decoder", "encoder", "encoder-shuffled", "decoder-2stage",
                                        "decoder-2stage-sorted"};
    cpu_time = argc == 3 && strcmp(argv[2], "--cpu") == 0;
    int which = -1;
    for (int i = 0; (argc == 2 || cpu_time) && i < 6; i++)
        if (strcmp(argv[1], names[i]) == 0) which = i;
    if (which < 0) {
        fprintf(stderr, "walk_probe: the config is '%s', expected small, decoder, encoder, encoder-shuffled, "
                        "decoder-2stage or decoder-2stage-sorted\n", argc > 1 ? argv[1] : "");
        return 2;
    }
    static const int64_t small_shapes[8] = {32, 32, 16, 16, 8, 8, 4, 4};
    static const int64_t detr_shapes[8] = {100, 167, 50, 84, 25, 42, 13, 21};
    const int64_t *shapes = which == 0 ? small_shapes : detr_shapes;
    int64_t starts[4], L = 0;
    for (int l = 0; l < 4; l++) {
        starts[l] = L;
        L += shapes[2 * l] * shapes[2 * l + 1];
    }
    const int two_stage = which >= 4;
    msda_problem pr;
    msda_problem_init(&pr);
    pr.batch = which == 0 ? 2 : 1;
    pr.num_queries = which == 1 ? 300 : two_stage ? 900 : L;
    pr.num_heads = 8;
    pr.channels = 32;
    pr.num_levels = 4;
    pr.num_points = 4;
    pr.value_length = L;
    pr.spatial_shapes = shapes;
    pr.level_start_index = starts;
    msda_plan plan;
    msda_error err;
    if (msda__plan(&pr, &plan, &err) != MSDA_OK) {
        fprintf(stderr, "walk_probe: %s\n", err.message);
        return 1;
    }
    const int64_t B = plan.batch, Q = plan.num_queries, HNP = 8 * 4 * 4;
    msda_tensors t = {0};
    float *value = floats(plan.value_elements), *loc = floats(plan.locations_elements),
          *weights = floats(plan.weights_elements), *grad_output = floats(plan.output_elements);
    t.value = value;
    t.sampling_locations = loc;
    t.attention_weights = weights;
    t.grad_output = grad_output;
    t.output = floats(plan.output_elements);
    t.grad_value = floats(plan.value_elements);
    t.grad_sampling_locations = floats(plan.locations_elements);
    t.grad_attention_weights = floats(plan.weights_elements);
    for (int64_t i = 0; i < plan.value_elements; i++) value[i] = uniform(-1, 1);
    for (int64_t i = 0; i < plan.weights_elements; i++) weights[i] = uniform(0, 1) / 16.0f;
    for (int64_t i = 0; i < plan.output_elements; i++) grad_output[i] = uniform(-1, 1);
    /* places as cases.js: the encoder's own pixel (shuffled: a random permutation of them), a
     * random point (decoder), a random level-0 pixel (two-stage; sorted: in pixel order) */
    int64_t *place = malloc((size_t)Q * sizeof *place);
    if (!place) return 1;
    for (int64_t q = 0; q < Q; q++) place[q] = two_stage ? (int64_t)uniform(0, (float)(shapes[0] * shapes[1])) : q;
    if (which == 3)
        for (int64_t i = Q - 1; i > 0; i--) {
            const int64_t j = (int64_t)uniform(0, (float)(i + 1)), x = place[i];
            place[i] = place[j];
            place[j] = x;
        }
    if (which == 5)
        for (int64_t i = 1; i < Q; i++)
            for (int64_t j = i; j > 0 && place[j - 1] > place[j]; j--) {
                const int64_t x = place[j];
                place[j] = place[j - 1];
                place[j - 1] = x;
            }
    for (int64_t b = 0; b < B; b++)
        for (int64_t q = 0; q < Q; q++) {
            float rx = uniform(0, 1), ry = uniform(0, 1);
            if (two_stage) {
                rx = ((float)(place[q] % shapes[1]) + 0.5f) / (float)shapes[1];
                ry = ((float)(place[q] / shapes[1]) + 0.5f) / (float)shapes[0];
            } else if (which >= 2) {
                int l = 0;
                while (l < 3 && place[q] >= starts[l + 1]) l++;
                const int64_t pix = place[q] - starts[l], w = shapes[2 * l + 1], h = shapes[2 * l];
                rx = ((float)(pix % w) + 0.5f) / (float)w;
                ry = ((float)(pix / w) + 0.5f) / (float)h;
            }
            for (int64_t i = 0; i < HNP; i++) {
                const int64_t l = i / 4 % 4;
                float *xy = loc + ((b * Q + q) * HNP + i) * 2;
                xy[0] = which == 0 ? uniform(0, 1) : rx + uniform(-4, 4) / (float)shapes[2 * l + 1];
                xy[1] = which == 0 ? uniform(0, 1) : ry + uniform(-4, 4) / (float)shapes[2 * l];
            }
        }
    free(place);
    double best[2] = {1e30, 1e30};
    v4 acc = v4_zero();
    for (int r = 0; r < 5; r++)
        for (int pass = 0; pass < 2; pass++) {
            const double t0 = now_ms();
            replay(&plan, &t, pass, &acc);
            const double ms = now_ms() - t0;
            if (ms < best[pass]) best[pass] = ms;
        }
    printf("{\"probe\":\"walk\",\"config\":\"%s\",\"fwd_ms\":%.3f,\"bwd_ms\":%.3f,\"sink\":%g}\n", names[which], best[0],
           best[1], (double)(v4_lane(acc, 0) + t.output[0] + t.grad_value[0]));
    return 0;
}
