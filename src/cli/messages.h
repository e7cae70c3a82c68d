/* How the native CLI speaks (bindings/cli/messages.js is the other half): its exit statuses, the
 * one "msda:" line on stderr, a message grown from the problems of several files, and paths
 * joined as the user wrote them. */
#ifndef MSDA_CLI_MESSAGES_H
#define MSDA_CLI_MESSAGES_H

#include <stddef.h>

enum { EXIT_OK = 0, EXIT_OTHER = 1, EXIT_BAD_INPUT = 2 };

#if defined(__GNUC__)
#define MSDA_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define MSDA_PRINTF(f, a)
#endif

/* Prints "msda: MESSAGE" on one line (a newline inside becomes a space); returns code. */
int report(int code, const char *fmt, ...) MSDA_PRINTF(2, 3);

/* A growing message: the problems of every file of a case, so that one run names them all. */
typedef struct text {
    char *s;
    size_t len;
    int failed; /* out of memory: what was appended so far is kept */
} text;

void append(text *t, const char *fmt, ...) MSDA_PRINTF(2, 3);

/* A file name as messages show it: bytes outside printable ASCII and backslashes as \\xNN, cut
 * to 200 characters and "..." (bindings/cli/messages.js shown). Returns buf. */
enum { SHOWN_MAX = 256 };
const char *shown(const char *name, char buf[SHOWN_MAX]);

/* dir/name, malloc'd, with no normalisation (messages name the path as the user wrote it). */
char *join(const char *dir, const char *name);

#endif
