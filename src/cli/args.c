/* The native CLI's arguments (see args.h). */
#include "args.h"
#include "messages.h"
#include "options.h"
#include "texts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Decimal digits only (strtol alone would take " 3" and "+3"). */
static int parse_threads(const char *s, int *out)
{
    long v = 0;
    if (!*s) return -1;
    for (const char *c = s; *c; c++) {
        if (*c < '0' || *c > '9') return -1;
        v = v * 10 + (*c - '0');
        if (v > 4096) return -1;
    }
    if (v < 1) return -1;
    *out = (int)v;
    return 0;
}

/* A plain non-negative decimal number, as the JS CLI takes it: digits with an optional point
 * (or a point and digits) and an optional exponent; finite. */
static int parse_tolerance(const char *s, double *out)
{
    const char *c = s;
    int before = 0, after = 0;
    while (*c >= '0' && *c <= '9') { c++; before++; }
    if (*c == '.') {
        c++;
        while (*c >= '0' && *c <= '9') { c++; after++; }
    }
    if (!before && !after) return -1;
    if (!before && *s != '.') return -1;
    if (*c == 'e' || *c == 'E') {
        c++;
        if (*c == '+' || *c == '-') c++;
        if (!(*c >= '0' && *c <= '9')) return -1;
        while (*c >= '0' && *c <= '9') c++;
    }
    if (*c) return -1;
    *out = strtod(s, NULL);
    return isfinite(*out) ? 0 : -1;
}

int is_one_of(const char *name, const char *const *list)
{
    for (; *list; list++)
        if (!strcmp(name, *list)) return 1;
    return 0;
}

/* The flags besides the problem's options (src/options.h: each option's flag takes one of its
 * words, or none for a switch, whose words are "0" and "1"). */
static const char *const VALUE_FLAGS[] = {"--in", "--out", "--threads", "--expect", "--dtype", "--rtol", "--atol", "--top",
                                          "--backend", "--out-dtype", NULL};
static const char *const CROSSCHECK_FLAGS[] = {"--expect", "--dtype", "--rtol", "--atol", "--top", "--json", NULL};
static const char *const EXPECT_FLAGS[] = {"--dtype", "--rtol", "--atol", "--top", "--json", NULL};
static const char *const ALL_FLAGS[] = {"--in", "--out", "--threads", "--expect", "--dtype", "--rtol", "--atol", "--top",
                                        "--backend", "--json", "--out-dtype", NULL};
#define ALL_FLAGS_COUNT ((int)(sizeof ALL_FLAGS / sizeof ALL_FLAGS[0]) - 1)

/* The bytes of s's first n characters (UTF-8 code points: bytes that do not continue one). */
static size_t utf8_prefix(const char *s, size_t len, size_t n)
{
    size_t i = 0;
    for (size_t chars = 0; i < len; i++)
        if (((unsigned char)s[i] & 0xc0) != 0x80 && chars++ == n) break;
    return i;
}

/* The option whose flag is name, or -1. */
static int option_of(const char *name)
{
    for (int id = 0; id < MSDA_OPTION_COUNT; id++)
        if (!strcmp(msda_options[id].flag, name)) return id;
    return -1;
}

static int is_switch(int id) { return !strcmp(msda_options[id].words[0], "0"); }

/* Where seen[] counts a flag: ALL_FLAGS', then the options' */
static int flag_index(const char *name)
{
    for (int k = 0; ALL_FLAGS[k]; k++)
        if (!strcmp(ALL_FLAGS[k], name)) return k;
    return ALL_FLAGS_COUNT + option_of(name);
}

/* Option id's value named by word: 0 and the value, or a BAD_CHOICE report ("zeros or border"). */
static int parse_choice(int id, const char *name, const char *word, int *value)
{
    const msda_option_info *opt = &msda_options[id];
    char choices[128];
    int n = 0;
    for (int i = 0; i < opt->count; i++) {
        if (!strcmp(word, opt->words[i])) return *value = i, 0;
        if (n < (int)sizeof choices)
            n += snprintf(choices + n, sizeof choices - (size_t)n, "%s%s",
                          i == 0 ? "" : i == opt->count - 1 ? " or " : ", ", opt->words[i]);
    }
    return report(EXIT_BAD_INPUT, TEXT_BAD_CHOICE, name, word, choices);
}

