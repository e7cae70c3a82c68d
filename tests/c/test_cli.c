/* The native command line end to end: writes case directories with the .npy writer, runs the
 * CLI ($MSDA_CLI, default build/native/msda) as a child process, and checks
 *  - forward and backward against the float64 reference on seeded random cases over all 16
 *    option combinations (both integer dtypes for the shape files, --threads 1 and 3);
 *  - exit 2 with one "msda:" line naming the file or flag for every bad argument and every bad
 *    input (each malformed-.npy class, missing file, wrong shape or dtype, bad level starts,
 *    unreadable --in, unwritable --out), and that no output file is left behind. */
#define _POSIX_C_SOURCE 200809L
#include "npy.h"     /* the CLI library (libmsdacli.a): the CLI is not part of libmsda */
#include "numbers.h"
#include "reference.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/wait.h>

extern char **environ;

static char root[] = "/tmp/msda-test-cli-XXXXXX";
static const char *cli = "build/native/msda";

/* ---- running the CLI -------------------------------------------------------------------- */

typedef struct result {
    int status;          /* exit code, or 128 + signal */
    char err[4096];      /* stderr */
    char out[8192];      /* stdout */
} result;

static void slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
}

/* Runs cli with the NULL-terminated arguments. */
static void run_argv(result *r, char *const *args)
{
    char err_path[512], out_path[512];
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", root);
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", root);
    char *argv[40];
    int n = 0;
    argv[n++] = (char *)cli;
    while (args[n - 1] && n < 39) { argv[n] = args[n - 1]; n++; }
    argv[n] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rc = posix_spawn(&pid, cli, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    r->status = -1;
    if (rc != 0) {
        snprintf(r->err, sizeof r->err, "posix_spawn %s: %s", cli, strerror(rc));
        r->out[0] = '\0';
        return;
    }
    int ws;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {}
    r->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    slurp(err_path, r->err, sizeof r->err);
    slurp(out_path, r->out, sizeof r->out);
}

#define RUN(r, ...) do { char *const args_[] = {__VA_ARGS__, NULL}; run_argv((r), args_); } while (0)

/* ---- case directories ------------------------------------------------------------------- */

static char *path_in(const char *dir, const char *name)
{
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void save_or_die(const char *path, npy_dtype dtype, int ndim, const int64_t *shape, const void *data)
{
    char err[320];
    if (npy_save(path, dtype, ndim, shape, data, err, sizeof err)) {
        fprintf(stderr, "cannot write %s: %s\n", path, err);
        exit(1);
    }
}

static void value_shape(const msda_problem *p, int64_t s[4])
{
    const int blnc = p->value_layout == MSDA_VALUE_BLNC;
    s[0] = p->batch; s[1] = blnc ? p->value_length : p->num_heads;
    s[2] = blnc ? p->num_heads : p->value_length; s[3] = p->channels;
}

static void locations_shape(const msda_problem *p, int64_t s[6])
{
    const int bq = p->locations_layout == MSDA_LOCATIONS_BQHLP2;
    const int64_t q = p->num_queries, h = p->num_heads, l = p->num_levels, pt = p->num_points;
    s[0] = p->batch; s[1] = bq ? q : 2; s[2] = bq ? h : q; s[3] = bq ? l : h; s[4] = bq ? pt : l; s[5] = bq ? 2 : pt;
}

static void weights_shape(const msda_problem *p, int64_t s[5])
{
    s[0] = p->batch; s[1] = p->num_queries; s[2] = p->num_heads; s[3] = p->num_levels; s[4] = p->num_points;
}

/* Writes the case's inputs; the shape files as int32 when ints32. */
static void write_case(const char *dir, const tu_case *tc, int ints32)
{
    mkdir(dir, 0777);
    const msda_problem *p = &tc->p;
    int64_t vs[4], ls[6], ws[5];
    value_shape(p, vs);
    locations_shape(p, ls);
    weights_shape(p, ws);
    const int64_t go[3] = {p->batch, p->num_queries, p->num_heads * p->channels};
    const int64_t ss[2] = {p->num_levels, 2}, starts = p->num_levels;
    save_or_die(path_in(dir, "value.npy"), NPY_F4, 4, vs, tc->value);
    save_or_die(path_in(dir, "sampling_locations.npy"), NPY_F4, 6, ls, tc->sampling_locations);
    save_or_die(path_in(dir, "attention_weights.npy"), NPY_F4, 5, ws, tc->attention_weights);
    save_or_die(path_in(dir, "grad_output.npy"), NPY_F4, 3, go, tc->grad_output);
    if (ints32) {
        int32_t s32[2 * TU_MAX_LEVELS], l32[TU_MAX_LEVELS];
        for (int64_t i = 0; i < p->num_levels; i++) {
            s32[2 * i] = (int32_t)tc->spatial_shapes[2 * i];
            s32[2 * i + 1] = (int32_t)tc->spatial_shapes[2 * i + 1];
            l32[i] = (int32_t)tc->level_start_index[i];
        }
        save_or_die(path_in(dir, "spatial_shapes.npy"), NPY_I4, 2, ss, s32);
        save_or_die(path_in(dir, "level_start_index.npy"), NPY_I4, 1, &starts, l32);
    } else {
        save_or_die(path_in(dir, "spatial_shapes.npy"), NPY_I8, 2, ss, tc->spatial_shapes);
        save_or_die(path_in(dir, "level_start_index.npy"), NPY_I8, 1, &starts, tc->level_start_index);
    }
}

/* Loads DIR/name as <f4, checks its shape, compares with ref. */
static void check_output(const char *dir, const char *name, int ndim, const int64_t *shape, const double *ref,
                         int64_t n, const char *ctx)
{
    npy_array a;
    float *got = NULL;
    char err[320];
    if (!tu_check(npy_load_f32(path_in(dir, name), &a, &got, NULL, err, sizeof err) == 0, "%s: %s [%s]", name, err, ctx))
        return;
    int same = a.ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = a.shape[i] == shape[i];
    char sh[128], want[128];
    if (tu_check(same && a.count == n, "%s: shape %s, expected %s [%s]", name, npy_format_shape(a.ndim, a.shape, sh, sizeof sh),
                 npy_format_shape(ndim, shape, want, sizeof want), ctx))
        tu_compare_f(name, ctx, got, ref, n, TU_TOL_F32);
    free(got);
}

/* Names of the entries of dir (excluding . and ..), comma separated; "" when empty or absent. */
static const char *listing(const char *dir)
{
    static char buf[1024];
    buf[0] = '\0';
    DIR *d = opendir(dir);
    if (!d) return buf;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (buf[0]) strncat(buf, ",", sizeof buf - strlen(buf) - 1);
        strncat(buf, e->d_name, sizeof buf - strlen(buf) - 1);
    }
    closedir(d);
    return buf;
}

/* ---- valid cases against the reference -------------------------------------------------- */

static const char *layout_value(const msda_problem *p) { return p->value_layout == MSDA_VALUE_BLNC ? "BLNC" : "BNLC"; }

static void test_against_reference(void)
{
    for (int combo = 0; combo < TU_COMBOS; combo++) {
        tu_case tc;
        tu_case_random(&tc, 1000 + (uint64_t)combo, combo);
        tu_rng rng;
        tu_rng_seed(&rng, 77 + (uint64_t)combo);
        tu_case_sprinkle_far(&tc, &rng, 0.05);
        const msda_problem *p = &tc.p;
        const char *ctx = tu_case_describe(&tc);
        char in[512], out[512];
        snprintf(in, sizeof in, "%s/case%d", root, combo);
        snprintf(out, sizeof out, "%s/case%d/out/nested", root, combo); /* created with parents */
        write_case(in, &tc, combo % 2);
        /* flags in both spellings; options left at their defaults are sometimes omitted */
        char *args[20];
        int n = 0;
        args[n++] = "forward";
        args[n++] = "--in"; args[n++] = in;
        args[n++] = "--out"; args[n++] = out;
        if (tu_combo_value(combo, MSDA_OPTION_VALUE_LAYOUT)) { args[n++] = "--value-layout"; args[n++] = "BNLC"; }
        else if (tu_combo_value(combo, MSDA_OPTION_ALIGN_CORNERS)) args[n++] = "--value-layout=BLNC";
        args[n++] = p->locations_layout == MSDA_LOCATIONS_B2QHLP ? "--sampling-locations-layout=B2QHLP"
                                                                  : "--sampling-locations-layout=BQHLP2";
        if (p->align_corners) args[n++] = "--align-corners";
        if (p->padding == MSDA_PADDING_BORDER || combo % 3 == 0) {
            args[n++] = "--padding-mode";
            args[n++] = p->padding == MSDA_PADDING_BORDER ? "border" : "zeros";
        }
        args[n++] = combo % 3 ? "--threads=3" : "--threads=1";
        args[n] = NULL;
        tu_check(!strcmp(layout_value(p), tu_combo_value(combo, MSDA_OPTION_VALUE_LAYOUT) ? "BNLC" : "BLNC"), "the combination's value layout");
        result r;
        run_argv(&r, args);
        if (tu_check(r.status == 0 && r.err[0] == '\0', "forward exit %d, stderr \"%s\" [%s]", r.status, r.err, ctx)) {
            double *ref = tu_doubles(tc.output_elements);
            ref_forward(p, tc.value, tc.sampling_locations, tc.attention_weights, ref);
            const int64_t os[3] = {p->batch, p->num_queries, p->num_heads * p->channels};
            check_output(out, "output.npy", 3, os, ref, tc.output_elements, ctx);
            free(ref);
        }
        args[0] = "backward";
        run_argv(&r, args);
        if (tu_check(r.status == 0 && r.err[0] == '\0', "backward exit %d, stderr \"%s\" [%s]", r.status, r.err, ctx)) {
            double *gv = tu_doubles(tc.value_elements), *gl = tu_doubles(tc.locations_elements),
                   *gw = tu_doubles(tc.weights_elements);
            ref_backward(p, tc.grad_output, tc.value, tc.sampling_locations, tc.attention_weights, gv, gl, gw);
            int64_t vs[4], ls[6], ws[5];
            value_shape(p, vs);
            locations_shape(p, ls);
            weights_shape(p, ws);
            check_output(out, "grad_value.npy", 4, vs, gv, tc.value_elements, ctx);
            check_output(out, "grad_sampling_locations.npy", 6, ls, gl, tc.locations_elements, ctx);
            check_output(out, "grad_attention_weights.npy", 5, ws, gw, tc.weights_elements, ctx);
            free(gv); free(gl); free(gw);
        }
        const char *left = listing(out);
        tu_check(!strcmp(left, "grad_attention_weights.npy,grad_sampling_locations.npy,grad_value.npy,output.npy") ||
                 (strstr(left, "output.npy") && strstr(left, "grad_value.npy") && !strstr(left, "tmp") &&
                  left[0] != '.' && !strstr(left, ",.")),
                 "out dir holds exactly the four outputs, no temporaries: %s", left);
        tu_case_free(&tc);
    }
}

/* Half-precision inputs ('<f2', 'bfloat16'): the outputs are those of the float32 values the
 * bits stand for (the reference on the widened values), forward and backward. */
static void test_half_inputs(void)
{
    for (int kind = 0; kind < 2; kind++) {
        const npy_dtype dt = kind ? NPY_BF16 : NPY_F2;
        tu_case tc;
        tu_case_random(&tc, 4242 + (uint64_t)kind, 3);
        const msda_problem *p = &tc.p;
        float *arrays[4] = {tc.value, tc.sampling_locations, tc.attention_weights, tc.grad_output};
        const int64_t counts[4] = {tc.value_elements, tc.locations_elements, tc.weights_elements, tc.output_elements};
        char in[512], out[512];
        snprintf(in, sizeof in, "%s/half%d", root, kind);
        snprintf(out, sizeof out, "%s/half%d/out", root, kind);
        write_case(in, &tc, 0);
        int64_t vs[4], ls[6], ws[5];
        value_shape(p, vs);
        locations_shape(p, ls);
        weights_shape(p, ws);
        const int64_t go[3] = {p->batch, p->num_queries, p->num_heads * p->channels};
        const char *names[4] = {"value.npy", "sampling_locations.npy", "attention_weights.npy", "grad_output.npy"};
        const int nd[4] = {4, 6, 5, 3};
        const int64_t *shapes[4] = {vs, ls, ws, go};
        for (int a = 0; a < 4; a++) {
            uint16_t *bits = malloc((size_t)counts[a] * 2);
            for (int64_t i = 0; i < counts[a]; i++) {
                uint32_t u;
                memcpy(&u, &arrays[a][i], 4);
                bits[i] = kind ? (uint16_t)(u >> 16) : npy_f32_to_f16(u); /* bfloat16: truncated, still exact bits */
                u = kind ? npy_bf16_to_f32(bits[i]) : npy_f16_to_f32(bits[i]);
                memcpy(&arrays[a][i], &u, 4); /* the reference sees what the file holds */
            }
            save_or_die(path_in(in, names[a]), dt, nd[a], shapes[a], bits);
            free(bits);
        }
        const char *ctx = kind ? "bfloat16 inputs" : "float16 inputs";
        char *args[] = {"backward", "--in", in, "--out", out, "--value-layout", "BNLC", "--sampling-locations-layout",
                        "B2QHLP", NULL};
        tu_check(p->value_layout == MSDA_VALUE_BNLC && p->locations_layout == MSDA_LOCATIONS_B2QHLP, "combo 3 layouts");
        result r;
        run_argv(&r, args);
        if (tu_check(r.status == 0 && r.err[0] == '\0', "%s: backward exit %d, stderr \"%s\"", ctx, r.status, r.err)) {
            double *gv = tu_doubles(tc.value_elements), *gl = tu_doubles(tc.locations_elements),
                   *gw = tu_doubles(tc.weights_elements);
            ref_backward(p, tc.grad_output, tc.value, tc.sampling_locations, tc.attention_weights, gv, gl, gw);
            check_output(out, "grad_value.npy", 4, vs, gv, tc.value_elements, ctx);
            check_output(out, "grad_sampling_locations.npy", 6, ls, gl, tc.locations_elements, ctx);
            check_output(out, "grad_attention_weights.npy", 5, ws, gw, tc.weights_elements, ctx);
            free(gv); free(gl); free(gw);
        }
        args[0] = "forward";
        run_argv(&r, args);
        if (tu_check(r.status == 0 && r.err[0] == '\0', "%s: forward exit %d, stderr \"%s\"", ctx, r.status, r.err)) {
            double *ref = tu_doubles(tc.output_elements);
            ref_forward(p, tc.value, tc.sampling_locations, tc.attention_weights, ref);
            check_output(out, "output.npy", 3, go, ref, tc.output_elements, ctx);
            free(ref);
        }
        tu_case_free(&tc);
    }
}

/* ---- crosscheck --expect ------------------------------------------------------------------ */

/* JavaScript's String(x), x.toExponential(2) and the report's pairs, as node prints them
 * (generated once with node; tests/js/crosscheck.test.js compares the whole reports). */
static const struct { double x; const char *js; } JS_NUMBERS[] = {
    {0e+0, "0"},
    {-0.0, "0"},
    {1e+0, "1"},
    {-1e+0, "-1"},
    {1e-1, "0.1"},
    {3.333333333333333e-1, "0.3333333333333333"},
    {5.960464477539063e-8, "5.960464477539063e-8"},
    {4.8828125e-4, "0.00048828125"},
    {3.90625e-3, "0.00390625"},
    {5e-324, "5e-324"},
    {1.7976931348623157e+308, "1.7976931348623157e+308"},
    {1e+21, "1e+21"},
    {1e+20, "100000000000000000000"},
    {1.2345678901234568e+20, "123456789012345680000"},
    {1e-7, "1e-7"},
    {1e-6, "0.000001"},
    {1.234e-6, "0.000001234"},
    {-1.23e-6, "-0.00000123"},
    {9.007199254740992e+15, "9007199254740992"},
    {9.007199254740994e+15, "9007199254740994"},
    {3.4028234663852886e+38, "3.4028234663852886e+38"},
    {1.401298464324817e-45, "1.401298464324817e-45"},
    {9.5367431640625e-7, "9.5367431640625e-7"},
    {3e-1, "0.3"},
    {1e+2, "100"},
    {1e+100, "1e+100"},
    {-2.5e-300, "-2.5e-300"},
    {4.94e-322, "4.94e-322"},
    {6.103515625e-5, "0.00006103515625"},
    {6.5504e+4, "65504"},
    {1.0000000000000002e+0, "1.0000000000000002"},
    {3.0000000000000004e-1, "0.30000000000000004"},
    {1.2345678e+3, "1234.5678"},
    {3.141592653589793e+0, "3.141592653589793"},
    {2.718281828459045e+0, "2.718281828459045"},
    {1.5e-323, "1.5e-323"},
    {NAN, "NaN"},
    {INFINITY, "Infinity"},
    {-INFINITY, "-Infinity"},
    {7e-10, "7e-10"},
    {8.673617379884035e-19, "8.673617379884035e-19"},
    {1.1805916207174113e+21, "1.1805916207174113e+21"},
    {2.7939677238464355e-9, "2.7939677238464355e-9"},
};
static const struct { double x; const char *js; } JS_EXP2[] = {
    {1.125e+0, "1.13e+0"},
    {3.75e-1, "3.75e-1"},
    {2.675e+0, "2.67e+0"},
    {-1.125e+0, "-1.13e+0"},
    {9.995e+0, "9.99e+0"},
    {9.994999e+0, "9.99e+0"},
    {1e-7, "1.00e-7"},
    {1.23456e+2, "1.23e+2"},
    {1e-4, "1.00e-4"},
    {5e-1, "5.00e-1"},
    {9.995e+2, "1.00e+3"},
    {9.995e-300, "9.99e-300"},
};
static const struct { double a, b; const char *x, *y; } JS_PAIRS[] = {
    {9.32617e-2, 9.32618e-2, "0.0932617", "0.0932618"},
    {3.333333333333333e-1, 3.333334e-1, "0.3333333", "0.3333334"},
    {-6.6875e+0, 8.43159e+0, "-6.6875", "8.43159"},
    {1e+0, 1.0000001e+0, "1", "1.0000001"},
    {1e-1, 1e-1, "0.1", "0.1"},
};

static void test_js_numbers(void)
{
    char a[48], b[48];
    for (size_t i = 0; i < sizeof JS_NUMBERS / sizeof JS_NUMBERS[0]; i++)
        tu_check(!strcmp(js_number(JS_NUMBERS[i].x, a), JS_NUMBERS[i].js), "String(%.17g) is %s, got %s", JS_NUMBERS[i].x,
                 JS_NUMBERS[i].js, a);
    for (size_t i = 0; i < sizeof JS_EXP2 / sizeof JS_EXP2[0]; i++)
        tu_check(!strcmp(js_fmt(JS_EXP2[i].x, a), JS_EXP2[i].js), "(%.17g).toExponential(2) is %s, got %s", JS_EXP2[i].x,
                 JS_EXP2[i].js, a);
    for (size_t i = 0; i < sizeof JS_PAIRS / sizeof JS_PAIRS[0]; i++) {
        js_pair(JS_PAIRS[i].a, JS_PAIRS[i].b, a, b);
        tu_check(!strcmp(a, JS_PAIRS[i].x) && !strcmp(b, JS_PAIRS[i].y), "pair(%.17g, %.17g) is %s, %s; got %s, %s",
                 JS_PAIRS[i].a, JS_PAIRS[i].b, JS_PAIRS[i].x, JS_PAIRS[i].y, a, b);
    }
}

/* The native CLI's crosscheck on its own outputs: agree (exit 0); one element moved: exit 1,
 * named by its coordinates; without --expect: exit 2 pointing at the JS CLI. */
static void test_crosscheck(void)
{
    tu_case tc;
    tu_case_random(&tc, 5150, 0);
    char in[512], exp[600];
    snprintf(in, sizeof in, "%s/cross", root);
    snprintf(exp, sizeof exp, "%s/cross/mine", root);
    write_case(in, &tc, 0);
    result r;
    RUN(&r, "forward", "--in", in, "--out", exp);
    RUN(&r, "backward", "--in", in, "--out", exp);
    RUN(&r, "crosscheck", "--in", in, "--expect", exp);
    tu_check(r.status == 0 && strstr(r.out, "crosscheck: all 4 outputs agree\n") && r.err[0] == '\0',
             "crosscheck on the CLI's own outputs: exit %d, %s%s", r.status, r.out, r.err);
    tu_check(strstr(r.out, "tolerance for float32 (the default): |yours - ours| <= 4*u*M") != NULL, "says the rule: %s", r.out);
    /* grad_attention_weights (B, N_q, N_h, N_l, N_p): element 0 is [b=0, q=0, h=0, l=0, p=0] */
    npy_array a;
    float *gw = NULL;
    char err[320];
    if (npy_load_f32(path_in(exp, "grad_attention_weights.npy"), &a, &gw, NULL, err, sizeof err) == 0) {
        gw[0] += 0.5f;
        save_or_die(path_in(exp, "grad_attention_weights.npy"), NPY_F4, a.ndim, a.shape, gw);
        free(gw);
    }
    RUN(&r, "crosscheck", "--in", in, "--expect", exp, "--top", "1");
    tu_check(r.status == 1 && strstr(r.out, "    grad_attention_weights[b=0, q=0, h=0, l=0, p=0]: yours ") &&
             strstr(r.out, "grad_attention_weights   DISAGREE  1 of "),
             "one moved element: exit 1 and its coordinates: exit %d, %s", r.status, r.out);
    tu_check(strstr(r.err, "msda: crosscheck: grad_attention_weights (1 of ") == r.err, "stderr names it: %s", r.err);
    RUN(&r, "crosscheck", "--in", in, "--expect", exp, "--json");
    tu_check(r.status == 1 && r.out[0] == '{' && strstr(r.out, "\"agree\": false") && strstr(r.out, "\"disagree\": 1,"),
             "--json: one document: %s", r.out);
    RUN(&r, "crosscheck", "--in", in);
    tu_check(r.status == 2 && strstr(r.err, "crosscheck without --expect") && strstr(r.err, "npx msda crosscheck"),
             "without --expect: exit 2 pointing at the JS CLI: %s", r.err);
    RUN(&r, "crosscheck", "--in", in, "--expect", exp, "--dtype", "float64");
    tu_check(r.status == 2 && !strcmp(r.err, "msda: --dtype: 'float64', expected float32, float16 or bfloat16\n"), "bad --dtype: %s", r.err);
    RUN(&r, "forward", "--in", in, "--out", exp, "--json");
    tu_check(r.status == 2 && !strcmp(r.err, "msda: --json is only for msda crosscheck\n"), "--json for forward: %s", r.err);
    tu_case_free(&tc);
}

/* .npz cases (tests/fixtures/npz, written by Python's zipfile as np.savez and np.savez_compressed
 * write them): the directory's bytes; every prefix of the compressed one refused with exit 2
 * (never a crash: this suite also runs against the ASan+UBSan CLI). */
static void test_npz(void)
{
    const char *fixtures = "tests/fixtures/npz";
    char want[600], got[600], file[600], cmd[4096];
    snprintf(want, sizeof want, "%s/npz-dir", root);
    snprintf(got, sizeof got, "%s/npz-out", root);
    result r;
    snprintf(file, sizeof file, "%s/case", fixtures);
    RUN(&r, "backward", "--in", file, "--out", want);
    if (!tu_check(r.status == 0, "backward on %s: %s", file, r.err)) return;
    for (int k = 0; k < 2; k++) {
        snprintf(file, sizeof file, "%s/%s", fixtures, k ? "case-compressed.npz" : "case.npz");
        RUN(&r, "backward", "--in", file, "--out", got);
        tu_check(r.status == 0 && r.err[0] == '\0', "backward on %s: exit %d %s", file, r.status, r.err);
        snprintf(cmd, sizeof cmd, "cmp -s '%s/grad_value.npy' '%s/grad_value.npy' && cmp -s '%s/grad_sampling_locations.npy' "
                 "'%s/grad_sampling_locations.npy' && cmp -s '%s/grad_attention_weights.npy' '%s/grad_attention_weights.npy'",
                 want, got, want, got, want, got);
        tu_check(system(cmd) == 0, "%s: the directory's output bytes", file);
    }
    FILE *f = fopen(file, "rb");
    unsigned char buf[8192];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    char cut[600];
    snprintf(cut, sizeof cut, "%s/cut.npz", root);
    int bad = 0;
    for (size_t len = 4; len < n; len += len < 64 ? 1 : 37) {
        FILE *o = fopen(cut, "wb");
        fwrite(buf, 1, len, o);
        fclose(o);
        RUN(&r, "forward", "--in", cut, "--out", got);
        bad += r.status != 2 || strncmp(r.err, "msda: ", 6) != 0;
    }
    tu_check(n > 0 && bad == 0, "every cut of %s refused with exit 2 and one line (%d not)", file, bad);
}

/* ---- refusals ---------------------------------------------------------------------------- */

static tu_case good;           /* a small valid case written afresh before each refusal test */
static char good_dir[512], out_dir[512];

static void fresh_case(void)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", good_dir, out_dir);
    if (system(cmd) != 0) exit(1);
    write_case(good_dir, &good, 0);
}

