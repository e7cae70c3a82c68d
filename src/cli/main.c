/* build/native/msda: forward and backward over a directory of .npy files (CONTRACT.md).
 *
 * Exit status: 0 done; 2 bad arguments or bad input, with one line on stderr starting "msda:"
 * that names the file or flag; 1 any other failure (I/O, memory; crosscheck: a disagreement). Outputs are written into a
 * private directory inside --out and renamed into place only once all of them are complete:
 * all outputs appear, or none of the older ones change (see write_outputs). */
#define _POSIX_C_SOURCE 200809L
#include "msda.h"
#include "crosscheck.h"
#include "npy.h"
#include "npz.h"

#include <math.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

enum { EXIT_OK = 0, EXIT_OTHER = 1, EXIT_BAD_INPUT = 2 };

#ifndef MSDA_VERSION
#error "MSDA_VERSION (package.json's version) is defined by mk/cli.mk"
#endif

static const char USAGE[] =
    "usage: msda forward    --in DIR --out DIR [options]\n"
    "       msda backward   --in DIR --out DIR [options]\n"
    "       msda crosscheck --in DIR --expect DIR [options]\n"
    "\n"
    "Multi-scale deformable attention on a case directory of NumPy .npy files (or an .npz of them,\n"
    "from np.savez or np.savez_compressed, in place of DIR).\n"
    "\n"
    "  --in DIR        reads value.npy (<f4), spatial_shapes.npy (<i8|<i4, (N_l, 2)),\n"
    "                  level_start_index.npy (<i8|<i4, (N_l,); optional, derived), sampling_locations.npy (<f4),\n"
    "                  attention_weights.npy (<f4, (B, N_q, N_h, N_l, N_p)) and, for backward,\n"
    "                  grad_output.npy (<f4, (B, N_q, N_h*C_h)); float inputs may also be <f2\n"
    "                  (float16) or 'bfloat16', widened exactly to float32\n"
    "  --out DIR       writes output.npy (forward) or grad_value.npy, grad_sampling_locations.npy,\n"
    "                  grad_attention_weights.npy (backward); created if missing\n"
    "  --value-layout BLNC|BNLC                   value is (B, L, N_h, C_h) or (B, N_h, L, C_h); default BLNC\n"
    "  --sampling-locations-layout BQHLP2|B2QHLP  (B, N_q, N_h, N_l, N_p, 2) or (B, 2, N_q, N_h, N_l, N_p);\n"
    "                                             default BQHLP2\n"
    "  --align-corners                            pixel centres at the ends of [0, 1]; default off\n"
    "  --padding-mode zeros|border                default zeros\n"
    "  --threads N                                default 1; results do not depend on it\n"
    "  --out-dtype float32|float16|bfloat16       the outputs rounded to float16 ('<f2' files) or to\n"
    "                                             bfloat16 (float32 files holding them); default float32\n"
    "  -h, --help                                 this text\n"
    "  --version                                  the package version\n"
    "\n"
    "crosscheck --expect DIR compares your kernel's dumps in DIR (output.npy, grad_value.npy,\n"
    "grad_sampling_locations.npy, grad_attention_weights.npy, whichever are there; <f4, <f2 or\n"
    "'bfloat16') with the float64 reference, each element against its own bound, exactly as the\n"
    "JS CLI does (docs/cli.md, For kernel authors):\n"
    "  --dtype float32|float16|bfloat16   the precision your kernel stores tensors in (default: the\n"
    "                                     files' own when all are <f2 or all 'bfloat16', else float32)\n"
    "  --rtol R --atol A                  instead: |yours - ours| <= A + R*|ours|\n"
    "  --top K                            list the K elements of each output that disagree most\n"
    "  --json                             one JSON document on stdout instead of the text\n"
    "crosscheck without --expect (the backends against each other) is the JS CLI's.\n"
    "\n"
    "Exit status: 0 done, 2 bad arguments or input (one line on stderr naming the file or flag),\n"
    "1 any other failure.\n";

static int report(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* One line whatever the message holds: a newline in a path (a file or flag the message names)
 * becomes a space, as the JS CLI prints it. */
static int report(int code, const char *fmt, ...)
{
    char small[1024], *msg = small;
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n >= (int)sizeof small) {
        char *big = malloc((size_t)n + 1);
        if (big) {
            vsnprintf(big, (size_t)n + 1, fmt, again);
            msg = big;
        } /* else: the message cut at 1023 bytes */
    }
    va_end(again);
    va_end(ap);
    if (n < 0) small[0] = '\0';
    for (char *c = msg; *c; c++)
        if (*c == '\n') *c = ' ';
    fprintf(stderr, "msda: %s\n", msg);
    if (msg != small) free(msg);
    return code;
}

/* ---- arguments ------------------------------------------------------------------------- */

typedef struct options {
    int backward, crosscheck;
    const char *in, *out, *expect, *backend;
    msda_problem problem; /* options only; dimensions are filled in from the files */
    int dtype;            /* CC_* or CC_NO_DTYPE (not given) */
    int have_rtol, have_atol, top, json;
    double rtol, atol;
    int out_dtype; /* CC_FLOAT32 (default), CC_FLOAT16: '<f2' files, CC_BFLOAT16: '<f4' files of bfloat16 values */
} options;

/* Decimal digits only (strtol alone would take " 3" and "+3"). */
static int parse_threads(const char *s, int *out)
{
    long v = 0;
    if (!*s) return -1;
    for (const char *c = s; *c; c++) {
        if (*c < '0' || *c > '9') return -1;
        v = v * 10 + (*c - '0');
        if (v > 4096) return -1;
    }
    if (v < 1) return -1;
    *out = (int)v;
    return 0;
}

/* A plain non-negative decimal number, as the JS CLI takes it: digits with an optional point
 * (or a point and digits) and an optional exponent; finite. */
