/* A case's files for the native CLI (bindings/cli/cases.js is the other half): read from a
 * directory of .npy files (an .npz is the JS CLI's: refused, naming npx msda), every bad one
 * named, and the problem derived from their shapes with each checked against the others. */
#ifndef MSDA_CLI_CASES_H
#define MSDA_CLI_CASES_H

#include "args.h"
#include "messages.h"
#include "msda.h"
#include "npy.h"

#include <stddef.h>
#include <stdint.h>

enum { F_VALUE, F_SHAPES, F_STARTS, F_LOCATIONS, F_WEIGHTS, F_GRAD_OUTPUT, F_COUNT };

typedef struct case_data {
    char *path[F_COUNT];
    npy_array arr[F_COUNT];
    float *f32[F_COUNT];     /* float inputs */
    int64_t *i64[F_COUNT];   /* spatial_shapes, level_start_index */
    int read[F_COUNT];       /* read without a problem */
    text problems;           /* the files' problems, for derive_problem to report with its own */
    int code;                /* their exit status, 0 when none */
} case_data;

void case_free(case_data *c);

/* Is dir (given as --in or --expect, named flag in messages) a directory? 0, or the exit status
 * of the report: an .npz archive gets the JS CLI's name (the native CLI reads directories only,
 * docs/cli.md "Two command lines"). */
int open_case_dir(const char *flag, const char *dir);
/* Present unless absent for sure (lstat's ENOENT): a dangling symlink, or a name lstat cannot
 * look at, is there, and reading it says why (as the JS CLI does). */
int file_present(const char *path);
/* A file in dir that is none of names would go unchecked: a typo must not pass. 0, or the exit
 * status of the report naming the first in byte order. */
int stray_files(const char *flag, const char *dir, const char *const *names, const char *list);
/* Reads path (name: its file name, for a dtype's hint) as floats or int64 (npy_load_*): 0, or -1
 * with what is wrong appended to problems (after "; also: " when it holds one already) and
 * *io_error set for an I/O or memory failure. */
int read_case_file(const char *path, const char *name, int ints, npy_array *arr, void **data, text *problems,
                   int *io_error);

/* What to do about a file of the wrong dtype, in NumPy's words (the JS CLI prints the same). */
void dtype_hint(text *t, const char *path, const char *name, const char *descr, int want_int);

/* Reads --in's files (grad_output.npy for backward): 0, or the exit status of the report. A bad
 * file does not stop the reading: its problem is kept in c for derive_problem to report. */
int load_case(const options *o, case_data *c);

typedef char shape_text[NPY_MAX_DIMS * 22 + 4];
const char *shape_of(const npy_array *a, shape_text buf);
int same_shape(const npy_array *a, int ndim, const int64_t *shape);

/* Derives the dimensions from the files and checks every file against the others: 0, or the exit
 * status of one report naming every bad file (load_case's too). A file that cannot be read, or
 * fails its own check, leaves its dimensions unknown; the others are checked against those known. */
int derive_problem(const options *o, case_data *c, msda_problem *p);

#endif