/* Exit 2, exactly one stderr line starting "msda: " containing words, nothing in out_dir. */
static void expect_refusal(const char *what, const result *r, const char *words)
{
    size_t n = strlen(r->err);
    int one_line = n > 0 && r->err[n - 1] == '\n' && memchr(r->err, '\n', n - 1) == NULL;
    const char *left = listing(out_dir);
    tu_check(r->status == 2 && one_line && !strncmp(r->err, "msda: ", 6) && strstr(r->err, words) && !left[0],
             "%s: expected exit 2 and one line \"msda: ...%s...\" and no outputs; got exit %d, stderr \"%s\", out dir [%s]",
             what, words, r->status, r->err, left);
}

static void run_case(result *r, const char *command)
{
    RUN(r, (char *)command, "--in", good_dir, "--out", out_dir);
}

static void test_bad_arguments(void)
{
    result r;
    fresh_case();
    RUN(&r, "--help");
    tu_check(r.status == 0 && strstr(r.out, "usage: msda forward") && !r.err[0], "--help: exit %d", r.status);
    RUN(&r, "forward", "--in", good_dir, "--out", out_dir, "--help");
    tu_check(r.status == 0 && strstr(r.out, "--padding-mode") && !listing(out_dir)[0], "forward --help prints usage only");
    /* the version itself is compared with package.json by tests/js/cli.test.js */
    RUN(&r, "--version");
    tu_check(r.status == 0 && r.out[0] >= '0' && r.out[0] <= '9' && strchr(r.out, '.') && !r.err[0], "--version: exit %d, \"%s\"", r.status, r.out);
    RUN(&r, "backward", "--in", good_dir, "--out", out_dir, "--version");
    tu_check(r.status == 0 && r.out[0] >= '0' && r.out[0] <= '9' && !listing(out_dir)[0], "backward --version prints the version only");
    char *const none[] = {NULL};
    run_argv(&r, none);
    expect_refusal("no arguments", &r, "missing command");
    RUN(&r, "sideways", "--in", good_dir, "--out", out_dir);
    expect_refusal("unknown command", &r, "unknown command 'sideways'");
    RUN(&r, "forward", "--in", good_dir, "--out", out_dir, "--bogus");
    expect_refusal("unknown flag", &r, "unknown option '--bogus'");
    RUN(&r, "forward", "--in", good_dir, "--out", out_dir, "stray");
    expect_refusal("stray positional argument", &r, "unexpected argument 'stray'");
    RUN(&r, "forward", "--out", out_dir);
    expect_refusal("missing --in", &r, "missing --in");
    RUN(&r, "forward", "--in", good_dir);
    expect_refusal("missing --out", &r, "missing --out");
    RUN(&r, "forward", "--out", out_dir, "--in");
    expect_refusal("--in without its value", &r, "--in needs a value");
    RUN(&r, "forward", "--in", good_dir, "--in", good_dir, "--out", out_dir);
    expect_refusal("--in twice", &r, "--in given more than once");
    RUN(&r, "forward", "--in", good_dir, "--out", out_dir, "--value-layout", "NCHW");
    expect_refusal("bad --value-layout", &r, "--value-layout: 'NCHW', expected BLNC or BNLC");
    RUN(&r, "forward", "--in", good_dir, "--out", out_dir, "--sampling-locations-layout=BQHL2P");
    expect_refusal("bad --sampling-locations-layout", &r, "--sampling-locations-layout: 'BQHL2P'");
    RUN(&r, "forward", "--in", good_dir, "--out", out_dir, "--padding-mode", "reflect");
    expect_refusal("bad --padding-mode", &r, "--padding-mode: 'reflect', expected zeros or border");
    RUN(&r, "forward", "--in", good_dir, "--out", out_dir, "--threads", "0");
    expect_refusal("--threads 0", &r, "--threads: '0'");
    RUN(&r, "forward", "--in", good_dir, "--out", out_dir, "--threads", "2x");
    expect_refusal("--threads 2x", &r, "--threads: '2x'");
    RUN(&r, "forward", "--in", good_dir, "--out", out_dir, "--threads", " 3");
    expect_refusal("--threads with a space", &r, "--threads: ' 3'");
    RUN(&r, "forward", "--in", good_dir, "--out", out_dir, "--threads", "4097");
    expect_refusal("--threads past 4096", &r, "--threads: '4097', expected an integer from 1 to 4096");
    RUN(&r, "forward", "--in", good_dir, "--out", out_dir, "--threads", "99999999999999999999");
    expect_refusal("--threads huge", &r, "--threads: '99999999999999999999'");
    RUN(&r, "forward", "--in", good_dir, "--out", out_dir, "--align-corners=yes");
    expect_refusal("--align-corners with a value", &r, "--align-corners takes no value");
}

