/* crosscheck --expect's report (see crosscheck.h): bindings/cli/crosscheck.js's, line for line,
 * on the bounded reference of bounds.c. */
#define _POSIX_C_SOURCE 200809L
#include "crosscheck.h"
#include "cases.h"
#include "messages.h"
#include "npy.h"
#include "numbers.h"
#include "texts.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const DTYPE_NAMES[3] = {"float32", "float16", "bfloat16"};
static const int U_EXPONENT[3] = {-24, -11, -8};

typedef struct worst_entry {
    double diff;
    int64_t index;
} worst_entry;

typedef struct cc_result {
    int64_t count, disagree, no_bound;
    double max_abs, max_ratio;
    int64_t *per_level; /* NULL for output */
    int64_t *per_head;
    worst_entry *worst;
    int nworst;
} cc_result;

static int compare(int which, const float *yours, const bounded *r, const dims *d, const cc_settings *s, cc_result *res)
{
    memset(res, 0, sizeof *res);
    res->count = r->count;
    if (which != CC_OUTPUT) {
        res->per_level = calloc((size_t)d->NL, sizeof(int64_t));
        if (!res->per_level) return -1;
    }
    res->per_head = calloc((size_t)d->H, sizeof(int64_t));
    if (!res->per_head) return -1;
    res->worst = malloc((size_t)(s->top ? s->top : 1) * sizeof(worst_entry));
    if (!res->worst) return -1;
    for (int64_t i = 0; i < r->count; i++) {
        const double y = yours[i], o = r->ref[i];
        if (isnan(y) && isnan(o)) continue;
        if (y == o) continue;
        const double diff = fabs(y - o), bound = bound_of(r, i, &s->tol);
        const double abs_diff = isnan(diff) ? INFINITY : diff;
        res->max_abs = js_max(res->max_abs, abs_diff);
        if (no_bound(r, i, &s->tol)) res->no_bound++;
        else res->max_ratio = js_max(res->max_ratio, bound > 0 ? abs_diff / bound : INFINITY);
        if (!(abs_diff <= bound)) {
            res->disagree++;
            const coords co = coordinates(which, i, d);
            if (res->per_level) res->per_level[co.level]++;
            res->per_head[co.head]++;
            if (s->top > 0 && (res->nworst < s->top || abs_diff > res->worst[res->nworst - 1].diff)) {
                int at = res->nworst < s->top ? res->nworst++ : s->top - 1;
                while (at > 0 && res->worst[at - 1].diff < abs_diff) {
                    res->worst[at] = res->worst[at - 1];
                    at--;
                }
                res->worst[at].diff = abs_diff;
                res->worst[at].index = i;
            }
        }
    }
    return 0;
}

/* name[b=0, q=12, ...], as bindings/cli/bounds.js formatCoordinates writes it. */
static void append_coordinates(text *t, const char *name, const coords *co)
{
    append(t, "%s[", name);
    for (int k = 0; k < co->count; k++) append(t, "%s%s=%lld", k ? ", " : "", co->key[k], (long long)co->v[k]);
    append(t, "]");
}

/* Does dtype hold x exactly (the bits back through it)? */
static int holds(float x, int dtype)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return (dtype == DTYPE_FLOAT16 ? npy_f16_to_f32(npy_f32_to_f16(u)) : npy_bf16_to_f32(npy_f32_to_bf16(u))) == u;
}

/* Does dtype hold every value of data (NaN aside), which has a value other than 0?
 * (bindings/cli/crosscheck.js halfDtypeHolding) */
static int holds_all(const float *data, int64_t n, int dtype)
{
    int nonzero = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(data[i])) continue;
        if (!holds(data[i], dtype)) return 0;
        nonzero |= data[i] != 0;
    }
    return nonzero;
}

/* The first input element the dtype cannot hold, or -1. */
static int64_t not_representable(const float *data, int64_t n, int dtype)
{
    for (int64_t i = 0; i < n; i++)
        if (!isnan(data[i]) && !holds(data[i], dtype)) return i;
    return -1;
}