static int parse_tolerance(const char *s, double *out)
{
    const char *c = s;
    int before = 0, after = 0;
    while (*c >= '0' && *c <= '9') { c++; before++; }
    if (*c == '.') {
        c++;
        while (*c >= '0' && *c <= '9') { c++; after++; }
    }
    if (!before && !after) return -1;
    if (!before && *s != '.') return -1;
    if (*c == 'e' || *c == 'E') {
        c++;
        if (*c == '+' || *c == '-') c++;
        if (!(*c >= '0' && *c <= '9')) return -1;
        while (*c >= '0' && *c <= '9') c++;
    }
    if (*c) return -1;
    *out = strtod(s, NULL);
    return isfinite(*out) ? 0 : -1;
}

static int is_one_of(const char *name, const char *const *list)
{
    for (; *list; list++)
        if (!strcmp(name, *list)) return 1;
    return 0;
}

static const char *const VALUE_FLAGS[] = {"--in", "--out", "--value-layout", "--sampling-locations-layout", "--padding-mode",
                                          "--threads", "--expect", "--dtype", "--rtol", "--atol", "--top", "--backend",
                                          "--out-dtype", NULL};
static const char *const CROSSCHECK_FLAGS[] = {"--expect", "--dtype", "--rtol", "--atol", "--top", "--json", NULL};
static const char *const EXPECT_FLAGS[] = {"--dtype", "--rtol", "--atol", "--top", "--json", NULL};
static const char *const ALL_FLAGS[] = {"--in", "--out", "--value-layout", "--sampling-locations-layout", "--padding-mode",
                                        "--threads", "--expect", "--dtype", "--rtol", "--atol", "--top", "--backend",
                                        "--align-corners", "--json", "--out-dtype", NULL};

static int flag_index(const char *name)
{
    for (int k = 0; ALL_FLAGS[k]; k++)
        if (!strcmp(ALL_FLAGS[k], name)) return k;
    return -1;
}

static int parse_args(int argc, char **argv, options *o)
{
    msda_problem_init(&o->problem);
    o->in = o->out = o->expect = o->backend = NULL;
    o->crosscheck = 0;
    o->dtype = CC_NO_DTYPE;
    o->have_rtol = o->have_atol = o->json = 0;
    o->rtol = o->atol = 0;
    o->top = 5;
    o->out_dtype = CC_FLOAT32;
    if (argc < 2) return report(EXIT_BAD_INPUT, "missing command, expected forward, backward or crosscheck (see msda --help)");
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        fputs(USAGE, stdout);
        return -1;
    }
    if (!strcmp(cmd, "--version")) {
        puts(MSDA_VERSION);
        return -1;
    }
    if (!strcmp(cmd, "forward")) o->backward = 0;
    else if (!strcmp(cmd, "backward")) o->backward = 1;
    else if (!strcmp(cmd, "crosscheck")) o->crosscheck = 1;
    else return report(EXIT_BAD_INPUT, "unknown command '%s', expected forward, backward or crosscheck (see msda --help)", cmd);

    /* the flags seen, for "given more than once" and the checks after the loop */
    int seen[16] = {0};
    for (int i = 2; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            fputs(USAGE, stdout);
            return -1;
        }
        if (!strcmp(arg, "--version")) {
            puts(MSDA_VERSION);
            return -1;
        }
        if (strncmp(arg, "--", 2) != 0)
            return report(EXIT_BAD_INPUT, "unexpected argument '%s' (see msda --help)", arg);
        /* --flag VALUE or --flag=VALUE */
        char name[64];
        const char *eq = strchr(arg, '='), *value = NULL;
        size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
        if (n >= sizeof name) return report(EXIT_BAD_INPUT, "unknown option '%.40s...' (see msda --help)", arg);
        memcpy(name, arg, n);
        name[n] = '\0';
        /* --backend is the JS CLI's; the native one takes it only where it is a no-op (crosscheck --expect) */
        int takes_value = is_one_of(name, VALUE_FLAGS) && (o->crosscheck || strcmp(name, "--backend") != 0);
        if (!takes_value && strcmp(name, "--align-corners") != 0 && strcmp(name, "--json") != 0)
            return report(EXIT_BAD_INPUT, "unknown option '%s' (see msda --help)", name);
        if (takes_value) {
            if (eq) value = eq + 1;
            else if (i + 1 < argc) value = argv[++i];
            else return report(EXIT_BAD_INPUT, "%s needs a value (see msda --help)", name);
        } else if (eq) {
            return report(EXIT_BAD_INPUT, "%s takes no value, got '%s'", name, eq + 1);
        }
        if (o->crosscheck && !strcmp(name, "--out-dtype"))
            return report(EXIT_BAD_INPUT, "--out-dtype is not used by crosscheck (it writes nothing)");
        if (o->crosscheck && !strcmp(name, "--out"))
            return report(EXIT_BAD_INPUT, "--out is not used by crosscheck (it writes nothing); --expect DIR compares with outputs in DIR");
        if (!o->crosscheck && is_one_of(name, CROSSCHECK_FLAGS))
            return report(EXIT_BAD_INPUT, "%s is only for msda crosscheck", name);
        if (!strcmp(name, "--in") || !strcmp(name, "--out") || !strcmp(name, "--expect")) {
            if (!*value) return report(EXIT_BAD_INPUT, "%s: empty path, expected a directory", name);
            if (!strcmp(name, "--in")) o->in = value;
            else if (!strcmp(name, "--out")) o->out = value;
            else o->expect = value;
        } else if (!strcmp(name, "--value-layout")) {
            if (!strcmp(value, "BLNC")) o->problem.value_layout = MSDA_VALUE_BLNC;
            else if (!strcmp(value, "BNLC")) o->problem.value_layout = MSDA_VALUE_BNLC;
            else return report(EXIT_BAD_INPUT, "--value-layout: '%s', expected BLNC or BNLC", value);
        } else if (!strcmp(name, "--sampling-locations-layout")) {
            if (!strcmp(value, "BQHLP2")) o->problem.locations_layout = MSDA_LOCATIONS_BQHLP2;
            else if (!strcmp(value, "B2QHLP")) o->problem.locations_layout = MSDA_LOCATIONS_B2QHLP;
            else return report(EXIT_BAD_INPUT, "--sampling-locations-layout: '%s', expected BQHLP2 or B2QHLP", value);
        } else if (!strcmp(name, "--padding-mode")) {
            if (!strcmp(value, "zeros")) o->problem.padding = MSDA_PADDING_ZEROS;
            else if (!strcmp(value, "border")) o->problem.padding = MSDA_PADDING_BORDER;
            else return report(EXIT_BAD_INPUT, "--padding-mode: '%s', expected zeros or border", value);
        } else if (!strcmp(name, "--backend")) {
            if (strcmp(value, "wasm") && strcmp(value, "wasm-scalar") && strcmp(value, "native"))
                return report(EXIT_BAD_INPUT, "--backend: '%s', expected wasm, wasm-scalar or native", value);
            o->backend = value;
        } else if (!strcmp(name, "--out-dtype")) {
            if (!strcmp(value, "float32")) o->out_dtype = CC_FLOAT32;
            else if (!strcmp(value, "float16")) o->out_dtype = CC_FLOAT16;
            else if (!strcmp(value, "bfloat16")) o->out_dtype = CC_BFLOAT16;
            else return report(EXIT_BAD_INPUT, "--out-dtype: '%s', expected float32, float16 or bfloat16", value);
        } else if (!strcmp(name, "--dtype")) {
            if (!strcmp(value, "float32")) o->dtype = CC_FLOAT32;
            else if (!strcmp(value, "float16")) o->dtype = CC_FLOAT16;
            else if (!strcmp(value, "bfloat16")) o->dtype = CC_BFLOAT16;
            else return report(EXIT_BAD_INPUT, "--dtype: '%s', expected float32, float16 or bfloat16", value);
        } else if (!strcmp(name, "--rtol") || !strcmp(name, "--atol")) {
            double v;
            if (parse_tolerance(value, &v))
                return report(EXIT_BAD_INPUT, "%s: '%s', expected a number >= 0 such as 1e-3", name, value);
            if (name[2] == 'r') { o->rtol = v; o->have_rtol = 1; }
            else { o->atol = v; o->have_atol = 1; }
        } else if (!strcmp(name, "--top")) {
            const char *digits = value;
            size_t len = strlen(value), k;
            for (k = 0; k < len && value[k] >= '0' && value[k] <= '9'; k++) {}
            while (len > 1 && *digits == '0') { digits++; len--; } /* leading zeros: the same number */
            if (!*value || value[k] || len > 4 || atoi(digits) > 1000)
                return report(EXIT_BAD_INPUT, "--top: '%s', expected an integer from 0 to 1000", value);
            o->top = atoi(digits);
        } else if (!strcmp(name, "--json")) {
            o->json = 1;
        } else if (!strcmp(name, "--threads")) {
            if (parse_threads(value, &o->problem.threads))
                return report(EXIT_BAD_INPUT, "--threads: '%s', expected an integer from 1 to 4096", value);
        } else {
            o->problem.align_corners = 1;
        }
        if (seen[flag_index(name)]++) return report(EXIT_BAD_INPUT, "%s given more than once", name);
    }
    if (!o->in) return report(EXIT_BAD_INPUT, "missing --in DIR (see msda --help)");
    if (!o->crosscheck && !o->out) return report(EXIT_BAD_INPUT, "missing --out DIR (see msda --help)");
    if (o->crosscheck && !o->expect)
        for (const char *const *f = EXPECT_FLAGS; *f; f++)
            if (seen[flag_index(*f)])
                return report(EXIT_BAD_INPUT, "%s needs --expect DIR (it sets how your outputs are compared with ours)", *f);
    if (o->dtype != CC_NO_DTYPE && (o->have_rtol || o->have_atol))
        return report(EXIT_BAD_INPUT, "--dtype and %s both set the tolerance: give one of them", o->have_rtol ? "--rtol" : "--atol");
    if (o->crosscheck && !o->expect)
        return report(EXIT_BAD_INPUT, "crosscheck without --expect (this package's backends against each other) is the JS CLI's: "
                      "node bindings/cli.js crosscheck, or npx msda crosscheck");
    return 0;
}

