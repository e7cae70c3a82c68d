/* JavaScript's number printing, for the report crosscheck.c prints (numbers.h). */
#include "numbers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Math.max: NaN wins. */
double js_max(double a, double b)
{
    if (isnan(a) || isnan(b)) return NAN;
    return a > b ? a : b;
}

const char *js_number(double x, char *buf)
{
    if (isnan(x)) return strcpy(buf, "NaN");
    if (isinf(x)) return strcpy(buf, x > 0 ? "Infinity" : "-Infinity");
    if (x == 0) return strcpy(buf, "0");
    char e[40], digits[20];
    int k = 0, exp10 = 0;
    /* The shortest digits that read back as x: at each length the nearest, or else a neighbour
     * of it in the last digit (the nearest can miss next to a power of two, where the spacing
     * of doubles changes). */
    for (int p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, fabs(x));
        k = 0;
        for (const char *c = e; *c && *c != 'e'; c++)
            if (*c >= '0' && *c <= '9') digits[k++] = *c;
        digits[k] = '\0';
        exp10 = atoi(strchr(e, 'e') + 1);
        int found = 0;
        for (int delta = 0; delta <= 2 && !found; delta++) {
            char cand[20], text[48];
            int ce = exp10;
            memcpy(cand, digits, (size_t)k + 1);
            if (delta) { /* +1 then -1 in the last digit, with carries */
                int i = k - 1;
                if (delta == 1) {
                    while (i >= 0 && cand[i] == '9') cand[i--] = '0';
                    if (i < 0) { memmove(cand + 1, cand, (size_t)k); cand[0] = '1'; cand[k] = '\0'; ce++; }
                    else cand[i]++;
                } else {
                    while (i >= 0 && cand[i] == '0') cand[i--] = '9';
                    if (i < 0 || (i == 0 && cand[0] == '1' && k == 1)) continue;
                    cand[i]--;
                    if (cand[0] == '0') continue;
                }
            }
            snprintf(text, sizeof text, "%c.%se%d", cand[0], cand + 1, ce);
            if (strtod(text, NULL) == fabs(x)) {
                memcpy(digits, cand, strlen(cand) + 1);
                exp10 = ce;
                found = 1;
            }
        }
        if (found) break;
    }
    k = (int)strlen(digits);
    while (k > 1 && digits[k - 1] == '0') digits[--k] = '\0'; /* 1.0e5: the digits are "1" */
    int n = exp10 + 1; /* where the decimal point goes */
    char *o = buf;
    if (x < 0) *o++ = '-';
    if (k <= n && n <= 21) {
        o += sprintf(o, "%s", digits);
        for (int i = k; i < n; i++) *o++ = '0';
        *o = '\0';
    } else if (0 < n && n <= 21) {
        sprintf(o, "%.*s.%s", n, digits, digits + n);
    } else if (-6 < n && n <= 0) {
        o += sprintf(o, "0.");
        for (int i = 0; i < -n; i++) *o++ = '0';
        sprintf(o, "%s", digits);
    } else {
        if (k == 1) sprintf(o, "%se%c%d", digits, n - 1 >= 0 ? '+' : '-', abs(n - 1));
        else sprintf(o, "%c.%se%c%d", digits[0], digits + 1, n - 1 >= 0 ? '+' : '-', abs(n - 1));
    }
    return buf;
}

/* |x| rounded to p significant digits, ties away from zero (toPrecision / toExponential):
 * the digits into d (p of them) and the decimal exponent of the first. */
static int round_digits(double x, int p, char *d)
{
    char e[128];
    snprintf(e, sizeof e, "%.80e", fabs(x)); /* the exact expansion, far enough for ties */
    char all[100];
    int k = 0;
    for (const char *c = e; *c && *c != 'e'; c++)
        if (*c >= '0' && *c <= '9') all[k++] = *c;
    int exp10 = atoi(strchr(e, 'e') + 1);
    int up = all[p] > '5';
    if (all[p] == '5') {
        up = 1; /* a tie or above: away from zero */
    }
    memcpy(d, all, (size_t)p);
    d[p] = '\0';
    if (up) {
        int i = p - 1;
        while (i >= 0 && d[i] == '9') d[i--] = '0';
        if (i >= 0) d[i]++;
        else {
            memmove(d + 1, d, (size_t)p);
            d[0] = '1';
            d[p] = '\0';
            exp10++;
        }
    }
    return exp10;
}

/* fmt: '0' for zero, else x.toExponential(2). */
const char *js_fmt(double x, char *buf)
{
    if (x == 0) return strcpy(buf, "0");
    if (!isfinite(x)) return js_number(x, buf);
    char d[24];
    int e = round_digits(x, 3, d);
    sprintf(buf, "%s%c.%se%c%d", x < 0 ? "-" : "", d[0], d + 1, e >= 0 ? '+' : '-', abs(e));
    return buf;
}

/* String(Number(x.toPrecision(p))) */
static const char *js_precision(double x, int p, char *buf)
{
    if (!isfinite(x) || x == 0) return js_number(x, buf);
    char d[24], text[64];
    int e = round_digits(x, p, d);
    snprintf(text, sizeof text, "%s%c.%se%d", x < 0 ? "-" : "", d[0], d + 1, e);
    return js_number(strtod(text, NULL), buf);
}

/* Numbers as short as tell two apart (bindings/cli/numbers.js pair). */
void js_pair(double a, double b, char *x, char *y)
{
    for (int digits = 6; digits < 17; digits++) {
        js_precision(a, digits, x);
        js_precision(b, digits, y);
        if (strcmp(x, y) != 0 || digits == 16) return;
    }
}

void json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"') fputs("\\\"", out);
        else if (*c == '\\') fputs("\\\\", out);
        else if (*c == '\b') fputs("\\b", out);
        else if (*c == '\f') fputs("\\f", out);
        else if (*c == '\n') fputs("\\n", out);
        else if (*c == '\r') fputs("\\r", out);
        else if (*c == '\t') fputs("\\t", out);
        else if (*c < 0x20) fprintf(out, "\\u%04x", *c);
        else fputc(*c, out);
    }
    fputc('"', out);
}

/* jsonNumber: a finite number as itself, else its name as a string. */
void json_number(FILE *out, double x)
{
    char b[40];
    js_number(x, b);
    if (isfinite(x)) fputs(b, out);
    else fprintf(out, "\"%s\"", b);
}
