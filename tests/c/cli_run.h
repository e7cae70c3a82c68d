/* The native CLI end to end, for tests/c/test_cli*.c: run it ($MSDA_CLI, default
 * build/native/msda) as a child process, and write case directories with the .npy writer. */
#ifndef MSDA_TEST_CLI_RUN_H
#define MSDA_TEST_CLI_RUN_H

#include "msda.h"
#include "npy.h" /* the CLI library (libmsdacli.a): the CLI is not part of libmsda */
#include "testutil.h"

#include <stdint.h>

extern char root[];     /* a fresh directory under /tmp for the run's files */
extern const char *cli; /* the CLI under test */

typedef struct result {
    int status;          /* exit code, or 128 + signal */
    char err[4096];      /* stderr */
    char out[8192];      /* stdout */
} result;

/* Runs cli with the NULL-terminated arguments. */
void run_argv(result *r, char *const *args);
#define RUN(r, ...) do { char *const args_[] = {__VA_ARGS__, NULL}; run_argv((r), args_); } while (0)

/* dir/name in one of four rotating buffers. */
char *path_in(const char *dir, const char *name);
void save_or_die(const char *path, npy_dtype dtype, int ndim, const int64_t *shape, const void *data);
void value_shape(const msda_problem *p, int64_t s[4]);
void locations_shape(const msda_problem *p, int64_t s[6]);
void weights_shape(const msda_problem *p, int64_t s[5]);
/* Writes the case's inputs; the shape files as int32 when ints32. */
void write_case(const char *dir, const tu_case *tc, int ints32);
/* Loads DIR/name as <f4, checks its shape, compares with ref. */
void check_output(const char *dir, const char *name, int ndim, const int64_t *shape, const double *ref, int64_t n,
                  const char *ctx);
/* Names of the entries of dir (excluding . and ..), comma separated; "" when empty or absent. */
const char *listing(const char *dir);

/* Finds the CLI and makes root: 0, or -1 having said why. */
int cli_start(const char *test);
/* Removes root. */
void cli_finish(void);

#endif