/* What the report is made of: the comparisons, the notes and the rule. */
typedef struct report_parts {
    const dims *d;
    const cc_file *files;
    const bounded *r;
    const cc_result *res;
    const cc_settings *s;
    text notes[9]; /* 4 inputs, 4 outputs, --backend */
    int nnotes;
    text rule;
    int nresults, nfail;
} report_parts;

/* The notes: inputs a half dtype cannot hold, outputs that look half precision, --backend. */
static int make_notes(report_parts *rp)
{
    const cc_settings *s = rp->s;
    const int dtype = s->tol.dtype;
    char num[40];
    if (dtype == DTYPE_FLOAT16 || dtype == DTYPE_BFLOAT16)
        for (int k = 0; k < 4; k++) {
            if (!s->input_path[k]) continue;
            int64_t i = not_representable(s->input_data[k], s->input_count[k], dtype);
            if (i >= 0)
                append(&rp->notes[rp->nnotes++], TEXT_NOTE_NOT_REPRESENTABLE, s->input_path[k], DTYPE_NAMES[dtype],
                       (long long)i, js_number(s->input_data[k][i], num), DTYPE_NAMES[dtype]);
        }
    if (!strcmp(s->dtype_from, TEXT_DTYPE_FROM_DEFAULT))
        for (int k = 0; k < CC_COUNT; k++) {
            const cc_file *f = &rp->files[k];
            if (!f->path || !rp->res[k].disagree) continue;
            /* bfloat16 first: its values within float16's range are float16 values too */
            const int half = holds_all(f->data, rp->res[k].count, DTYPE_BFLOAT16) ? DTYPE_BFLOAT16
                           : holds_all(f->data, rp->res[k].count, DTYPE_FLOAT16)  ? DTYPE_FLOAT16 : DTYPE_NO_DTYPE;
            if (half != DTYPE_NO_DTYPE)
                append(&rp->notes[rp->nnotes++], TEXT_NOTE_HALF_VALUES, f->path, DTYPE_NAMES[half], DTYPE_NAMES[half],
                       DTYPE_NAMES[half]);
        }
    if (s->backend) append(&rp->notes[rp->nnotes++], TEXT_NOTE_BACKEND, s->backend);
    if (dtype == DTYPE_NO_DTYPE) {
        char a[40], b[40];
        append(&rp->rule, TEXT_RULE_GIVEN, js_number(s->tol.atol, a), js_number(s->tol.rtol, b));
    } else {
        append(&rp->rule, TEXT_RULE_OF_DTYPE, TEXT_BOUND_RULE, U_EXPONENT[dtype]);
    }
    int failed = rp->rule.failed;
    for (int k = 0; k < rp->nnotes; k++) failed |= rp->notes[k].failed;
    return failed ? -1 : 0;
}

/* One output's part of the JSON document. */
static void json_output(FILE *out, const report_parts *rp, int k)
{
    const cc_result *q = &rp->res[k];
    const cc_file *f = &rp->files[k];
    const dims *d = rp->d;
    json_string(out, f->path);
    fprintf(out, ",\n      \"dtype\": \"%s\",\n      \"count\": %lld,\n      \"disagree\": %lld,\n      \"maxAbsDiff\": ",
            f->descr, (long long)q->count, (long long)q->disagree);
    json_number(out, q->max_abs);
    fputs(",\n      \"maxRatioToBound\": ", out);
    json_number(out, q->max_ratio);
    fprintf(out, ",\n      \"noBound\": %lld,\n      \"perLevel\": ", (long long)q->no_bound);
    if (!q->per_level) {
        fputs("null", out);
    } else {
        fputc('[', out);
        for (int64_t l = 0; l < d->NL; l++) fprintf(out, "%s\n        %lld", l ? "," : "", (long long)q->per_level[l]);
        fputs("\n      ]", out);
    }
    fputs(",\n      \"perHead\": [", out);
    for (int64_t h = 0; h < d->H; h++) fprintf(out, "%s\n        %lld", h ? "," : "", (long long)q->per_head[h]);
    fputs("\n      ],\n      \"worst\": [", out);
    for (int w = 0; w < q->nworst; w++) {
        const int64_t i = q->worst[w].index;
        const coords co = coordinates(k, i, d);
        fprintf(out, "%s\n        {\n          \"coordinates\": {", w ? "," : "");
        for (int c = 0; c < co.count; c++)
            fprintf(out, "%s\n            \"%s\": %lld", c ? "," : "", co.key[c], (long long)co.v[c]);
        fprintf(out, "\n          },\n          \"index\": %lld,\n          \"yours\": ", (long long)i);
        json_number(out, f->data[i]);
        fputs(",\n          \"ours\": ", out);
        json_number(out, rp->r[k].ref[i]);
        fputs(",\n          \"diff\": ", out);
        json_number(out, fabs((double)f->data[i] - rp->r[k].ref[i]));
        fputs(",\n          \"bound\": ", out);
        json_number(out, bound_of(&rp->r[k], i, &rp->s->tol));
        fputs("\n        }", out);
    }
    fputs(q->nworst ? "\n      ]\n    }" : "]\n    }", out);
}