static void test_bad_paths(void)
{
    result r;
    char missing[600], file[600], under_file[700];
    fresh_case();
    snprintf(missing, sizeof missing, "%s/no-such-dir", root);
    RUN(&r, "forward", "--in", missing, "--out", out_dir);
    expect_refusal("missing --in dir", &r, "--in");
    tu_check(strstr(r.err, "No such file or directory") != NULL, "missing --in says why: %s", r.err);
    snprintf(file, sizeof file, "%s/value.npy", good_dir);
    RUN(&r, "forward", "--in", file, "--out", out_dir);
    expect_refusal("--in is a file (unreadable as a directory)", &r, "not a directory");
    snprintf(under_file, sizeof under_file, "%s/sub", file);
    RUN(&r, "forward", "--in", good_dir, "--out", under_file);
    tu_check(r.status == 2 && strstr(r.err, "--out") && strstr(r.err, "cannot create directory") &&
             !strchr(r.err, '\n')[1], "--out under a file (unwritable): exit %d, \"%s\"", r.status, r.err);
    RUN(&r, "forward", "--in", good_dir, "--out", file);
    tu_check(r.status == 2 && strstr(r.err, "--out") && strstr(r.err, "not a directory"),
             "--out is a file: exit %d, \"%s\"", r.status, r.err);
    if (geteuid() != 0) { /* permissions mean nothing to root */
        chmod(good_dir, 0);
        RUN(&r, "forward", "--in", good_dir, "--out", out_dir);
        chmod(good_dir, 0755);
        expect_refusal("unreadable --in", &r, "Permission denied");
        char ro[600];
        snprintf(ro, sizeof ro, "%s/readonly", root);
        mkdir(ro, 0555);
        chmod(ro, 0555);
        snprintf(under_file, sizeof under_file, "%s/out", ro);
        RUN(&r, "forward", "--in", good_dir, "--out", under_file);
        tu_check(r.status == 2 && strstr(r.err, "--out") && strstr(r.err, "Permission denied"),
                 "unwritable --out: exit %d, \"%s\"", r.status, r.err);
        RUN(&r, "forward", "--in", good_dir, "--out", ro);
        tu_check(r.status == 2 && strstr(r.err, "not writable"), "read-only --out: exit %d, \"%s\"", r.status, r.err);
    }
    /* all or nothing: when one output cannot be put in place (a directory holds the second of
     * backward's three names), none is written: refused before computing */
    fresh_case();
    mkdir(out_dir, 0777);
    char blocker[600];
    snprintf(blocker, sizeof blocker, "%s/grad_sampling_locations.npy", out_dir);
    mkdir(blocker, 0777);
    char kept[1200];
    snprintf(kept, sizeof kept, "%s/keep", blocker);
    FILE *keep = fopen(kept, "w");
    if (keep) fclose(keep);
    run_case(&r, "backward");
    tu_check(r.status == 2 && strstr(r.err, "grad_sampling_locations.npy is a directory, so the output cannot replace it") &&
             !strcmp(listing(out_dir), "grad_sampling_locations.npy"),
             "a destination that cannot be replaced: exit %d, \"%s\", out dir [%s]", r.status, r.err, listing(out_dir));
    /* a missing input file */
    fresh_case();
    unlink(path_in(good_dir, "attention_weights.npy"));
    run_case(&r, "forward");
    expect_refusal("missing attention_weights.npy", &r, "attention_weights.npy: cannot open: No such file");
    fresh_case();
    unlink(path_in(good_dir, "grad_output.npy"));
    run_case(&r, "forward");
    tu_check(r.status == 0, "forward does not need grad_output.npy: exit %d %s", r.status, r.err);
    snprintf(missing, sizeof missing, "rm -rf '%s'", out_dir);
    if (system(missing) != 0) exit(1);
    run_case(&r, "backward");
    expect_refusal("backward without grad_output.npy", &r, "grad_output.npy: cannot open");
}