int parse_args(int argc, char **argv, options *o)
{
    msda_problem_init(&o->problem);
    o->in = o->out = o->expect = o->backend = NULL;
    o->crosscheck = o->help = o->version = 0;
    o->dtype = DTYPE_NO_DTYPE;
    o->have_rtol = o->have_atol = o->json = 0;
    o->rtol = o->atol = 0;
    o->top = 5;
    o->out_dtype = DTYPE_FLOAT32;
    if (argc < 2) return report(EXIT_BAD_INPUT, TEXT_MISSING_COMMAND);
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) return o->help = 1, -1;
    if (!strcmp(cmd, "--version")) return o->version = 1, -1;
    if (!strcmp(cmd, "forward")) o->backward = 0;
    else if (!strcmp(cmd, "backward")) o->backward = 1;
    else if (!strcmp(cmd, "crosscheck")) o->crosscheck = 1;
    else return report(EXIT_BAD_INPUT, TEXT_UNKNOWN_COMMAND, cmd);

    /* the flags seen, for "given more than once" and the checks after the loop */
    int seen[ALL_FLAGS_COUNT + MSDA_OPTION_COUNT] = {0};
    for (int i = 2; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) return o->help = 1, -1;
        if (!strcmp(arg, "--version")) return o->version = 1, -1;
        if (strncmp(arg, "--", 2) != 0)
            return report(EXIT_BAD_INPUT, TEXT_UNEXPECTED_ARGUMENT, arg);
        /* --flag VALUE or --flag=VALUE; a name of 64 characters or more is no flag, named by its
         * first 40 (characters, as the JS CLI counts them, never bytes) */
        char name[64 * 4];
        const char *eq = strchr(arg, '='), *value = NULL;
        size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
        if (utf8_prefix(arg, n, 63) < n || n >= sizeof name) { /* the second: only bytes that are no UTF-8 */
            const size_t cut = utf8_prefix(arg, n, 40);
            char *shown40 = malloc(cut + 1);
            if (!shown40) return report(EXIT_OTHER, TEXT_OUT_OF_MEMORY);
            memcpy(shown40, arg, cut);
            shown40[cut] = '\0';
            report(EXIT_BAD_INPUT, TEXT_UNKNOWN_LONG_OPTION, shown40);
            free(shown40);
            return EXIT_BAD_INPUT;
        }
        memcpy(name, arg, n);
        name[n] = '\0';
        /* --backend is the JS CLI's; the native one takes it only where it is a no-op (crosscheck --expect) */
        const int option = option_of(name);
        int takes_value = (is_one_of(name, VALUE_FLAGS) && (o->crosscheck || strcmp(name, "--backend") != 0)) ||
                          (option >= 0 && !is_switch(option));
        if (!takes_value && !(option >= 0 && is_switch(option)) && strcmp(name, "--json") != 0)
            return report(EXIT_BAD_INPUT, TEXT_UNKNOWN_OPTION, name);
        if (takes_value) {
            if (eq) value = eq + 1;
            else if (i + 1 < argc) value = argv[++i];
            else return report(EXIT_BAD_INPUT, TEXT_NEEDS_VALUE, name);
        } else if (eq) {
            return report(EXIT_BAD_INPUT, TEXT_TAKES_NO_VALUE, name, eq + 1);
        }
        if (o->crosscheck && !strcmp(name, "--out-dtype"))
            return report(EXIT_BAD_INPUT, TEXT_OUT_DTYPE_IN_CROSSCHECK);
        if (o->crosscheck && !strcmp(name, "--out"))
            return report(EXIT_BAD_INPUT, TEXT_OUT_IN_CROSSCHECK);
        if (!o->crosscheck && is_one_of(name, CROSSCHECK_FLAGS))
            return report(EXIT_BAD_INPUT, TEXT_ONLY_FOR_CROSSCHECK, name);
        if (!strcmp(name, "--in") || !strcmp(name, "--out") || !strcmp(name, "--expect")) {
            if (!*value) return report(EXIT_BAD_INPUT, TEXT_EMPTY_PATH, name);
            if (!strcmp(name, "--in")) o->in = value;
            else if (!strcmp(name, "--out")) o->out = value;
            else o->expect = value;
        } else if (option >= 0) {
            int v = 1;   /* a switch given: its "1" */
            if (!is_switch(option) && parse_choice(option, name, value, &v)) return EXIT_BAD_INPUT;
            msda_option_set(&o->problem, option, v);
        } else if (!strcmp(name, "--backend")) {
            if (strcmp(value, "wasm") && strcmp(value, "wasm-scalar") && strcmp(value, "native"))
                return report(EXIT_BAD_INPUT, TEXT_BAD_CHOICE, name, value, "wasm, wasm-scalar or native");
            o->backend = value;
        } else if (!strcmp(name, "--out-dtype")) {
            if (!strcmp(value, "float32")) o->out_dtype = DTYPE_FLOAT32;
            else if (!strcmp(value, "float16")) o->out_dtype = DTYPE_FLOAT16;
            else if (!strcmp(value, "bfloat16")) o->out_dtype = DTYPE_BFLOAT16;
            else return report(EXIT_BAD_INPUT, TEXT_BAD_CHOICE, name, value, "float32, float16 or bfloat16");
        } else if (!strcmp(name, "--dtype")) {
            if (!strcmp(value, "float32")) o->dtype = DTYPE_FLOAT32;
            else if (!strcmp(value, "float16")) o->dtype = DTYPE_FLOAT16;
            else if (!strcmp(value, "bfloat16")) o->dtype = DTYPE_BFLOAT16;
            else return report(EXIT_BAD_INPUT, TEXT_BAD_CHOICE, name, value, "float32, float16 or bfloat16");
        } else if (!strcmp(name, "--rtol") || !strcmp(name, "--atol")) {
            double v;
            if (parse_tolerance(value, &v))
                return report(EXIT_BAD_INPUT, TEXT_BAD_TOLERANCE, name, value);
            if (name[2] == 'r') { o->rtol = v; o->have_rtol = 1; }
            else { o->atol = v; o->have_atol = 1; }
        } else if (!strcmp(name, "--top")) {
            const char *digits = value;
            size_t len = strlen(value), k;
            for (k = 0; k < len && value[k] >= '0' && value[k] <= '9'; k++) {}
            while (len > 1 && *digits == '0') { digits++; len--; } /* leading zeros: the same number */
            if (!*value || value[k] || len > 4 || atoi(digits) > 1000)
                return report(EXIT_BAD_INPUT, TEXT_BAD_TOP, value);
            o->top = atoi(digits);
        } else if (!strcmp(name, "--json")) {
            o->json = 1;
        } else if (!strcmp(name, "--threads")) {
            if (parse_threads(value, &o->problem.threads))
                return report(EXIT_BAD_INPUT, TEXT_BAD_THREADS, value);
        }
        if (seen[flag_index(name)]++) return report(EXIT_BAD_INPUT, TEXT_GIVEN_TWICE, name);
    }
    if (!o->in) return report(EXIT_BAD_INPUT, TEXT_MISSING_IN);
    if (!o->crosscheck && !o->out) return report(EXIT_BAD_INPUT, TEXT_MISSING_OUT);
    if (o->crosscheck && !o->expect)
        for (const char *const *f = EXPECT_FLAGS; *f; f++)
            if (seen[flag_index(*f)])
                return report(EXIT_BAD_INPUT, TEXT_NEEDS_EXPECT, *f);
    if (o->dtype != DTYPE_NO_DTYPE && (o->have_rtol || o->have_atol))
        return report(EXIT_BAD_INPUT, TEXT_TWO_TOLERANCES, o->have_rtol ? "--rtol" : "--atol");
    if (o->crosscheck && !o->expect)
        return report(EXIT_BAD_INPUT, TEXT_CROSSCHECK_IS_JS);
    return 0;
}