/* --json: the whole report as one document. */
static int print_json(FILE *out, const report_parts *rp)
{
    const cc_settings *s = rp->s;
    char x[40], y[40];
    text yours = {NULL, 0, 0};
    append(&yours, TEXT_YOURS, s->expect);
    if (yours.failed) {
        free(yours.s);
        return -1;
    }
    fputs("{\n  \"in\": ", out);
    json_string(out, s->in);
    fputs(",\n  \"expect\": ", out);
    json_string(out, s->expect);
    fputs(",\n  \"yours\": ", out);
    json_string(out, yours.s);
    free(yours.s);
    fputs(",\n  \"ours\": ", out);
    json_string(out, TEXT_OURS);
    fputs(",\n  \"tolerance\": {\n", out);
    if (s->tol.dtype == DTYPE_NO_DTYPE)
        fprintf(out, "    \"rtol\": %s,\n    \"atol\": %s,\n", js_number(s->tol.rtol, x), js_number(s->tol.atol, y));
    else
        fprintf(out, "    \"dtype\": \"%s\",\n    \"from\": \"%s\",\n    \"unitRoundoff\": %s,\n", DTYPE_NAMES[s->tol.dtype],
                s->dtype_from, js_number(UNIT_ROUNDOFF[s->tol.dtype], x));
    fputs("    \"rule\": ", out);
    json_string(out, rp->rule.s);
    fprintf(out, "\n  },\n  \"agree\": %s,\n  \"notes\": [", rp->nfail ? "false" : "true");
    for (int k = 0; k < rp->nnotes; k++) {
        fputs(k ? ",\n    " : "\n    ", out);
        json_string(out, rp->notes[k].s);
    }
    fputs(rp->nnotes ? "\n  ],\n  \"outputs\": {" : "],\n  \"outputs\": {", out);
    int first = 1;
    for (int k = 0; k < CC_COUNT; k++) {
        if (!rp->files[k].path) continue;
        fprintf(out, "%s\n    \"%s\": {\n      \"file\": ", first ? "" : ",", CC_NAMES[k]);
        first = 0;
        json_output(out, rp, k);
    }
    fputs(first ? "}\n}\n" : "\n  }\n}\n", out);
    return 0;
}

