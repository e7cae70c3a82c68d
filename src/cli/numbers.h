/* Numbers as JavaScript prints them, so that the native CLI's report is the JS CLI's byte for
 * byte (bindings/cli/numbers.js is the other half; tests/c/test_cli.c holds them to
 * JavaScript's own output). */
#ifndef MSDA_CLI_NUMBERS_H
#define MSDA_CLI_NUMBERS_H

#include <stdio.h>

/* Math.max: NaN wins. */
double js_max(double a, double b);

/* Number.prototype.toString of x, into buf (at least 32 bytes). */
const char *js_number(double x, char *buf);

/* '0' for zero, else x.toExponential(2) (bindings/cli/numbers.js fmt), into buf (at least 32 bytes). */
const char *js_fmt(double x, char *buf);

/* a and b with as few significant digits (6 to 16) as tell them apart (numbers.js pair). */
void js_pair(double a, double b, char *x, char *y);

/* JSON.stringify of a string, and of a number (a non-finite one as its name, a string). */
void json_string(FILE *out, const char *s);
void json_number(FILE *out, double x);

#endif
