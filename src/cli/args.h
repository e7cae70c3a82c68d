/* The native CLI's arguments (bindings/cli/args.js is the other half): the options of a command
 * line, read with the JS CLI's rules and messages. */
#ifndef MSDA_CLI_ARGS_H
#define MSDA_CLI_ARGS_H

#include "msda.h"

/* A precision named by --dtype or --out-dtype. */
enum { DTYPE_FLOAT32, DTYPE_FLOAT16, DTYPE_BFLOAT16, DTYPE_NO_DTYPE = -1 };

typedef struct options {
    int backward, crosscheck;
    int help, version;    /* --help or --version was given: nothing else is read */
    const char *in, *out, *expect, *backend;
    msda_problem problem; /* options only; dimensions are filled in from the files */
    int dtype;            /* DTYPE_* or DTYPE_NO_DTYPE (not given) */
    int have_rtol, have_atol, top, json;
    double rtol, atol;
    int out_dtype; /* DTYPE_FLOAT32 (default), DTYPE_FLOAT16: '<f2' files, DTYPE_BFLOAT16: '<f4' files of bfloat16 values */
} options;

/* Reads argv into o: 0, -1 for --help or --version (o->help, o->version), else the exit status
 * of the message it printed. */
int parse_args(int argc, char **argv, options *o);

/* Is name one of the NULL-terminated list? */
int is_one_of(const char *name, const char *const *list);

#endif