/* One output's verdict line and its worst elements. */
static int print_verdict(FILE *out, const report_parts *rp, int k)
{
    const cc_result *q = &rp->res[k];
    const dims *d = rp->d;
    char x[40], y[40], f1[40], f2[40];
    int rc = 0;
    text max = {NULL, 0, 0}, per = {NULL, 0, 0};
    append(&max, TEXT_MAX_DIFF, js_fmt(q->max_abs, f1));
    /* a ratio to the bound of an element with none (ours exactly 0) would say nothing */
    if (!q->no_bound || q->max_ratio > 0) {
        append(&max, ", ");
        append(&max, TEXT_MAX_RATIO, js_fmt(q->max_ratio, f2));
    }
    if (q->no_bound) {
        append(&max, ", ");
        append(&max, TEXT_NO_BOUND, (long long)q->no_bound);
    }
    if (q->disagree) {
        text levels = {NULL, 0, 0}, heads = {NULL, 0, 0};
        for (int64_t l = 0; q->per_level && l < d->NL; l++) {
            if (l) append(&levels, ", ");
            append(&levels, TEXT_LEVEL_COUNT, (long long)l, (long long)q->per_level[l]);
        }
        for (int64_t h = 0; h < d->H; h++) {
            if (h) append(&heads, ", ");
            append(&heads, TEXT_HEAD_COUNT, (long long)h, (long long)q->per_head[h]);
        }
        if (q->per_level && !levels.failed) {
            append(&per, TEXT_PER_LEVEL, levels.s);
            append(&per, "; ");
        }
        if (!heads.failed) append(&per, TEXT_PER_HEAD, heads.s);
        rc = levels.failed || heads.failed || per.failed ? -1 : 0;
        if (!rc && !max.failed)
            fprintf(out, TEXT_VERDICT_DISAGREE "\n", CC_NAMES[k], (long long)q->disagree, (long long)q->count, per.s, max.s);
        free(levels.s);
        free(heads.s);
    } else if (!max.failed) {
        fprintf(out, TEXT_VERDICT_OK "\n", CC_NAMES[k], (long long)q->count, max.s);
    }
    if (max.failed) rc = -1;
    free(max.s);
    free(per.s);
    const float *yours = rp->files[k].data;
    const bounded *r = &rp->r[k];
    for (int w = 0; w < q->nworst && !rc; w++) {
        const int64_t i = q->worst[w].index;
        const coords co = coordinates(k, i, d);
        text where = {NULL, 0, 0};
        append_coordinates(&where, CC_NAMES[k], &co);
        js_pair(yours[i], r->ref[i], x, y);
        if (!where.failed)
            fprintf(out, TEXT_WORST "\n", where.s, x, y, js_fmt(fabs((double)yours[i] - r->ref[i]), f1),
                    js_fmt(bound_of(r, i, &rp->s->tol), f2));
        else
            rc = -1;
        free(where.s);
    }
    return rc;
}

/* The report as text: the header, the tolerance, the notes, a verdict per output, the end. */
static int print_text(FILE *out, const report_parts *rp)
{
    const cc_settings *s = rp->s;
    text yours = {NULL, 0, 0};
    append(&yours, TEXT_YOURS, s->expect);
    if (!yours.failed) fprintf(out, TEXT_HEADER "\n", s->in, yours.s, TEXT_OURS);
    const int failed = yours.failed;
    free(yours.s);
    if (failed) return -1;
    if (s->tol.dtype == DTYPE_NO_DTYPE) fprintf(out, TEXT_TOLERANCE_GIVEN "\n", rp->rule.s);
    else fprintf(out, TEXT_TOLERANCE_FOR "\n", DTYPE_NAMES[s->tol.dtype], s->dtype_from, rp->rule.s);
    for (int k = 0; k < rp->nnotes; k++) fprintf(out, TEXT_NOTE "\n", rp->notes[k].s);
    for (int k = 0; k < CC_COUNT; k++)
        if (rp->files[k].path && print_verdict(out, rp, k)) return -1;
    if (!rp->nfail && rp->nresults == 1) {
        for (int k = 0; k < CC_COUNT; k++)
            if (rp->files[k].path) fprintf(out, TEXT_AGREES "\n", CC_NAMES[k]);
    } else if (!rp->nfail) {
        fprintf(out, TEXT_ALL_AGREE "\n", rp->nresults);
    }
    return 0;
}

/* The stderr line naming what disagrees, malloc'd into *failure: 0, or -1 out of memory. */
static int failure_line(const report_parts *rp, char **failure)
{
    text list = {NULL, 0, 0}, msg = {NULL, 0, 0};
    int n = 0;
    for (int k = 0; k < CC_COUNT; k++) {
        if (!rp->files[k].path || !rp->res[k].disagree) continue;
        if (n++) append(&list, ", ");
        append(&list, TEXT_OUTPUT_FAILED, CC_NAMES[k], (long long)rp->res[k].disagree, (long long)rp->res[k].count);
    }
    if (!list.failed) append(&msg, TEXT_FAILED, list.s);
    free(list.s);
    if (list.failed || msg.failed) {
        free(msg.s);
        return -1;
    }
    *failure = msg.s;
    return 0;
}