/* Rewrites DIR/name with a header dict and data bytes (NumPy's padding). */
static void write_raw(const char *name, int major, const char *dict, const void *data, size_t n)
{
    unsigned char buf[NPY_HEADER_MAX * 2];
    size_t prefix = major == 1 ? 10 : 12, len = strlen(dict), hl = (prefix + len + 1 + 63) / 64 * 64 - prefix;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)major;
    buf[7] = 0;
    for (size_t k = 0; k < prefix - 8; k++) buf[8 + k] = (unsigned char)(hl >> (8 * k));
    memcpy(buf + prefix, dict, len);
    memset(buf + prefix + len, ' ', hl - len - 1);
    buf[prefix + hl - 1] = '\n';
    FILE *f = fopen(path_in(good_dir, name), "wb");
    if (!f) exit(1);
    fwrite(buf, 1, prefix + hl, f);
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}

/* Edits bytes of a file in place: replaces the first occurrence of from with to (same length),
 * or truncates/extends it by delta bytes when from is NULL. */
static void edit_file(const char *name, const char *from, const char *to, long delta)
{
    const char *path = path_in(good_dir, name);
    static unsigned char buf[1 << 16];
    FILE *f = fopen(path, "rb");
    size_t n = fread(buf, 1, sizeof buf - 16, f);
    fclose(f);
    if (from) {
        unsigned char *at = NULL;
        for (size_t i = 0; i + strlen(from) <= n && !at; i++)
            if (!memcmp(buf + i, from, strlen(from))) at = buf + i;
        if (!at) { fprintf(stderr, "edit_file: '%s' not in %s\n", from, path); exit(1); }
        memcpy(at, to, strlen(to));
    } else if (delta > 0) {
        memset(buf + n, 0x41, (size_t)delta);
        n += (size_t)delta;
    } else {
        n -= (size_t)-delta;
    }
    f = fopen(path, "wb");
    fwrite(buf, 1, n, f);
    fclose(f);
}

