/* msda crosscheck --expect for the native CLI: your dumps against the float64 reference
 * (bounds.h), each element against its own bound, with the JS CLI's rule, report and JSON,
 * character for character (bindings/cli/crosscheck.js is the other half; the tests run both
 * and compare their output). */
#ifndef MSDA_CLI_CROSSCHECK_H
#define MSDA_CLI_CROSSCHECK_H

#include "args.h"
#include "bounds.h"
#include "msda.h"

#include <stdint.h>
#include <stdio.h>

typedef struct cc_file {
    const char *path;  /* NULL: not compared */
    const char *descr; /* "<f4", "<f2", "bfloat16" */
    const float *data; /* the element count of the output's shape (checked by the caller) */
} cc_file;

typedef struct cc_settings {
    const char *in, *expect;
    tolerance tol;
    const char *dtype_from;
    int top, json;
    const char *backend; /* named by --backend (a note), or NULL */
    /* inputs, for the note on values the dtype cannot hold; NULL where not read */
    const char *input_path[4];
    const float *input_data[4];
    int64_t input_count[4];
} cc_settings;

/* Computes the reference and bounds, prints the report (or the JSON document) on out. Returns 0
 * when everything agrees, 1 when something disagrees (then *failure is the malloc'd text of the
 * stderr line, without "msda: "), -1 when out of memory. */
int cc_run(const msda_problem *p, const float *value, const float *locations, const float *weights,
           const float *grad_output, const cc_file files[CC_COUNT], const cc_settings *s, FILE *out, char **failure);

/* msda crosscheck --in DIR --expect DIR: reads both, checks their shapes, runs cc_run; the exit
 * status. */
int run_crosscheck(options *o);

#endif
