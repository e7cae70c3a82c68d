/* The native CLI's outputs (see outputs.h). */
#define _POSIX_C_SOURCE 200809L
#include "outputs.h"
#include "args.h"
#include "messages.h"
#include "npy.h"
#include "texts.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The private directory the outputs are written into (its name checked by prepare_out). */
static char staging_dir[4096];

int prepare_out(const char *dir)
{
    /* The private directory's name must fit (checked here, before computing, not after). */
    size_t d = strlen(dir);
    if (d + (dir[d - 1] == '/' ? 0 : 1) + strlen(".msda-XXXXXX") >= sizeof staging_dir)
        return report(EXIT_BAD_INPUT, TEXT_OUT_PATH_TOO_LONG, dir);
    char *p = strdup(dir);
    if (!p) return report(EXIT_OTHER, TEXT_OUT_OF_MEMORY);
    for (char *s = p + 1; ; s++) {
        if (*s == '/' || *s == '\0') {
            char keep = *s;
            *s = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                int e = errno;
                int code = report(EXIT_BAD_INPUT, TEXT_OUT_CANNOT_CREATE_DIR, dir, p, strerror(e));
                free(p);
                return code;
            }
            *s = keep;
            if (!keep) break;
        }
    }
    free(p);
    struct stat st;
    if (stat(dir, &st) != 0) return report(EXIT_BAD_INPUT, TEXT_OUT_SAYS, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return report(EXIT_BAD_INPUT, TEXT_OUT_NOT_DIRECTORY, dir);
    if (access(dir, W_OK | X_OK) != 0) return report(EXIT_BAD_INPUT, TEXT_OUT_NOT_WRITABLE, dir, strerror(errno));
    return 0;
}


enum { MAX_OUTPUTS = 3 };
const char *const FORWARD_OUTPUTS[1] = {"output.npy"};
const char *const BACKWARD_OUTPUTS[3] = {"grad_value.npy", "grad_sampling_locations.npy", "grad_attention_weights.npy"};

/* A destination must be absent or something rename() replaces (a file, a symlink: the link
 * itself, never its target); a directory cannot be. Checked before computing (exit 2) and
 * again before the first rename (exit 1: the directory changed meanwhile). */
int check_destinations(const char *dir, const char *const *names, int n, int code)
{
    for (int i = 0; i < n; i++) {
        char *p = join(dir, names[i]);
        if (!p) return report(EXIT_OTHER, TEXT_OUT_OF_MEMORY);
        struct stat st;
        int rc = 0;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            rc = report(code, TEXT_OUT_IS_DIRECTORY, dir, p);
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

/* One output in out_dtype: float32 as it is; float16 as '<f2' bits; bfloat16 as the float32
 * values of the bfloat16 numbers nearest (NumPy has no bfloat16: float32 holds them exactly). */
static int write_one(int fd, const output_file *f, int out_dtype, char *err, size_t errlen)
{
    if (out_dtype == DTYPE_FLOAT32) return npy_write_fd(fd, NPY_F4, f->ndim, f->shape, f->data, err, errlen);
    int64_t count = 1;
    for (int i = 0; i < f->ndim; i++) count *= f->shape[i];
    void *buf = malloc((size_t)(count ? count : 1) * (out_dtype == DTYPE_FLOAT16 ? 2 : 4));
    if (!buf) {
        snprintf(err, errlen, TEXT_OUT_OF_MEMORY_ELEMENTS, (long long)count);
        return -1;
    }
    for (int64_t i = 0; i < count; i++) {
        uint32_t u;
        memcpy(&u, &f->data[i], 4);
        if (out_dtype == DTYPE_FLOAT16) {
            ((uint16_t *)buf)[i] = npy_f32_to_f16(u);
        } else {
            u = npy_bf16_to_f32(npy_f32_to_bf16(u));
            memcpy((uint32_t *)buf + i, &u, 4);
        }
    }
    int rc = npy_write_fd(fd, out_dtype == DTYPE_FLOAT16 ? NPY_F2 : NPY_F4, f->ndim, f->shape, buf, err, errlen);
    free(buf);
    return rc;
}

/* Writes the outputs into a fresh private directory inside dir (mkdtemp: random name, mode
 * 0700, created exclusively), each file created with O_EXCL | O_NOFOLLOW, so nothing planted
 * in dir can redirect a write. Once all are complete and every destination is still
 * replaceable, renames them into place one by one. On any failure or signal the private
 * directory is removed and no older output has changed (unless dir changes under us between
 * the check and the renames: then the error names what this run already replaced). */
int write_outputs(const char *dir, const output_file *files, int n, int out_dtype)
{
    int code = 0, renamed = 0;
    char *final[MAX_OUTPUTS] = {0};
    const char *names[MAX_OUTPUTS];
    for (int i = 0; i < n; i++) {
        names[i] = files[i].name;
        final[i] = join(dir, files[i].name);
        if (!final[i]) code = report(EXIT_OTHER, TEXT_OUT_OF_MEMORY);
    }
    int len = snprintf(staging_dir, sizeof staging_dir, dir[strlen(dir) - 1] == '/' ? "%s.msda-XXXXXX" : "%s/.msda-XXXXXX", dir);
    if (!code && (len < 0 || (size_t)len >= sizeof staging_dir))
        code = report(EXIT_BAD_INPUT, TEXT_OUT_PATH_TOO_LONG, dir);
    if (code) goto done;

    install_signal_cleanup();
    block_signals(SIG_BLOCK);
    if (!mkdtemp(staging_dir)) {
        int e = errno;
        block_signals(SIG_UNBLOCK);
        code = report(EXIT_OTHER, TEXT_OUT_NO_PRIVATE_DIR, dir, strerror(e));
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
            code = report(EXIT_OTHER, TEXT_CANNOT_CREATE, final[i], strerror(errno));
            break;
        }
        if (write_one(fd, &files[i], out_dtype, err, sizeof err))
            code = report(EXIT_OTHER, TEXT_FILE_SAYS, final[i], err);
        if (close(fd) != 0 && !code) code = report(EXIT_OTHER, TEXT_WRITE_ERROR, final[i], strerror(errno));
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
            code = report(EXIT_OTHER, TEXT_CANNOT_RENAME_AFTER,
                          final[i], strerror(e), done_list);
        else
            code = report(EXIT_OTHER, TEXT_CANNOT_RENAME, final[i], strerror(e));
    }
    remove_staging();
    staging_armed = 0;
    block_signals(SIG_UNBLOCK);
done:
    for (int i = 0; i < n; i++) free(final[i]);
    return code;
}
