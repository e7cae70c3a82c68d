/* libFuzzer target: the .npz reader (src/cli/npz.c, its inflate included) on arbitrary bytes.
 *
 * Beyond "no crash, no leak, no read outside the archive" (ASan, UBSan, LeakSanitizer) it checks
 * what the CLI relies on: a refusal is one non-empty line; every member of an accepted archive
 * lies inside it; reading a member gives exactly the size the directory says, or a one-line
 * refusal; and a stored member's bytes are the archive's own. */
#define _POSIX_C_SOURCE 200809L
#include "npz.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_npz: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

static void check_message(const char *err)
{
    if (!err[0]) die("empty error message", NULL);
    if (strchr(err, '\n')) die("error message spans lines", err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *bytes = malloc(size ? size : 1); /* exact size: ASan flags any read past the end */
    if (!bytes) abort();
    if (size) memcpy(bytes, data, size);
    npz z;
    char err[512];
    if (npz_parse(bytes, size, &z, err, sizeof err) != 0) {
        check_message(err);
    } else {
        for (int k = 0; k < z.count; k++) {
            const npz_member *m = &z.members[k];
            if (m->start > size || m->csize > size - m->start) die("a member outside the archive", m->name);
            if (npz_find(&z, m->name) != m) die("npz_find misses a member", m->name);
            unsigned char *out = NULL;
            size_t len = 0;
            int io_error = 0;
            if (m->usize > (1u << 24)) continue; /* past the fuzzer's memory: the size check alone is tested */
            if (npz_read(&z, m, &out, &len, &io_error, err, sizeof err) == 0) {
                if (len != m->usize) die("a member read to another size than the directory says", m->name);
                if (!m->deflated && memcmp(out, bytes + m->start, len) != 0) die("a stored member read differently", m->name);
                free(out);
            } else {
                if (out) die("npz_read failed but returned data", m->name);
                check_message(err);
            }
        }
        npz_free(&z);
    }
    /* inflate alone, into a small buffer: never writes past it */
    unsigned char small[64];
    long long n = npz_inflate(bytes, size, small, sizeof small);
    if (n != -1 && n != -2 && (n < 0 || n > (long long)sizeof small)) die("npz_inflate returned an impossible size", NULL);
    free(bytes);
    return 0;
}
