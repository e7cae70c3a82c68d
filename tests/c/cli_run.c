/* Running the native CLI from the C tests (see cli_run.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli_run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

char root[] = "/tmp/msda-test-cli-XXXXXX";
const char *cli = "build/native/msda";

/* ---- running the CLI -------------------------------------------------------------------- */


static void slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
}

/* Runs cli with the NULL-terminated arguments. */
void run_argv(result *r, char *const *args)
{
    char err_path[512], out_path[512];
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", root);
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", root);
    char *argv[40];
    int n = 0;
    argv[n++] = (char *)cli;
    while (args[n - 1] && n < 39) { argv[n] = args[n - 1]; n++; }
    argv[n] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rc = posix_spawn(&pid, cli, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    r->status = -1;
    if (rc != 0) {
        snprintf(r->err, sizeof r->err, "posix_spawn %s: %s", cli, strerror(rc));
        r->out[0] = '\0';
        return;
    }
    int ws;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {}
    r->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    slurp(err_path, r->err, sizeof r->err);
    slurp(out_path, r->out, sizeof r->out);
}


/* ---- case directories ------------------------------------------------------------------- */

char *path_in(const char *dir, const char *name)
{
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

void save_or_die(const char *path, npy_dtype dtype, int ndim, const int64_t *shape, const void *data)
{
    char err[320];
    if (npy_save(path, dtype, ndim, shape, data, err, sizeof err)) {
        fprintf(stderr, "cannot write %s: %s\n", path, err);
        exit(1);
    }
}

void value_shape(const msda_problem *p, int64_t s[4])
{
    const int blnc = p->value_layout == MSDA_VALUE_BLNC;
    s[0] = p->batch; s[1] = blnc ? p->value_length : p->num_heads;
    s[2] = blnc ? p->num_heads : p->value_length; s[3] = p->channels;
}

void locations_shape(const msda_problem *p, int64_t s[6])
{
    const int bq = p->locations_layout == MSDA_LOCATIONS_BQHLP2;
    const int64_t q = p->num_queries, h = p->num_heads, l = p->num_levels, pt = p->num_points;
    s[0] = p->batch; s[1] = bq ? q : 2; s[2] = bq ? h : q; s[3] = bq ? l : h; s[4] = bq ? pt : l; s[5] = bq ? 2 : pt;
}

void weights_shape(const msda_problem *p, int64_t s[5])
{
    s[0] = p->batch; s[1] = p->num_queries; s[2] = p->num_heads; s[3] = p->num_levels; s[4] = p->num_points;
}

/* Writes the case's inputs; the shape files as int32 when ints32. */
void write_case(const char *dir, const tu_case *tc, int ints32)
{
    mkdir(dir, 0777);
    const msda_problem *p = &tc->p;
    int64_t vs[4], ls[6], ws[5];
    value_shape(p, vs);
    locations_shape(p, ls);
    weights_shape(p, ws);
    const int64_t go[3] = {p->batch, p->num_queries, p->num_heads * p->channels};
    const int64_t ss[2] = {p->num_levels, 2}, starts = p->num_levels;
    save_or_die(path_in(dir, "value.npy"), NPY_F4, 4, vs, tc->value);
    save_or_die(path_in(dir, "sampling_locations.npy"), NPY_F4, 6, ls, tc->sampling_locations);
    save_or_die(path_in(dir, "attention_weights.npy"), NPY_F4, 5, ws, tc->attention_weights);
    save_or_die(path_in(dir, "grad_output.npy"), NPY_F4, 3, go, tc->grad_output);
    if (ints32) {
        int32_t s32[2 * TU_MAX_LEVELS], l32[TU_MAX_LEVELS];
        for (int64_t i = 0; i < p->num_levels; i++) {
            s32[2 * i] = (int32_t)tc->spatial_shapes[2 * i];
            s32[2 * i + 1] = (int32_t)tc->spatial_shapes[2 * i + 1];
            l32[i] = (int32_t)tc->level_start_index[i];
        }
        save_or_die(path_in(dir, "spatial_shapes.npy"), NPY_I4, 2, ss, s32);
        save_or_die(path_in(dir, "level_start_index.npy"), NPY_I4, 1, &starts, l32);
    } else {
        save_or_die(path_in(dir, "spatial_shapes.npy"), NPY_I8, 2, ss, tc->spatial_shapes);
        save_or_die(path_in(dir, "level_start_index.npy"), NPY_I8, 1, &starts, tc->level_start_index);
    }
}

/* Loads DIR/name as <f4, checks its shape, compares with ref. */
void check_output(const char *dir, const char *name, int ndim, const int64_t *shape, const double *ref,
                         int64_t n, const char *ctx)
{
    npy_array a;
    float *got = NULL;
    char err[320];
    if (!tu_check(npy_load_f32(path_in(dir, name), &a, &got, NULL, err, sizeof err) == 0, "%s: %s [%s]", name, err, ctx))
        return;
    int same = a.ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = a.shape[i] == shape[i];
    char sh[128], want[128];
    if (tu_check(same && a.count == n, "%s: shape %s, expected %s [%s]", name, npy_format_shape(a.ndim, a.shape, sh, sizeof sh),
                 npy_format_shape(ndim, shape, want, sizeof want), ctx))
        tu_compare_f(name, ctx, got, ref, n, TU_TOL_F32);
    free(got);
}

/* Names of the entries of dir (excluding . and ..), comma separated; "" when empty or absent. */
const char *listing(const char *dir)
{
    static char buf[1024];
    buf[0] = '\0';
    DIR *d = opendir(dir);
    if (!d) return buf;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (buf[0]) strncat(buf, ",", sizeof buf - strlen(buf) - 1);
        strncat(buf, e->d_name, sizeof buf - strlen(buf) - 1);
    }
    closedir(d);
    return buf;
}

int cli_start(const char *test)
{
    const char *env = getenv("MSDA_CLI");
    if (env && *env) cli = env;
    if (access(cli, X_OK) != 0) {
        fprintf(stderr, "%s: %s is not an executable (build it with make native): %s\n", test, cli, strerror(errno));
        printf("0 passed, 1 failed\n");
        return -1;
    }
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return -1;
    }
    return 0;
}

void cli_finish(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
}