/* ---- the case directory ---------------------------------------------------------------- */

static char *join(const char *dir, const char *name)
{
    size_t d = strlen(dir), n = strlen(name);
    int slash = d > 0 && dir[d - 1] == '/';
    char *p = malloc(d + n + 2);
    if (p) sprintf(p, slash ? "%s%s" : "%s/%s", dir, name);
    return p;
}

enum { F_VALUE, F_SHAPES, F_STARTS, F_LOCATIONS, F_WEIGHTS, F_GRAD_OUTPUT, F_COUNT };
static const char *const INPUT_NAMES[F_COUNT] = {
    "value.npy", "spatial_shapes.npy", "level_start_index.npy",
    "sampling_locations.npy", "attention_weights.npy", "grad_output.npy",
};

typedef struct case_data {
    char *path[F_COUNT];
    npy_array arr[F_COUNT];
    float *f32[F_COUNT];     /* float inputs */
    int64_t *i64[F_COUNT];   /* spatial_shapes, level_start_index */
} case_data;

static void case_free(case_data *c)
{
    for (int i = 0; i < F_COUNT; i++) {
        free(c->path[i]);
        free(c->f32[i]);
        free(c->i64[i]);
    }
}

/* A growing message: the problems of every file of a case, so that one run names them all. */
typedef struct text {
    char *s;
    size_t len;
    int failed; /* out of memory: what was appended so far is kept */
} text;

