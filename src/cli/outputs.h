/* The native CLI's outputs (bindings/cli/outputs.js is the other half): --out prepared before
 * computing, then every output written into a private directory and renamed into place only
 * once all are complete: all appear, or none of the older ones change. */
#ifndef MSDA_CLI_OUTPUTS_H
#define MSDA_CLI_OUTPUTS_H

#include <stdint.h>

extern const char *const FORWARD_OUTPUTS[1];
extern const char *const BACKWARD_OUTPUTS[3];

typedef struct output_file {
    const char *name;
    int ndim;
    const int64_t *shape;
    const float *data;
} output_file;

/* mkdir -p, then checks the result is a writable directory (exit 2 otherwise). */
int prepare_out(const char *dir);
/* Each of dir/names must be absent or something rename() replaces: 0, or code and a report. */
int check_destinations(const char *dir, const char *const *names, int n, int code);
/* The n files in out_dtype (DTYPE_*), all or nothing: 0, or the exit status of the report. */
int write_outputs(const char *dir, const output_file *files, int n, int out_dtype);

#endif