int cc_run(const msda_problem *p, const float *value, const float *locations, const float *weights,
           const float *grad_output, const cc_file files[CC_COUNT], const cc_settings *s, FILE *out, char **failure)
{
    *failure = NULL;
    dims d = {p->batch, p->value_length, p->num_heads, p->channels, p->num_queries, p->num_levels, p->num_points,
              p->value_layout == MSDA_VALUE_BLNC, p->locations_layout == MSDA_LOCATIONS_BQHLP2, p->spatial_shapes,
              p->level_start_index};
    const int forward = files[CC_OUTPUT].path != NULL;
    const int backward = files[CC_GRAD_VALUE].path || files[CC_GRAD_LOCATIONS].path || files[CC_GRAD_WEIGHTS].path;
    const int64_t counts[CC_COUNT] = {d.B * d.Q * d.H * d.C, d.B * d.L * d.H * d.C, d.B * d.Q * d.H * d.NL * d.P * 2,
                                      d.B * d.Q * d.H * d.NL * d.P};
    bounded r[CC_COUNT];
    memset(r, 0, sizeof r);
    cc_result res[CC_COUNT];
    memset(res, 0, sizeof res);
    report_parts rp;
    memset(&rp, 0, sizeof rp);
    rp.d = &d;
    rp.files = files;
    rp.r = r;
    rp.res = res;
    rp.s = s;
    int rc = 0;
    double *work = malloc((size_t)(4 * d.C) * sizeof(double));
    if (!work) rc = -1;
    for (int k = 0; k < CC_COUNT && !rc; k++)
        if ((k == CC_OUTPUT ? forward : backward) && bounded_alloc(&r[k], counts[k])) rc = -1;
    if (!rc) reference(&d, p, value, locations, weights, grad_output, forward, backward, r, work);
    for (int k = 0; k < CC_COUNT && !rc; k++)
        if (files[k].path && compare(k, files[k].data, &r[k], &d, s, &res[k])) rc = -1;
    for (int k = 0; k < CC_COUNT; k++) {
        if (!files[k].path) continue;
        rp.nresults++;
        rp.nfail += res[k].disagree > 0;
    }
    if (!rc) rc = make_notes(&rp);
    if (!rc) rc = s->json ? print_json(out, &rp) : print_text(out, &rp);
    if (!rc && rp.nfail) rc = failure_line(&rp, failure) ? -1 : 1;
    for (int k = 0; k < CC_COUNT; k++) {
        bounded_free(&r[k]);
        free(res[k].per_level);
        free(res[k].per_head);
        free(res[k].worst);
    }
    for (int k = 0; k < rp.nnotes; k++) free(rp.notes[k].s);
    free(rp.rule.s);
    free(work);
    return rc;
}