static void append(text *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void append(text *t, const char *fmt, ...)
{
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *grown = n < 0 || t->failed ? NULL : realloc(t->s, t->len + (size_t)n + 1);
    if (!grown) {
        t->failed = 1;
    } else {
        vsnprintf(grown + t->len, (size_t)n + 1, fmt, again);
        t->s = grown;
        t->len += (size_t)n;
    }
    va_end(again);
}

/* What to do about a file of the wrong dtype, in NumPy's words (the JS CLI prints the same). */
static void dtype_hint(text *t, const char *path, const char *name, const char *descr, int want_int)
{
    const int big_endian = descr[0] == '>';
    if (!want_int && (!strcmp(descr, "<V2") || !strcmp(descr, "|V2"))) {
        append(t, "%s: dtype '%s': a 2-byte void, which is how np.save writes ml_dtypes' bfloat16, "
               "but its bits cannot be told from any other 2-byte record: save bfloat16 as float32, which is "
               "exact: tensor.astype(np.float32)", path, descr);
        return;
    }
    if (!want_int && (!strcmp(descr, "<i2") || !strcmp(descr, "<u2"))) {
        append(t, "%s: dtype '%s': 2-byte integers, perhaps the bits of a float16 or bfloat16 tensor (a bit view), "
               "which astype would turn into integers: save float16 as tensor.view(np.float16), bfloat16 as float32 "
               "(tensor.view(ml_dtypes.bfloat16).astype(np.float32), which is exact)", path, descr);
        return;
    }
    append(t, "%s: dtype '%s'%s: %s must be %s%s: save tensor.astype(%s)", path, descr,
           big_endian ? " (big-endian)" : "", name, big_endian ? "little-endian " : "",
           want_int ? "int64 or int32" : "float32, float16 or bfloat16",
           want_int ? (big_endian ? "'<i8'" : "np.int64") : (big_endian ? "'<f4'" : "np.float32"));
}

/* Where a case's (or --expect's) .npy files come from: a directory, or an .npz archive of them
 * whose members are named ARCHIVE:name in messages (as the JS CLI names them). */
typedef struct source {
    const char *dir;
    int is_npz;
    unsigned char *bytes;
    size_t len;
    npz z;
} source;

static void source_close(source *s)
{
    if (s->is_npz) npz_free(&s->z);
    free(s->bytes);
    s->bytes = NULL;
}

static int source_open(source *s, const char *flag, const char *dir)
{
    memset(s, 0, sizeof *s);
    s->dir = dir;
    struct stat st;
    if (stat(dir, &st) != 0) return report(EXIT_BAD_INPUT, "%s %s: %s", flag, dir, strerror(errno));
    if (S_ISDIR(st.st_mode)) return 0;
    char err[320];
    int io_error = 0;
    if (S_ISREG(st.st_mode) && npy_read_whole(dir, &s->bytes, &s->len, &io_error, err, sizeof err))
        return report(io_error ? EXIT_OTHER : EXIT_BAD_INPUT, "%s: %s", dir, err);
    if (!S_ISREG(st.st_mode) || !npz_looks_like_zip(s->bytes, s->len)) {
        source_close(s);
        return report(EXIT_BAD_INPUT, "%s %s: not a directory (nor an .npz archive)", flag, dir);
    }
    s->is_npz = 1;
    if (npz_parse(s->bytes, s->len, &s->z, err, sizeof err)) {
        source_close(s);
        return report(EXIT_BAD_INPUT, "%s %s: %s", flag, dir, err);
    }
    return 0;
}

static char *source_path(const source *s, const char *name)
{
    if (!s->is_npz) return join(s->dir, name);
    char *p = malloc(strlen(s->dir) + strlen(name) + 2);
    if (p) sprintf(p, "%s:%s", s->dir, name);
    return p;
}

/* Present unless absent for sure (lstat's ENOENT): a dangling symlink, or a name lstat cannot
 * look at, is there, and reading it says why (as the JS CLI does). */
static int source_has(const source *s, const char *path, const char *name)
{
    struct stat st;
    return s->is_npz ? npz_find(&s->z, name) != NULL : !(lstat(path, &st) != 0 && errno == ENOENT);
}

static int source_missing(const source *s, const char *path, const char *name)
{
    struct stat st;
    return s->is_npz ? npz_find(&s->z, name) == NULL : lstat(path, &st) != 0 && errno == ENOENT;
}

/* A file (or member) that is none of names would go unchecked: a typo must not pass. 0, or the
 * exit status of the report naming the first (in byte order; an archive's in its order). */
static int source_strays(const source *s, const char *flag, const char *const *names, const char *list)
{
    char *first = NULL;
    long more = -1;
    int code = 0;
    if (s->is_npz) {
        for (int i = 0; i < s->z.count; i++)
            if (!is_one_of(s->z.members[i].name, names) && ++more == 0) first = s->z.members[i].name;
        if (first && !(first = strdup(first))) code = report(EXIT_OTHER, "out of memory");
    } else {
        DIR *d = opendir(s->dir);
        if (!d) return report(EXIT_BAD_INPUT, "%s %s: cannot list it: %s", flag, s->dir, strerror(errno));
        for (struct dirent *e; (e = readdir(d)) != NULL && !code;) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || is_one_of(e->d_name, names)) continue;
            more++;
            if (first && strcmp(e->d_name, first) >= 0) continue;
            free(first);
            if (!(first = strdup(e->d_name))) code = report(EXIT_OTHER, "out of memory");
        }
        closedir(d);
    }
    if (first && !code) {
        char show[NPZ_SHOWN];
        if (more) code = report(EXIT_BAD_INPUT, "%s %s: %s and %ld more are not output names (%s)", flag, s->dir,
                                npz_shown(first, show), more, list);
        else code = report(EXIT_BAD_INPUT, "%s %s: %s is not an output name (%s)", flag, s->dir, npz_shown(first, show), list);
    }
    free(first);
    return code;
}

/* Loads member name (at path) as floats or int64: npy_load_* semantics. */
static int source_load(const source *s, const char *path, const char *name, int ints, npy_array *arr, void **data,
                       int *io_error, char *err, size_t errlen)
{
    memset(arr, 0, sizeof *arr);
    if (!s->is_npz)
        return ints ? npy_load_i64(path, arr, (int64_t **)data, io_error, err, errlen)
                    : npy_load_f32(path, arr, (float **)data, io_error, err, errlen);
    *io_error = 0;
    const npz_member *m = npz_find(&s->z, name);
    if (!m) {
        snprintf(err, errlen, "not in the archive");
        return -1;
    }
    unsigned char *bytes;
    size_t len;
    if (npz_read(&s->z, m, &bytes, &len, io_error, err, errlen)) return -1;
    return ints ? npy_decode_i64(bytes, len, arr, (int64_t **)data, io_error, err, errlen)
                : npy_decode_f32(bytes, len, arr, (float **)data, io_error, err, errlen);
}

