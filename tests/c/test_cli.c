/* The native command line end to end, on valid cases: writes case directories with the .npy
 * writer, runs the CLI ($MSDA_CLI, default build/native/msda) as a child process, and checks
 * forward and backward against the float64 reference on seeded random cases over all 16 option
 * combinations (both integer dtypes for the shape files, --threads 1 and 3), half-precision
 * inputs, JavaScript's number printing and crosscheck --expect. Refusals: test_cli_refusals.c. */
#define _POSIX_C_SOURCE 200809L
#include "cli_run.h"
#include "numbers.h"
#include "reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(void)
{
    if (cli_start("test_cli")) return 1;
    test_against_reference();
    test_half_inputs();
    test_js_numbers();
    test_crosscheck();
    cli_finish();
    return tu_finish();
}