static void test_malformed_files(void)
{
    result r;
    const struct { const char *what, *file, *from, *to; long delta; const char *words; } edits[] = {
        {"wrong magic", "value.npy", "NUMPY", "NUMPX", 0, "value.npy: not a .npy file"},
        {"unsupported version", "attention_weights.npy", "NUMPY\x01", "NUMPY\x04", 0,
         "attention_weights.npy: unsupported .npy format version 4.0"},
        {"big-endian", "sampling_locations.npy", "'<f4'", "'>f4'", 0,
         "sampling_locations.npy: dtype '>f4' (big-endian): sampling_locations.npy must be little-endian float32, float16 or bfloat16: save tensor.astype('<f4')"},
        {"big-endian ints", "spatial_shapes.npy", "'<i8'", "'>i8'", 0,
         "spatial_shapes.npy: dtype '>i8' (big-endian): spatial_shapes.npy must be little-endian int64 or int32: save tensor.astype('<i8')"},
        {"Fortran order", "value.npy", "False", "True ", 0, "value.npy: Fortran-order"},
        {"other dtype", "value.npy", "'<f4'", "'<f8'", 0, "value.npy: dtype '<f8': value.npy must be float32, float16 or bfloat16: save tensor.astype(np.float32)"},
        {"2-byte void (np.save of ml_dtypes.bfloat16)", "value.npy", "'<f4'", "'<V2'", 0,
         "value.npy: dtype '<V2': a 2-byte void, which is how np.save writes ml_dtypes' bfloat16, but its bits cannot be "
         "told from any other 2-byte record: save bfloat16 as float32, which is exact: tensor.astype(np.float32)"},
        {"2-byte integers (a bit view of half precision)", "value.npy", "'<f4'", "'<i2'", 0,
         "value.npy: dtype '<i2': 2-byte integers, perhaps the bits of a float16 or bfloat16 tensor (a bit view), which astype would turn into integers: save float16 as tensor.view(np.float16), bfloat16 as float32 (tensor.view(ml_dtypes.bfloat16).astype(np.float32), which is exact)"},
        {"other int dtype", "level_start_index.npy", "'<i8'", "'<u8'", 0,
         "level_start_index.npy: dtype '<u8': level_start_index.npy must be int64 or int32: save tensor.astype(np.int64)"},
        {"header not a dict", "attention_weights.npy", "{'descr'", "['descr'", 0, "attention_weights.npy: header: expected '{'"},
        {"header with an unknown key", "value.npy", "'shape'", "'shapf'", 0, "value.npy: header: unexpected key 'shapf'"},
        {"truncated data", "value.npy", NULL, NULL, -4, "value.npy: truncated"},
        {"truncated header", "level_start_index.npy", NULL, NULL, -60, "level_start_index.npy: truncated: the header"},
        {"trailing garbage", "sampling_locations.npy", NULL, NULL, 8, "sampling_locations.npy: 8 bytes of trailing data"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        fresh_case();
        edit_file(edits[i].file, edits[i].from, edits[i].to, edits[i].delta);
        run_case(&r, i % 2 ? "backward" : "forward");
        expect_refusal(edits[i].what, &r, edits[i].words);
    }
    const float x[4] = {0};
    fresh_case();
    write_raw("attention_weights.npy", 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 1, 1, 1), }", x, 16);
    run_case(&r, "forward");
    expect_refusal("element count overflows", &r, "attention_weights.npy: shape (4294967296, 4294967296, 1, 1, 1) of '<f4' has more elements");
    fresh_case();
    write_raw("value.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", x, 12);
    run_case(&r, "forward");
    expect_refusal("shape disagrees with the data length", &r, "value.npy: truncated: shape (4,) of '<f4' needs 16 data bytes, the file has 12");
    fresh_case();
    write_raw("value.npy", 1, "", x, 0);
    run_case(&r, "forward");
    expect_refusal("empty header", &r, "value.npy: header: expected '{'");
    fresh_case();
    FILE *f = fopen(path_in(good_dir, "value.npy"), "wb");
    fclose(f);
    run_case(&r, "forward");
    expect_refusal("empty file", &r, "value.npy: empty file");

    /* every bad file is named in the one line, in the order the case lists them */
    fresh_case();
    edit_file("value.npy", "'<f4'", "'<f8'", 0);
    edit_file("sampling_locations.npy", "False", "True ", 0);
    unlink(path_in(good_dir, "grad_output.npy"));
    run_case(&r, "backward");
    expect_refusal("three bad files", &r, "value.npy: dtype '<f8': value.npy must be float32, float16 or bfloat16: save tensor.astype(np.float32); also: ");
    const char *second = strstr(r.err, "sampling_locations.npy: Fortran-order"), *third = strstr(r.err, "grad_output.npy: cannot open");
    tu_check(second && third && second < third && strstr(second, "; also: ") && strstr(second, "; also: ") < third,
             "the other two named after it: %s", r.err);
}