static int load_case(const options *o, case_data *c)
{
    source src;
    int code = source_open(&src, "--in", o->in);
    if (code) return code;
    int files = o->backward ? F_COUNT : F_GRAD_OUTPUT;
    text problems = {NULL, 0, 0};
    /* Every file is read, and every bad one named: "first problem; also: second; also: third". */
    for (int i = 0; i < files; i++) {
        char err[320];
        int io_error = 0, rc;
        c->path[i] = source_path(&src, INPUT_NAMES[i]);
        if (!c->path[i]) {
            free(problems.s);
            source_close(&src);
            return report(EXIT_OTHER, "out of memory");
        }
        if (i == F_STARTS && source_missing(&src, c->path[i], INPUT_NAMES[i])) continue; /* derived */
        const int ints = i == F_SHAPES || i == F_STARTS;
        void *data = NULL;
        rc = source_load(&src, c->path[i], INPUT_NAMES[i], ints, &c->arr[i], &data, &io_error, err, sizeof err);
        if (ints) c->i64[i] = data;
        else c->f32[i] = data;
        if (!rc) continue;
        if (code) append(&problems, "; also: ");
        else code = io_error ? EXIT_OTHER : EXIT_BAD_INPUT;
        if (c->arr[i].bad_dtype) dtype_hint(&problems, c->path[i], INPUT_NAMES[i], c->arr[i].descr, i == F_SHAPES || i == F_STARTS);
        else append(&problems, "%s: %s", c->path[i], err);
    }
    if (code) report(code, "%s", problems.s ? problems.s : "out of memory");
    free(problems.s);
    source_close(&src);
    return code;
}

typedef char shape_text[NPY_MAX_DIMS * 22 + 4];

static const char *shape_of(const npy_array *a, shape_text buf)
{
    return npy_format_shape(a->ndim, a->shape, buf, sizeof(shape_text));
}

static int same_shape(const npy_array *a, int ndim, const int64_t *shape)
{
    if (a->ndim != ndim) return 0;
    for (int i = 0; i < ndim; i++)
        if (a->shape[i] != shape[i]) return 0;
    return 1;
}

/* Derives the dimensions from the files and checks every file against the others. */
static int derive_problem(const options *o, case_data *c, msda_problem *p)
{
    shape_text got, want;
    const npy_array *value = &c->arr[F_VALUE], *shapes = &c->arr[F_SHAPES], *starts = &c->arr[F_STARTS],
                    *loc = &c->arr[F_LOCATIONS], *weights = &c->arr[F_WEIGHTS];
    const int blnc = o->problem.value_layout == MSDA_VALUE_BLNC;
    const int bqhlp2 = o->problem.locations_layout == MSDA_LOCATIONS_BQHLP2;
    const char *value_dims = blnc ? "(B, L, N_h, C_h) per --value-layout BLNC" : "(B, N_h, L, C_h) per --value-layout BNLC";

    if (value->ndim != 4)
        return report(EXIT_BAD_INPUT, "%s: shape %s, expected 4 dimensions %s", c->path[F_VALUE],
                      shape_of(value, got), value_dims);
    for (int i = 0; i < 4; i++)
        if (value->shape[i] < 1)
            return report(EXIT_BAD_INPUT, "%s: shape %s, expected every dimension of %s >= 1", c->path[F_VALUE],
                          shape_of(value, got), value_dims);
    const int64_t B = value->shape[0], L = value->shape[blnc ? 1 : 2], H = value->shape[blnc ? 2 : 1],
                  C = value->shape[3];

    if (shapes->ndim != 2 || shapes->shape[1] != 2 || shapes->shape[0] < 1)
        return report(EXIT_BAD_INPUT, "%s: shape %s, expected (N_l, 2) with N_l >= 1", c->path[F_SHAPES],
                      shape_of(shapes, got));
    const int64_t NL = shapes->shape[0];
    int64_t total = 0;
    for (int64_t l = 0; l < NL; l++) {
        int64_t h = c->i64[F_SHAPES][2 * l], w = c->i64[F_SHAPES][2 * l + 1], hw;
        if (h < 1 || w < 1)
            return report(EXIT_BAD_INPUT, "%s: row %lld is (%lld, %lld), expected H >= 1 and W >= 1",
                          c->path[F_SHAPES], (long long)l, (long long)h, (long long)w);
        if (__builtin_mul_overflow(h, w, &hw) || __builtin_add_overflow(total, hw, &total))
            return report(EXIT_BAD_INPUT, "%s: the sum of H*W over levels 0..%lld overflows 64 bits",
                          c->path[F_SHAPES], (long long)l);
    }
    if (L != total) {
        const int other_fits = value->shape[blnc ? 2 : 1] == total;
        return report(EXIT_BAD_INPUT, "%s: shape %s has L = %lld, expected %lld (the sum of H*W over %s) %s%s",
                      c->path[F_VALUE], shape_of(value, got), (long long)L, (long long)total, c->path[F_SHAPES],
                      value_dims, !other_fits ? "" : blnc ? "; --value-layout BNLC makes the shapes fit"
                                                          : "; --value-layout BLNC makes the shapes fit");
    }

    /* level_start_index.npy may be left out: it is derived from spatial_shapes */
    if (!c->i64[F_STARTS]) {
        c->i64[F_STARTS] = malloc((size_t)NL * sizeof(int64_t));
        if (!c->i64[F_STARTS]) return report(EXIT_OTHER, "out of memory");
        int64_t start = 0;
        for (int64_t l = 0; l < NL; l++) {
            c->i64[F_STARTS][l] = start;
            start += c->i64[F_SHAPES][2 * l] * c->i64[F_SHAPES][2 * l + 1];
        }
    } else if (!same_shape(starts, 1, &NL))
        return report(EXIT_BAD_INPUT, "%s: shape %s, expected %s = (N_l,) with N_l from %s", c->path[F_STARTS],
                      shape_of(starts, got), npy_format_shape(1, &NL, want, sizeof want), c->path[F_SHAPES]);

    if (weights->ndim != 5 || weights->shape[0] != B || weights->shape[2] != H || weights->shape[3] != NL ||
        weights->shape[1] < 1 || weights->shape[4] < 1)
        return report(EXIT_BAD_INPUT,
                      "%s: shape %s, expected (%lld, N_q, %lld, %lld, N_p) = (B, N_q, N_h, N_l, N_p) with N_q, N_p >= 1, "
                      "B and N_h from %s, N_l from %s",
                      c->path[F_WEIGHTS], shape_of(weights, got), (long long)B, (long long)H, (long long)NL,
                      c->path[F_VALUE], c->path[F_SHAPES]);
    const int64_t Q = weights->shape[1], P = weights->shape[4];

    const int64_t loc_shape[6] = {B, bqhlp2 ? Q : 2, bqhlp2 ? H : Q, bqhlp2 ? NL : H, bqhlp2 ? P : NL, bqhlp2 ? 2 : P};
    const int64_t other_shape[6] = {B, !bqhlp2 ? Q : 2, !bqhlp2 ? H : Q, !bqhlp2 ? NL : H, !bqhlp2 ? P : NL, !bqhlp2 ? 2 : P};
    if (!same_shape(loc, 6, loc_shape))
        return report(EXIT_BAD_INPUT, "%s: shape %s, expected %s = %s with N_q and N_p from %s%s",
                      c->path[F_LOCATIONS], shape_of(loc, got), npy_format_shape(6, loc_shape, want, sizeof want),
                      bqhlp2 ? "(B, N_q, N_h, N_l, N_p, 2) per --sampling-locations-layout BQHLP2"
                             : "(B, 2, N_q, N_h, N_l, N_p) per --sampling-locations-layout B2QHLP",
                      c->path[F_WEIGHTS], !same_shape(loc, 6, other_shape) ? ""
                      : bqhlp2 ? "; --sampling-locations-layout B2QHLP makes the shapes fit"
                               : "; --sampling-locations-layout BQHLP2 makes the shapes fit");

    if (o->backward) {
        int64_t go_shape[3] = {B, Q, 0};
        if (__builtin_mul_overflow(H, C, &go_shape[2]))
            return report(EXIT_BAD_INPUT, "%s: N_h*C_h overflows 64 bits", c->path[F_VALUE]);
        if (!same_shape(&c->arr[F_GRAD_OUTPUT], 3, go_shape))
            return report(EXIT_BAD_INPUT, "%s: shape %s, expected %s = (B, N_q, N_h*C_h)", c->path[F_GRAD_OUTPUT],
                          shape_of(&c->arr[F_GRAD_OUTPUT], got), npy_format_shape(3, go_shape, want, sizeof want));
    }

    *p = o->problem;
    p->batch = B;
    p->num_queries = Q;
    p->num_heads = H;
    p->channels = C;
    p->num_levels = NL;
    p->num_points = P;
    p->value_length = L;
    p->spatial_shapes = c->i64[F_SHAPES];
    p->level_start_index = c->i64[F_STARTS];

    /* The library has the last word (level starts above all); name the file its message is about. */
    msda_error e;
    if (msda_validate(p, &e) != MSDA_OK) {
        const char *file = !strncmp(e.message, "level_start_index", 17) ? c->path[F_STARTS]
                         : !strncmp(e.message, "spatial_shapes", 14)    ? c->path[F_SHAPES]
                                                                        : c->path[F_VALUE];
        return report(EXIT_BAD_INPUT, "%s: %s", file, e.message);
    }
    return 0;
}

