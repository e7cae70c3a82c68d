/* A case's files for the native CLI (bindings/cli/cases.js is the other half): read from a
 * directory or an .npz archive, every bad one named, and the problem derived from their shapes
 * with each checked against the others. */
#ifndef MSDA_CLI_CASES_H
#define MSDA_CLI_CASES_H

#include "args.h"
#include "messages.h"
#include "msda.h"
#include "npy.h"
#include "npz.h"

#include <stddef.h>
#include <stdint.h>

enum { F_VALUE, F_SHAPES, F_STARTS, F_LOCATIONS, F_WEIGHTS, F_GRAD_OUTPUT, F_COUNT };

typedef struct case_data {
    char *path[F_COUNT];
    npy_array arr[F_COUNT];
    float *f32[F_COUNT];     /* float inputs */
    int64_t *i64[F_COUNT];   /* spatial_shapes, level_start_index */
} case_data;

void case_free(case_data *c);

/* Where a case's (or --expect's) .npy files come from: a directory, or an .npz archive of them
 * whose members are named ARCHIVE:name in messages (as the JS CLI names them). */
typedef struct source {
    const char *dir;
    int is_npz;
    unsigned char *bytes;
    size_t len;
    npz z;
} source;

int source_open(source *s, const char *flag, const char *dir);
void source_close(source *s);
/* The name messages give a file (or member), malloc'd. */
char *source_path(const source *s, const char *name);
/* Present unless absent for sure (lstat's ENOENT): a dangling symlink, or a name lstat cannot
 * look at, is there, and reading it says why (as the JS CLI does). */
int source_has(const source *s, const char *path, const char *name);
int source_missing(const source *s, const char *path, const char *name);
/* A file (or member) that is none of names would go unchecked: a typo must not pass. 0, or the
 * exit status of the report naming the first (in byte order; an archive's in its order). */
int source_strays(const source *s, const char *flag, const char *const *names, const char *list);
/* Loads member name (at path) as floats or int64: npy_load_* semantics. */
int source_load(const source *s, const char *path, const char *name, int ints, npy_array *arr, void **data,
                int *io_error, char *err, size_t errlen);

/* What to do about a file of the wrong dtype, in NumPy's words (the JS CLI prints the same). */
void dtype_hint(text *t, const char *path, const char *name, const char *descr, int want_int);

/* Reads --in's files (grad_output.npy for backward): 0, or the exit status of the report. */
int load_case(const options *o, case_data *c);

typedef char shape_text[NPY_MAX_DIMS * 22 + 4];
const char *shape_of(const npy_array *a, shape_text buf);
int same_shape(const npy_array *a, int ndim, const int64_t *shape);

/* Derives the dimensions from the files and checks every file against the others. */
int derive_problem(const options *o, case_data *c, msda_problem *p);

#endif
