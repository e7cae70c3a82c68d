/* A case's files for the native CLI (see cases.h). */
#define _POSIX_C_SOURCE 200809L
#include "cases.h"
#include "texts.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const INPUT_NAMES[F_COUNT] = {
    "value.npy", "spatial_shapes.npy", "level_start_index.npy",
    "sampling_locations.npy", "attention_weights.npy", "grad_output.npy",
};

void case_free(case_data *c)
{
    for (int i = 0; i < F_COUNT; i++) {
        free(c->path[i]);
        free(c->f32[i]);
        free(c->i64[i]);
    }
    free(c->problems.s);
}

void dtype_hint(text *t, const char *path, const char *name, const char *descr, int want_int)
{
    const int big_endian = descr[0] == '>';
    if (!want_int && (!strcmp(descr, "<V2") || !strcmp(descr, "|V2"))) {
        append(t, TEXT_DTYPE_VOID, path, descr);
        return;
    }
    if (!want_int && (!strcmp(descr, "<i2") || !strcmp(descr, "<u2"))) {
        append(t, TEXT_DTYPE_INT16, path, descr);
        return;
    }
    append(t, TEXT_DTYPE_WRONG, path, descr, big_endian ? TEXT_DTYPE_BIG_ENDIAN : "", name,
           big_endian ? TEXT_DTYPE_LITTLE_ENDIAN : "", want_int ? TEXT_DTYPES_INT : TEXT_DTYPES_FLOAT,
           want_int ? (big_endian ? TEXT_DTYPE_FIX_INT_BIG : TEXT_DTYPE_FIX_INT)
                    : (big_endian ? TEXT_DTYPE_FIX_FLOAT_BIG : TEXT_DTYPE_FIX_FLOAT));
}


int open_case_dir(const char *flag, const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0) return report(EXIT_BAD_INPUT, TEXT_SOURCE_SAYS, flag, dir, strerror(errno));
    if (S_ISDIR(st.st_mode)) return 0;
    char err[NPY_ERR_MAX];
    int io_error = 0, zip = 0;
    unsigned char *bytes = NULL;
    size_t len = 0;
    if (S_ISREG(st.st_mode) && npy_read_whole(dir, &bytes, &len, &io_error, err, sizeof err))
        return report(io_error ? EXIT_OTHER : EXIT_BAD_INPUT, TEXT_FILE_SAYS, dir, err);
    zip = len >= 4 && !memcmp(bytes, "PK\3\4", 4);
    free(bytes);
    return zip ? report(EXIT_BAD_INPUT, TEXT_NPZ_IS_JS, flag, dir)
               : report(EXIT_BAD_INPUT, TEXT_NOT_DIRECTORY_NOR_NPZ, flag, dir);
}

int file_present(const char *path)
{
    struct stat st;
    return !(lstat(path, &st) != 0 && errno == ENOENT);
}

int stray_files(const char *flag, const char *dir, const char *const *names, const char *list)
{
    char *first = NULL;
    long more = -1;
    int code = 0;
    DIR *d = opendir(dir);
    if (!d) return report(EXIT_BAD_INPUT, TEXT_CANNOT_LIST, flag, dir, strerror(errno));
    for (struct dirent *e; (e = readdir(d)) != NULL && !code;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || is_one_of(e->d_name, names)) continue;
        more++;
        if (first && strcmp(e->d_name, first) >= 0) continue;
        free(first);
        if (!(first = strdup(e->d_name))) code = report(EXIT_OTHER, TEXT_OUT_OF_MEMORY);
    }
    closedir(d);
    if (first && !code) {
        char show[SHOWN_MAX];
        if (more) code = report(EXIT_BAD_INPUT, TEXT_STRAY_NAMES, flag, dir, shown(first, show), more, list);
        else code = report(EXIT_BAD_INPUT, TEXT_STRAY_NAME, flag, dir, shown(first, show), list);
    }
    free(first);
    return code;
}