/* ---- outputs --------------------------------------------------------------------------- */

/* mkdir -p, then checks the result is a writable directory. */
static char staging_dir[4096];

static int prepare_out(const char *dir)
{
    /* The private directory's name must fit (checked here, before computing, not after). */
    size_t d = strlen(dir);
    if (d + (dir[d - 1] == '/' ? 0 : 1) + strlen(".msda-XXXXXX") >= sizeof staging_dir)
        return report(EXIT_BAD_INPUT, "--out %s: path too long", dir);
    char *p = strdup(dir);
    if (!p) return report(EXIT_OTHER, "out of memory");
    for (char *s = p + 1; ; s++) {
        if (*s == '/' || *s == '\0') {
            char keep = *s;
            *s = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                int e = errno;
                int code = report(EXIT_BAD_INPUT, "--out %s: cannot create directory %s: %s", dir, p, strerror(e));
                free(p);
                return code;
            }
            *s = keep;
            if (!keep) break;
        }
    }
    free(p);
    struct stat st;
    if (stat(dir, &st) != 0) return report(EXIT_BAD_INPUT, "--out %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return report(EXIT_BAD_INPUT, "--out %s: not a directory", dir);
    if (access(dir, W_OK | X_OK) != 0) return report(EXIT_BAD_INPUT, "--out %s: not writable: %s", dir, strerror(errno));
    return 0;
}

typedef struct output_file {
    const char *name;
    int ndim;
    const int64_t *shape;
    const float *data;
} output_file;

enum { MAX_OUTPUTS = 3 };
static const char *const FORWARD_OUTPUTS[] = {"output.npy"};
static const char *const BACKWARD_OUTPUTS[] = {"grad_value.npy", "grad_sampling_locations.npy",
                                               "grad_attention_weights.npy"};

/* A destination must be absent or something rename() replaces (a file, a symlink: the link
 * itself, never its target); a directory cannot be. Checked before computing (exit 2) and
 * again before the first rename (exit 1: the directory changed meanwhile). */
static int check_destinations(const char *dir, const char *const *names, int n, int code)
{
    for (int i = 0; i < n; i++) {
        char *p = join(dir, names[i]);
        if (!p) return report(EXIT_OTHER, "out of memory");
        struct stat st;
        int rc = 0;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            rc = report(code, "--out %s: %s is a directory, so the output cannot replace it", dir, p);
        free(p);
        if (rc) return rc;
    }
    return 0;
}

/* The private directory the outputs are written into, for the signal handler: paths built
 * before the handler can see them, removed by it with async-signal-safe calls only. */
static char staging_file[MAX_OUTPUTS][4096 + 64];
static int staging_files;
static volatile sig_atomic_t staging_armed;

static void remove_staging(void)
{
    for (int i = 0; i < staging_files; i++) unlink(staging_file[i]);
    rmdir(staging_dir);
}