/* In the JS CLI's order of checks, so that both name the same problem first. */
int run_crosscheck(options *o)
{
    int code = open_case_dir("--expect", o->expect);
    if (code) return code;
    static const char *const OUTPUT_FILES[] = {"output.npy", "grad_value.npy", "grad_sampling_locations.npy",
                                               "grad_attention_weights.npy", NULL};
    code = stray_files("--expect", o->expect, OUTPUT_FILES, TEXT_OUTPUT_LIST);
    if (code) return code;
    char *path[CC_COUNT] = {0};
    npy_array arr[CC_COUNT];
    float *data[CC_COUNT] = {0};
    text problems = {NULL, 0, 0};
    int found = 0;
    for (int k = 0; k < CC_COUNT; k++) {
        path[k] = join(o->expect, OUTPUT_FILES[k]);
        if (!path[k]) { code = report(EXIT_OTHER, TEXT_OUT_OF_MEMORY); break; }
        if (!file_present(path[k])) {
            free(path[k]);
            path[k] = NULL;
            continue;
        }
        int io_error = 0;
        void *loaded = NULL;
        if (read_case_file(path[k], OUTPUT_FILES[k], 0, &arr[k], &loaded, &problems, &io_error)) code = EXIT_BAD_INPUT;
        else found++;
        data[k] = loaded;
    }
    if (code == EXIT_BAD_INPUT) report(code, "%s", problems.s ? problems.s : TEXT_OUT_OF_MEMORY);
    free(problems.s);
    if (!code && !found)
        code = report(EXIT_BAD_INPUT, TEXT_EXPECT_NONE, o->expect, TEXT_OUTPUT_LIST);
    case_data c;
    memset(&c, 0, sizeof c);
    msda_problem p;
    if (!code) {
        o->backward = data[CC_GRAD_VALUE] || data[CC_GRAD_LOCATIONS] || data[CC_GRAD_WEIGHTS];
        code = load_case(o, &c);
    }
    if (!code) code = derive_problem(o, &c, &p);
    for (int k = 0; k < CC_COUNT && !code; k++) {
        if (!data[k]) continue;
        const int64_t out_shape[3] = {p.batch, p.num_queries, p.num_heads * p.channels};
        const npy_array *want = k == CC_GRAD_VALUE ? &c.arr[F_VALUE] : k == CC_GRAD_LOCATIONS ? &c.arr[F_LOCATIONS]
                              : &c.arr[F_WEIGHTS];
        const int ndim = k == CC_OUTPUT ? 3 : want->ndim;
        const int64_t *shape = k == CC_OUTPUT ? out_shape : want->shape;
        if (!same_shape(&arr[k], ndim, shape)) {
            shape_text got, expected;
            code = report(EXIT_BAD_INPUT, TEXT_EXPECT_SHAPE, path[k], shape_of(&arr[k], got),
                          npy_format_shape(ndim, shape, expected, sizeof expected), CC_NAMES[k]);
        }
    }
    if (!code) {
        cc_settings s;
        memset(&s, 0, sizeof s);
        s.in = o->in;
        s.expect = o->expect;
        s.top = o->top;
        s.json = o->json;
        s.backend = o->backend;
        s.tol.rtol = o->rtol;
        s.tol.atol = o->atol;
        s.tol.dtype = o->dtype;
        s.dtype_from = TEXT_DTYPE_FROM_FLAG;
        if (o->dtype == DTYPE_NO_DTYPE && !o->have_rtol && !o->have_atol) {
            /* the files' own dtype when all are float16, or all bfloat16 */
            int f2 = 0, bf = 0, all = 0;
            for (int k = 0; k < CC_COUNT; k++) {
                if (!data[k]) continue;
                all++;
                f2 += arr[k].dtype == NPY_F2;
                bf += arr[k].dtype == NPY_BF16;
            }
            s.tol.dtype = f2 == all ? DTYPE_FLOAT16 : bf == all ? DTYPE_BFLOAT16 : DTYPE_FLOAT32;
            s.dtype_from = s.tol.dtype == DTYPE_FLOAT32 ? TEXT_DTYPE_FROM_DEFAULT : TEXT_DTYPE_FROM_FILES;
        }
        const int inputs[4] = {F_VALUE, F_LOCATIONS, F_WEIGHTS, F_GRAD_OUTPUT};
        for (int k = 0; k < 4; k++) {
            if (!c.f32[inputs[k]]) continue;
            s.input_path[k] = c.path[inputs[k]];
            s.input_data[k] = c.f32[inputs[k]];
            s.input_count[k] = c.arr[inputs[k]].count;
        }
        cc_file files[CC_COUNT];
        for (int k = 0; k < CC_COUNT; k++) {
            files[k].path = data[k] ? path[k] : NULL;
            files[k].descr = data[k] ? npy_dtype_name(arr[k].dtype) : NULL;
            files[k].data = data[k];
        }
        char *failure = NULL;
        int rc = cc_run(&p, c.f32[F_VALUE], c.f32[F_LOCATIONS], c.f32[F_WEIGHTS], c.f32[F_GRAD_OUTPUT], files, &s, stdout,
                        &failure);
        fflush(stdout);
        if (rc < 0) code = report(EXIT_OTHER, TEXT_OUT_OF_MEMORY);
        else if (rc) code = report(EXIT_OTHER, "%s", failure);
        free(failure);
    }
    case_free(&c);
    for (int k = 0; k < CC_COUNT; k++) {
        free(path[k]);
        free(data[k]);
    }
    return code;
}
