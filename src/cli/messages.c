/* How the native CLI speaks (see messages.h). */
#define _POSIX_C_SOURCE 200809L
#include "messages.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One line whatever the message holds: a newline in a path (a file or flag the message names)
 * becomes a space, as the JS CLI prints it. */
int report(int code, const char *fmt, ...)
{
    char small[1024], *msg = small;
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n >= (int)sizeof small) {
        char *big = malloc((size_t)n + 1);
        if (big) {
            vsnprintf(big, (size_t)n + 1, fmt, again);
            msg = big;
        } /* else: the message cut at 1023 bytes */
    }
    va_end(again);
    va_end(ap);
    if (n < 0) small[0] = '\0';
    for (char *c = msg; *c; c++)
        if (*c == '\n') *c = ' ';
    fprintf(stderr, "msda: %s\n", msg);
    if (msg != small) free(msg);
    return code;
}

void append(text *t, const char *fmt, ...)
{
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *grown = n < 0 || t->failed ? NULL : realloc(t->s, t->len + (size_t)n + 1);
    if (!grown) {
        t->failed = 1;
    } else {
        vsnprintf(grown + t->len, (size_t)n + 1, fmt, again);
        t->s = grown;
        t->len += (size_t)n;
    }
    va_end(again);
}

const char *shown(const char *name, char buf[SHOWN_MAX])
{
    size_t n = 0;
    for (const unsigned char *c = (const unsigned char *)name; *c && n <= 200; c++) {
        if (*c < 0x20 || *c >= 0x7f || *c == '\\') n += (size_t)sprintf(buf + n, "\\x%02x", *c);
        else buf[n++] = (char)*c;
    }
    if (n > 200) strcpy(buf + 200, "...");
    else buf[n] = '\0';
    return buf;
}

char *join(const char *dir, const char *name)
{
    size_t d = strlen(dir), n = strlen(name);
    int slash = d > 0 && dir[d - 1] == '/';
    char *p = malloc(d + n + 2);
    if (p) sprintf(p, slash ? "%s%s" : "%s/%s", dir, name);
    return p;
}