static void on_signal(int sig)
{
    if (staging_armed) remove_staging();
    signal(sig, SIG_DFL);
    raise(sig);
}

static const int CLEANUP_SIGNALS[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

static void block_signals(int how)
{
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof CLEANUP_SIGNALS / sizeof CLEANUP_SIGNALS[0]; i++) sigaddset(&set, CLEANUP_SIGNALS[i]);
    sigprocmask(how, &set, NULL);
}

static void install_signal_cleanup(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof CLEANUP_SIGNALS / sizeof CLEANUP_SIGNALS[0]; i++) {
        struct sigaction old;
        /* leave a signal the caller ignores (nohup) ignored */
        if (sigaction(CLEANUP_SIGNALS[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(CLEANUP_SIGNALS[i], &sa, NULL);
    }
}

/* Writes the outputs into a fresh private directory inside dir (mkdtemp: random name, mode
 * 0700, created exclusively), each file created with O_EXCL | O_NOFOLLOW, so nothing planted
 * in dir can redirect a write. Once all are complete and every destination is still
 * replaceable, renames them into place one by one. On any failure or signal the private
 * directory is removed and no older output has changed (unless dir changes under us between
 * the check and the renames: then the error names what this run already replaced). */
/* One output in out_dtype: float32 as it is; float16 as '<f2' bits; bfloat16 as the float32
 * values of the bfloat16 numbers nearest (NumPy has no bfloat16: float32 holds them exactly). */
static int write_one(int fd, const output_file *f, int out_dtype, char *err, size_t errlen)
{
    if (out_dtype == CC_FLOAT32) return npy_write_fd(fd, NPY_F4, f->ndim, f->shape, f->data, err, errlen);
    int64_t count = 1;
    for (int i = 0; i < f->ndim; i++) count *= f->shape[i];
    void *buf = malloc((size_t)(count ? count : 1) * (out_dtype == CC_FLOAT16 ? 2 : 4));
    if (!buf) {
        snprintf(err, errlen, "out of memory for %lld elements", (long long)count);
        return -1;
    }
    for (int64_t i = 0; i < count; i++) {
        uint32_t u;
        memcpy(&u, &f->data[i], 4);
        if (out_dtype == CC_FLOAT16) {
            ((uint16_t *)buf)[i] = npy_f32_to_f16(u);
        } else {
            u = npy_bf16_to_f32(npy_f32_to_bf16(u));
            memcpy((uint32_t *)buf + i, &u, 4);
        }
    }
    int rc = npy_write_fd(fd, out_dtype == CC_FLOAT16 ? NPY_F2 : NPY_F4, f->ndim, f->shape, buf, err, errlen);
    free(buf);
    return rc;
}

static int write_outputs(const char *dir, const output_file *files, int n, int out_dtype)
{
    int code = 0, renamed = 0;
    char *final[MAX_OUTPUTS] = {0};
    const char *names[MAX_OUTPUTS];
    for (int i = 0; i < n; i++) {
        names[i] = files[i].name;
        final[i] = join(dir, files[i].name);
        if (!final[i]) code = report(EXIT_OTHER, "out of memory");
    }
    int len = snprintf(staging_dir, sizeof staging_dir, dir[strlen(dir) - 1] == '/' ? "%s.msda-XXXXXX" : "%s/.msda-XXXXXX", dir);
    if (!code && (len < 0 || (size_t)len >= sizeof staging_dir))
        code = report(EXIT_BAD_INPUT, "--out %s: path too long", dir);
    if (code) goto done;

    install_signal_cleanup();
    block_signals(SIG_BLOCK);
    if (!mkdtemp(staging_dir)) {
        int e = errno;
        block_signals(SIG_UNBLOCK);
        code = report(EXIT_OTHER, "--out %s: cannot create a private directory for the outputs: %s", dir, strerror(e));
        goto done;
    }
    staging_files = n;
    for (int i = 0; i < n; i++) snprintf(staging_file[i], sizeof staging_file[i], "%s/%s", staging_dir, files[i].name);
    staging_armed = 1;
    block_signals(SIG_UNBLOCK);

    for (int i = 0; i < n && !code; i++) {
        char err[320];
        int fd = open(staging_file[i], O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0) {
            code = report(EXIT_OTHER, "%s: cannot create: %s", final[i], strerror(errno));
            break;
        }
        if (write_one(fd, &files[i], out_dtype, err, sizeof err))
            code = report(EXIT_OTHER, "%s: %s", final[i], err);
        if (close(fd) != 0 && !code) code = report(EXIT_OTHER, "%s: write error: %s", final[i], strerror(errno));
    }
    /* From here a signal waits until the renames are done: all outputs appear, or none. */
    block_signals(SIG_BLOCK);
    if (!code) code = check_destinations(dir, names, n, EXIT_OTHER);
    for (int i = 0; i < n && !code; i++) {
        if (rename(staging_file[i], final[i]) == 0) {
            renamed++;
            continue;
        }
        int e = errno;
        char done_list[256] = "";
        for (int k = 0; k < renamed; k++) {
            size_t used = strlen(done_list);
            snprintf(done_list + used, sizeof done_list - used, "%s%s", k ? ", " : "", files[k].name);
        }
        if (renamed)
            code = report(EXIT_OTHER, "%s: cannot rename into place: %s (--out changed during the run; this run already replaced %s)",
                          final[i], strerror(e), done_list);
        else
            code = report(EXIT_OTHER, "%s: cannot rename into place: %s", final[i], strerror(e));
    }
    remove_staging();
    staging_armed = 0;
    block_signals(SIG_UNBLOCK);
done:
    for (int i = 0; i < n; i++) free(final[i]);
    return code;
}

static float *alloc_floats(int64_t n)
{
    return malloc((size_t)n * sizeof(float)); /* n > 0 and its byte size fits: validated */
}

static int run(const options *o, case_data *c)
{
    msda_problem p;
    int code = derive_problem(o, c, &p);
    if (code) return code;
    code = prepare_out(o->out);
    if (!code)
        code = o->backward ? check_destinations(o->out, BACKWARD_OUTPUTS, 3, EXIT_BAD_INPUT)
                           : check_destinations(o->out, FORWARD_OUTPUTS, 1, EXIT_BAD_INPUT);
    if (code) return code;

    msda_error e;
    const int64_t value_n = msda_value_elements(&p), loc_n = msda_locations_elements(&p),
                  weights_n = msda_weights_elements(&p), out_n = msda_output_elements(&p);
    const int64_t out_shape[3] = {p.batch, p.num_queries, p.num_heads * p.channels};
    if (!o->backward) {
        float *output = alloc_floats(out_n);
        if (!output) return report(EXIT_OTHER, "out of memory for output (%lld floats)", (long long)out_n);
        if (msda_forward(&p, c->f32[F_VALUE], c->f32[F_LOCATIONS], c->f32[F_WEIGHTS], output, &e) != MSDA_OK) {
            code = report(EXIT_OTHER, "forward failed: %s: %s", msda_status_string(e.status), e.message);
        } else {
            const output_file files[] = {{FORWARD_OUTPUTS[0], 3, out_shape, output}};
            code = write_outputs(o->out, files, 1, o->out_dtype);
        }
        free(output);
        return code;
    }
    float *grad_value = alloc_floats(value_n), *grad_loc = alloc_floats(loc_n), *grad_weights = alloc_floats(weights_n);
    if (!grad_value || !grad_loc || !grad_weights) {
        code = report(EXIT_OTHER, "out of memory for the gradients (%lld floats)",
                      (long long)(value_n + loc_n + weights_n));
    } else if (msda_backward(&p, c->f32[F_GRAD_OUTPUT], c->f32[F_VALUE], c->f32[F_LOCATIONS], c->f32[F_WEIGHTS],
                             grad_value, grad_loc, grad_weights, &e) != MSDA_OK) {
        code = report(EXIT_OTHER, "backward failed: %s: %s", msda_status_string(e.status), e.message);
    } else {
        const output_file files[] = {
            {BACKWARD_OUTPUTS[0], 4, c->arr[F_VALUE].shape, grad_value},
            {BACKWARD_OUTPUTS[1], 6, c->arr[F_LOCATIONS].shape, grad_loc},
            {BACKWARD_OUTPUTS[2], 5, c->arr[F_WEIGHTS].shape, grad_weights},
        };
        code = write_outputs(o->out, files, 3, o->out_dtype);
    }
    free(grad_value);
    free(grad_loc);
    free(grad_weights);
    return code;
}

/* crosscheck --expect DIR: your files against the float64 reference (crosscheck.c), in the JS
 * CLI's order of checks, so that both name the same problem first. */
static int run_crosscheck(options *o)
{
    source src;
    int opened = source_open(&src, "--expect", o->expect);
    if (opened) return opened;
    static const char *const OUTPUT_FILES[] = {"output.npy", "grad_value.npy", "grad_sampling_locations.npy",
                                               "grad_attention_weights.npy", NULL};
    opened = source_strays(&src, "--expect", OUTPUT_FILES,
                           "output.npy, grad_value.npy, grad_sampling_locations.npy, grad_attention_weights.npy");
    if (opened) {
        source_close(&src);
        return opened;
    }
    char *path[CC_COUNT] = {0};
    npy_array arr[CC_COUNT];
    float *data[CC_COUNT] = {0};
    text problems = {NULL, 0, 0};
    int code = 0, found = 0;
    for (int k = 0; k < CC_COUNT && code != EXIT_OTHER; k++) {
        char name[64], err[320];
        snprintf(name, sizeof name, "%s.npy", CC_NAMES[k]);
        path[k] = source_path(&src, name);
        if (!path[k]) { code = report(EXIT_OTHER, "out of memory"); break; }
        if (!source_has(&src, path[k], name)) {
            free(path[k]);
            path[k] = NULL;
            continue;
        }
        int io_error = 0;
        void *loaded = NULL;
        int rc = source_load(&src, path[k], name, 0, &arr[k], &loaded, &io_error, err, sizeof err);
        data[k] = loaded;
        if (rc == 0) { found++; continue; }
        if (code) append(&problems, "; also: ");
        code = EXIT_BAD_INPUT;
        if (arr[k].bad_dtype) dtype_hint(&problems, path[k], name, arr[k].descr, 0);
        else append(&problems, "%s: %s", path[k], err);
    }
    if (code == EXIT_BAD_INPUT) report(code, "%s", problems.s ? problems.s : "out of memory");
    free(problems.s);
    source_close(&src);
    if (!code && !found)
        code = report(EXIT_BAD_INPUT, "--expect %s: none of output.npy, grad_value.npy, grad_sampling_locations.npy, "
                      "grad_attention_weights.npy is there", o->expect);
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
            code = report(EXIT_BAD_INPUT, "%s: shape %s, expected %s (the shape of %s)", path[k], shape_of(&arr[k], got),
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
        s.rtol = o->rtol;
        s.atol = o->atol;
        s.dtype = o->dtype;
        s.dtype_from = "--dtype";
        if (o->dtype == CC_NO_DTYPE && !o->have_rtol && !o->have_atol) {
            /* the files' own dtype when all are float16, or all bfloat16 */
            int f2 = 0, bf = 0, all = 0;
            for (int k = 0; k < CC_COUNT; k++) {
                if (!data[k]) continue;
                all++;
                f2 += arr[k].dtype == NPY_F2;
                bf += arr[k].dtype == NPY_BF16;
            }
            s.dtype = f2 == all ? CC_FLOAT16 : bf == all ? CC_BFLOAT16 : CC_FLOAT32;
            s.dtype_from = s.dtype == CC_FLOAT32 ? "the default" : "the dtype of the files";
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
        if (rc < 0) code = report(EXIT_OTHER, "out of memory");
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

int main(int argc, char **argv)
{
    options o;
    int code = parse_args(argc, argv, &o);
    if (code < 0) return EXIT_OK; /* --help, --version */
    if (code) return code;
    if (o.crosscheck) return run_crosscheck(&o);
    case_data c;
    memset(&c, 0, sizeof c);
    code = load_case(&o, &c);
    if (!code) code = run(&o, &c);
    case_free(&c);
    return code;
}