int read_case_file(const char *path, const char *name, int ints, npy_array *arr, void **data, text *problems,
                   int *io_error)
{
    char err[NPY_ERR_MAX];
    memset(arr, 0, sizeof *arr);
    *io_error = 0;
    int rc = ints ? npy_load_i64(path, arr, (int64_t **)data, io_error, err, sizeof err)
                  : npy_load_f32(path, arr, (float **)data, io_error, err, sizeof err);
    if (!rc) return 0;
    if (problems->len || problems->failed) append(problems, TEXT_ALSO);
    if (arr->bad_dtype) dtype_hint(problems, path, name, arr->descr, ints);
    else append(problems, TEXT_FILE_SAYS, path, err);
    return -1;
}

int load_case(const options *o, case_data *c)
{
    int code = open_case_dir("--in", o->in);
    if (code) return code;
    int files = o->backward ? F_COUNT : F_GRAD_OUTPUT;
    for (int i = 0; i < files; i++) {
        c->path[i] = join(o->in, INPUT_NAMES[i]);
        if (!c->path[i]) return report(EXIT_OTHER, TEXT_OUT_OF_MEMORY);
        if (i == F_STARTS && !file_present(c->path[i])) continue; /* derived */
        const int ints = i == F_SHAPES || i == F_STARTS;
        void *data = NULL;
        int io_error = 0;
        const int rc = read_case_file(c->path[i], INPUT_NAMES[i], ints, &c->arr[i], &data, &c->problems, &io_error);
        if (ints) c->i64[i] = data;
        else c->f32[i] = data;
        c->read[i] = !rc;
        if (rc && !c->code) c->code = io_error ? EXIT_OTHER : EXIT_BAD_INPUT;
    }
    return 0;
}

const char *shape_of(const npy_array *a, shape_text buf)
{
    return npy_format_shape(a->ndim, a->shape, buf, sizeof(shape_text));
}

int same_shape(const npy_array *a, int ndim, const int64_t *shape)
{
    if (a->ndim != ndim) return 0;
    for (int i = 0; i < ndim; i++)
        if (a->shape[i] != shape[i]) return 0;
    return 1;
}

enum { UNKNOWN = -1 }; /* a dimension whose file is bad */

/* An expected shape, each dimension not known by its name. */
static const char *expected_text(int n, const int64_t *dims, const char *const *names, shape_text buf)
{
    size_t k = 1;
    buf[0] = '(';
    for (int i = 0; i < n; i++) {
        if (dims[i] == UNKNOWN) k += (size_t)snprintf(buf + k, sizeof(shape_text) - k, "%s%s", i ? ", " : "", names[i]);
        else k += (size_t)snprintf(buf + k, sizeof(shape_text) - k, "%s%lld", i ? ", " : "", (long long)dims[i]);
    }
    snprintf(buf + k, sizeof(shape_text) - k, n == 1 ? ",)" : ")");
    return buf;
}

static int fits(const npy_array *a, int ndim, const int64_t *dims)
{
    if (a->ndim != ndim) return 0;
    for (int i = 0; i < ndim; i++)
        if (dims[i] != UNKNOWN && a->shape[i] != dims[i]) return 0;
    return 1;
}

