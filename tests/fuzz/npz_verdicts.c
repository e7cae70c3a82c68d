/* The native .npz reader's verdicts in a batch, for tests/fuzz/npz_diff.js: reads archives from
 * stdin, each as a 4-byte little-endian length and its bytes, and prints one line per archive:
 * the directory's refusal, or each member's (in directory order) "ok" or refusal, ";"-separated.
 * One process for thousands of archives, so the JS reader can be compared with it cheaply. */
#define _POSIX_C_SOURCE 200809L
#include "npz.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    unsigned char head[4];
    while (fread(head, 1, 4, stdin) == 4) {
        const size_t size = (size_t)head[0] | (size_t)head[1] << 8 | (size_t)head[2] << 16 | (size_t)head[3] << 24;
        unsigned char *bytes = malloc(size ? size : 1);
        if (!bytes || fread(bytes, 1, size, stdin) != size) return 1;
        npz z;
        char err[512];
        if (npz_parse(bytes, size, &z, err, sizeof err) != 0) {
            printf("refused: %s\n", err);
        } else {
            for (int k = 0; k < z.count; k++) {
                unsigned char *out = NULL;
                size_t len = 0;
                int io_error = 0;
                if (npz_read(&z, &z.members[k], &out, &len, &io_error, err, sizeof err) == 0) printf("%sok", k ? "; " : "");
                else printf("%s%s", k ? "; " : "", err);
                free(out);
            }
            printf("\n");
            npz_free(&z);
        }
        free(bytes);
    }
    return 0;
}