static void test_inconsistent_case(void)
{
    result r;
    const msda_problem *p = &good.p;
    char buf[256], sh[128];
    /* wrong dtypes */
    fresh_case();
    int64_t vs[4];
    value_shape(p, vs);
    int64_t *ints = calloc((size_t)good.value_elements, sizeof(int64_t));
    save_or_die(path_in(good_dir, "value.npy"), NPY_I8, 4, vs, ints);
    run_case(&r, "forward");
    expect_refusal("value.npy as <i8", &r, "value.npy: dtype '<i8': value.npy must be float32, float16 or bfloat16: save tensor.astype(np.float32)");
    free(ints);
    fresh_case();
    const int64_t ss[2] = {p->num_levels, 2};
    float fshapes[2 * TU_MAX_LEVELS] = {0};
    save_or_die(path_in(good_dir, "spatial_shapes.npy"), NPY_F4, 2, ss, fshapes);
    run_case(&r, "forward");
    expect_refusal("spatial_shapes.npy as <f4", &r,
                   "spatial_shapes.npy: dtype '<f4': spatial_shapes.npy must be int64 or int32: save tensor.astype(np.int64)");

    /* wrong shapes: each file in turn */
    fresh_case();
    int64_t ls[6];
    locations_shape(p, ls);
    ls[1] += 1;
    float *zeros = calloc((size_t)good.locations_elements * 4, sizeof(float));
    save_or_die(path_in(good_dir, "sampling_locations.npy"), NPY_F4, 6, ls, zeros);
    run_case(&r, "forward");
    ls[1] -= 1;
    snprintf(buf, sizeof buf, "sampling_locations.npy: shape (%lld, %lld,", (long long)ls[0], (long long)ls[1] + 1);
    expect_refusal("sampling_locations of the wrong shape", &r, buf);
    snprintf(buf, sizeof buf, "expected %s = (B, N_q, N_h, N_l, N_p, 2) per --sampling-locations-layout BQHLP2",
             npy_format_shape(6, ls, sh, sizeof sh));
    tu_check(strstr(r.err, buf) != NULL, "message gives the expected shape \"%s\": %s", buf, r.err);

    fresh_case();
    RUN(&r, "forward", "--in", good_dir, "--out", out_dir, "--sampling-locations-layout", "B2QHLP");
    expect_refusal("locations in the other layout than the flag says", &r,
                   "per --sampling-locations-layout B2QHLP with N_q and N_p from");
    tu_check(strstr(r.err, "; --sampling-locations-layout BQHLP2 makes the shapes fit\n") != NULL, "names the flag that fits: %s", r.err);
    fresh_case();
    RUN(&r, "forward", "--in", good_dir, "--out", out_dir, "--value-layout", "BNLC");
    expect_refusal("value in the other layout than the flag says", &r, "; --value-layout BLNC makes the shapes fit");

    /* level_start_index.npy left out: derived, the same outputs */
    fresh_case();
    char with_dir[600];
    snprintf(with_dir, sizeof with_dir, "%s-with", out_dir);
    RUN(&r, "forward", "--in", good_dir, "--out", with_dir);
    tu_check(r.status == 0, "forward with level_start_index.npy: %s", r.err);
    unlink(path_in(good_dir, "level_start_index.npy"));
    RUN(&r, "forward", "--in", good_dir, "--out", out_dir);
    if (tu_check(r.status == 0 && r.err[0] == '\0', "forward without level_start_index.npy: exit %d %s", r.status, r.err)) {
        char a[1400], b[700];
        snprintf(a, sizeof a, "cmp -s '%s/output.npy' '%s/output.npy'", with_dir, out_dir);
        tu_check(system(a) == 0, "without level_start_index.npy: the same output.npy");
        snprintf(b, sizeof b, "rm -rf '%s'", with_dir);
        if (system(b) != 0) fprintf(stderr, "could not remove %s\n", with_dir);
    }

    fresh_case();
    const int64_t flat[1] = {good.value_elements};
    save_or_die(path_in(good_dir, "value.npy"), NPY_F4, 1, flat, good.value);
    run_case(&r, "forward");
    expect_refusal("value not 4-d", &r, "value.npy: shape");
    tu_check(strstr(r.err, "expected 4 dimensions (B, L, N_h, C_h) per --value-layout BLNC") != NULL, "says why: %s", r.err);

    fresh_case();
    int64_t ws[5];
    weights_shape(p, ws);
    ws[2] += 1;
    save_or_die(path_in(good_dir, "attention_weights.npy"), NPY_F4, 5, ws, zeros);
    run_case(&r, "forward");
    expect_refusal("attention_weights with the wrong N_h", &r, "attention_weights.npy: shape");

    fresh_case();
    const int64_t go[3] = {p->batch, p->num_queries, p->num_heads * p->channels + 1};
    save_or_die(path_in(good_dir, "grad_output.npy"), NPY_F4, 3, go, zeros);
    run_case(&r, "backward");
    expect_refusal("grad_output with the wrong width", &r, "grad_output.npy: shape");
    tu_check(strstr(r.err, "(B, N_q, N_h*C_h)") != NULL, "says why: %s", r.err);

    fresh_case();
    const int64_t nl1 = p->num_levels + 1;
    int64_t starts[TU_MAX_LEVELS + 1] = {0};
    save_or_die(path_in(good_dir, "level_start_index.npy"), NPY_I8, 1, &nl1, starts);
    run_case(&r, "forward");
    expect_refusal("level_start_index of the wrong length", &r, "level_start_index.npy: shape");

    fresh_case();
    int64_t bad_starts[TU_MAX_LEVELS];
    memcpy(bad_starts, good.level_start_index, sizeof bad_starts);
    bad_starts[1] += 1;
    const int64_t nl = p->num_levels;
    save_or_die(path_in(good_dir, "level_start_index.npy"), NPY_I8, 1, &nl, bad_starts);
    run_case(&r, "forward");
    snprintf(buf, sizeof buf, "level_start_index.npy: level_start_index[1] is %lld, expected %lld",
             (long long)bad_starts[1], (long long)good.level_start_index[1]);
    expect_refusal("level_start_index not the prefix sums", &r, buf);

    fresh_case();
    int64_t shapes[2 * TU_MAX_LEVELS];
    memcpy(shapes, good.spatial_shapes, sizeof shapes);
    shapes[1] += 1; /* W_0 + 1: L no longer matches value */
    save_or_die(path_in(good_dir, "spatial_shapes.npy"), NPY_I8, 2, ss, shapes);
    run_case(&r, "forward");
    expect_refusal("spatial_shapes disagree with L", &r, "value.npy: shape");
    tu_check(strstr(r.err, "the sum of H*W over") && strstr(r.err, "spatial_shapes.npy"), "names both files: %s", r.err);

    fresh_case();
    shapes[1] = 0;
    save_or_die(path_in(good_dir, "spatial_shapes.npy"), NPY_I8, 2, ss, shapes);
    run_case(&r, "forward");
    expect_refusal("a level of width 0", &r, "spatial_shapes.npy: row 0 is");

    fresh_case();
    int64_t zero_b[4] = {0, vs[1], vs[2], vs[3]};
    save_or_die(path_in(good_dir, "value.npy"), NPY_F4, 4, zero_b, zeros);
    run_case(&r, "forward");
    expect_refusal("a zero-sized value", &r, "value.npy: shape (0,");
    free(zeros);
}

int main(void)
{
    const char *env = getenv("MSDA_CLI");
    if (env && *env) cli = env;
    if (access(cli, X_OK) != 0) {
        fprintf(stderr, "test_cli: %s is not an executable (build it with make native): %s\n", cli, strerror(errno));
        printf("0 passed, 1 failed\n");
        return 1;
    }
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    test_against_reference();
    test_half_inputs();
    test_js_numbers();
    test_crosscheck();
    test_npz();

    static const int64_t shapes[4] = {3, 4, 2, 2};
    tu_case_init(&good, 5, 2, 3, 2, 3, 2, 2, shapes, 0);
    tu_rng rng;
    tu_rng_seed(&rng, 5);
    tu_case_fill(&good, &rng, 0, 1);
    snprintf(good_dir, sizeof good_dir, "%s/good", root);
    snprintf(out_dir, sizeof out_dir, "%s/out", root);
    test_bad_arguments();
    test_bad_paths();
    test_malformed_files();
    test_inconsistent_case();
    tu_case_free(&good);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
    return tu_finish();
}