static void problem(text *t, const char *fmt, ...) MSDA_PRINTF(2, 3);
static void problem(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n < 0 ? NULL : malloc((size_t)n + 1);
    if (!s) {
        t->failed = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    if (t->len || t->failed) append(t, TEXT_ALSO);
    append(t, "%s", s);
    free(s);
}

static int64_t same_or_unknown(int64_t got, int64_t known)
{
    return got == known ? known : UNKNOWN;
}

int derive_problem(const options *o, case_data *c, msda_problem *p)
{
    shape_text got, want;
    const npy_array *value = &c->arr[F_VALUE], *shapes = &c->arr[F_SHAPES], *starts = &c->arr[F_STARTS],
                    *loc = &c->arr[F_LOCATIONS], *weights = &c->arr[F_WEIGHTS];
    const int blnc = o->problem.value_layout == MSDA_VALUE_BLNC;
    const int bqhlp2 = o->problem.locations_layout == MSDA_LOCATIONS_BQHLP2;
    const char *value_dims = blnc ? TEXT_VALUE_DIMS_BLNC : TEXT_VALUE_DIMS_BNLC;
    text *t = &c->problems;
    int64_t B = UNKNOWN, L = UNKNOWN, H = UNKNOWN, C = UNKNOWN, NL = UNKNOWN, Q = UNKNOWN, P = UNKNOWN, total = 0;

    if (c->read[F_VALUE]) {
        int empty = 0;
        for (int i = 0; i < value->ndim; i++) empty |= value->shape[i] < 1;
        if (value->ndim != 4)
            problem(t, TEXT_VALUE_NOT4D, c->path[F_VALUE], shape_of(value, got), value_dims);
        else if (empty)
            problem(t, TEXT_VALUE_EMPTY, c->path[F_VALUE], shape_of(value, got), value_dims);
        else
            B = value->shape[0], L = value->shape[blnc ? 1 : 2], H = value->shape[blnc ? 2 : 1], C = value->shape[3];
    }

    if (c->read[F_SHAPES]) {
        if (shapes->ndim != 2 || shapes->shape[1] != 2 || shapes->shape[0] < 1) {
            problem(t, TEXT_SHAPES_SHAPE, c->path[F_SHAPES], shape_of(shapes, got));
        } else {
            int row_bad = 0;
            for (int64_t l = 0; l < shapes->shape[0] && !row_bad; l++) {
                int64_t h = c->i64[F_SHAPES][2 * l], w = c->i64[F_SHAPES][2 * l + 1], hw;
                if (h < 1 || w < 1) {
                    problem(t, TEXT_SHAPES_ROW, c->path[F_SHAPES], (long long)l, (long long)h, (long long)w);
                    row_bad = 1;
                } else if (__builtin_mul_overflow(h, w, &hw) || __builtin_add_overflow(total, hw, &total)) {
                    problem(t, TEXT_SHAPES_OVERFLOW, c->path[F_SHAPES], (long long)l);
                    row_bad = 1;
                }
            }
            if (!row_bad) NL = shapes->shape[0];
        }
    }
    if (L != UNKNOWN && NL != UNKNOWN && L != total) {
        const int other_fits = value->shape[blnc ? 2 : 1] == total;
        problem(t, TEXT_VALUE_LENGTH, c->path[F_VALUE], shape_of(value, got), (long long)L, (long long)total,
                c->path[F_SHAPES], value_dims, !other_fits ? "" : blnc ? TEXT_VALUE_FITS_BNLC : TEXT_VALUE_FITS_BLNC);
        H = UNKNOWN; /* the value may be in the other layout */
    }

    int starts_fit = 0;
    if (c->read[F_STARTS] && NL != UNKNOWN) {
        starts_fit = same_shape(starts, 1, &NL);
        if (!starts_fit)
            problem(t, TEXT_STARTS_SHAPE, c->path[F_STARTS], shape_of(starts, got),
                    npy_format_shape(1, &NL, want, sizeof want), c->path[F_SHAPES]);
    }

    if (c->read[F_WEIGHTS]) {
        static const char *const names[5] = {"B", "N_q", "N_h", "N_l", "N_p"};
        const int64_t dims[5] = {B, UNKNOWN, H, NL, UNKNOWN};
        if (!fits(weights, 5, dims) || weights->shape[1] < 1 || weights->shape[4] < 1) {
            problem(t, TEXT_WEIGHTS_SHAPE, c->path[F_WEIGHTS], shape_of(weights, got), expected_text(5, dims, names, want),
                    c->path[F_VALUE], c->path[F_SHAPES]);
            /* Either file may be the wrong one: what they disagree on is not held against the others. */
            if (weights->ndim == 5)
                B = same_or_unknown(weights->shape[0], B), H = same_or_unknown(weights->shape[2], H),
                NL = same_or_unknown(weights->shape[3], NL);
        } else {
            Q = weights->shape[1], P = weights->shape[4];
        }
    }

    if (c->read[F_LOCATIONS]) {
        static const char *const names_bqhlp2[6] = {"B", "N_q", "N_h", "N_l", "N_p", "2"};
        static const char *const names_b2qhlp[6] = {"B", "2", "N_q", "N_h", "N_l", "N_p"};
        const int64_t loc_shape[6] = {B, bqhlp2 ? Q : 2, bqhlp2 ? H : Q, bqhlp2 ? NL : H, bqhlp2 ? P : NL, bqhlp2 ? 2 : P};
        const int64_t other_shape[6] = {B, !bqhlp2 ? Q : 2, !bqhlp2 ? H : Q, !bqhlp2 ? NL : H, !bqhlp2 ? P : NL, !bqhlp2 ? 2 : P};
        if (!fits(loc, 6, loc_shape)) {
            const int other_fits = fits(loc, 6, other_shape), q = bqhlp2 ? 1 : 2;
            problem(t, TEXT_LOCATIONS_SHAPE, c->path[F_LOCATIONS], shape_of(loc, got),
                    expected_text(6, loc_shape, bqhlp2 ? names_bqhlp2 : names_b2qhlp, want),
                    bqhlp2 ? TEXT_LOCATIONS_DIMS_BQHLP2 : TEXT_LOCATIONS_DIMS_B2QHLP, c->path[F_WEIGHTS],
                    !other_fits ? "" : bqhlp2 ? TEXT_LOCATIONS_FIT_B2QHLP : TEXT_LOCATIONS_FIT_BQHLP2);
            if (loc->ndim == 6 && !other_fits)
                B = same_or_unknown(loc->shape[0], B), Q = same_or_unknown(loc->shape[q], Q),
                H = same_or_unknown(loc->shape[q + 1], H);
        }
    }

    if (c->read[F_GRAD_OUTPUT]) {
        static const char *const names[3] = {"B", "N_q", "N_h*C_h"};
        int64_t go_shape[3] = {B, Q, UNKNOWN};
        if (H != UNKNOWN && C != UNKNOWN && __builtin_mul_overflow(H, C, &go_shape[2]))
            problem(t, TEXT_GRAD_OUTPUT_OVERFLOW, c->path[F_VALUE]);
        else if (!fits(&c->arr[F_GRAD_OUTPUT], 3, go_shape))
            problem(t, TEXT_GRAD_OUTPUT_SHAPE, c->path[F_GRAD_OUTPUT], shape_of(&c->arr[F_GRAD_OUTPUT], got),
                    expected_text(3, go_shape, names, want));
    }

    /* The library's level-start rule and message, with the file name (msda_validate below has the
     * last word; checked here too so that a bad start is named with the other problems). */
    if (starts_fit) {
        int64_t start = 0;
        for (int64_t l = 0; l < shapes->shape[0]; l++) {
            const int64_t s = c->i64[F_STARTS][l];
            if (s != start) {
                if (l == 0) problem(t, TEXT_STARTS_FIRST, c->path[F_STARTS], (long long)s);
                else problem(t, TEXT_STARTS_LATER, c->path[F_STARTS], (long long)l, (long long)s, (long long)start, (long long)(l - 1));
                break;
            }
            start += c->i64[F_SHAPES][2 * l] * c->i64[F_SHAPES][2 * l + 1];
        }
    }

    if (t->len || t->failed) return report(c->code ? c->code : EXIT_BAD_INPUT, "%s", t->s ? t->s : TEXT_OUT_OF_MEMORY);

    /* level_start_index.npy may be left out: it is derived from spatial_shapes */
    if (!c->i64[F_STARTS]) {
        c->i64[F_STARTS] = malloc((size_t)NL * sizeof(int64_t));
        if (!c->i64[F_STARTS]) return report(EXIT_OTHER, TEXT_OUT_OF_MEMORY);
        int64_t start = 0;
        for (int64_t l = 0; l < NL; l++) {
            c->i64[F_STARTS][l] = start;
            start += c->i64[F_SHAPES][2 * l] * c->i64[F_SHAPES][2 * l + 1];
        }
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
        return report(EXIT_BAD_INPUT, TEXT_FILE_SAYS, file, e.message);
    }
    return 0;
}
