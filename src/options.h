/* The problem's options, declared once for C: bindings/core/options.js is the same table for JS,
 * and tests/js/options.test.js holds the two (and msda.h's enums, the problem description's slots,
 * the typings, both CLIs' help, the WGSL) together. Validation (entry.c), the problem description
 * (bindings/c/problem_desc.h), the native CLI's flags (src/cli/args.c) and the C tests' option
 * combinations (tests/c/testutil.c) loop over it. docs/internals.md, "Adding an option", lists
 * the files a new option or value touches.
 *
 *   X(ID, field, type, flag, (constants...), (words...))
 * ID: MSDA_OPTION_<ID> here and MSDA_DESC_<ID> in the problem description; field: msda_problem's;
 * type: its C type; flag: the CLIs'; constants: the value's C names, in order (value i is i;
 * messages name them); words: what the CLIs and the JS API call them ("0" / "1" for a switch). */
#ifndef MSDA_OPTIONS_H
#define MSDA_OPTIONS_H

#include "msda.h"

#define MSDA_OPTIONS(X)                                                                                           \
    X(VALUE_LAYOUT, value_layout, msda_value_layout, "--value-layout", ("MSDA_VALUE_BLNC", "MSDA_VALUE_BNLC"),     \
      ("BLNC", "BNLC"))                                                                                           \
    X(LOCATIONS_LAYOUT, locations_layout, msda_locations_layout, "--sampling-locations-layout",                  \
      ("MSDA_LOCATIONS_BQHLP2", "MSDA_LOCATIONS_B2QHLP"), ("BQHLP2", "B2QHLP"))                                   \
    X(ALIGN_CORNERS, align_corners, int, "--align-corners", ("0", "1"), ("0", "1"))                               \
    X(PADDING, padding, msda_padding, "--padding-mode", ("MSDA_PADDING_ZEROS", "MSDA_PADDING_BORDER"),             \
      ("zeros", "border"))

#define MSDA_OPTION_MAX_VALUES 8
#define MSDA_OPTION_UNPAREN(...) __VA_ARGS__
#define MSDA_OPTION_COUNT_OF(list) ((int)(sizeof((const char *[]){MSDA_OPTION_UNPAREN list}) / sizeof(const char *)))

enum msda_option_id {
#define MSDA_OPTION_ID(ID, field, type, flag, constants, words) MSDA_OPTION_##ID,
    MSDA_OPTIONS(MSDA_OPTION_ID)
#undef MSDA_OPTION_ID
    MSDA_OPTION_COUNT
};

typedef struct msda_option_info {
    const char *field;                                  /* msda_problem's, as messages name it */
    const char *flag;                                   /* the CLIs' */
    int count;                                          /* its values are 0 .. count - 1 */
    const char *constants[MSDA_OPTION_MAX_VALUES];      /* value i's C name */
    const char *words[MSDA_OPTION_MAX_VALUES];          /* value i's word */
} msda_option_info;

static const msda_option_info msda_options[MSDA_OPTION_COUNT] = {
#define MSDA_OPTION_INFO(ID, field, type, flag, constants, words) \
    {#field, flag, MSDA_OPTION_COUNT_OF(constants), {MSDA_OPTION_UNPAREN constants}, {MSDA_OPTION_UNPAREN words}},
    MSDA_OPTIONS(MSDA_OPTION_INFO)
#undef MSDA_OPTION_INFO
};

/* Option `id` of a problem, as an int (an enum outside its values too). */
static inline int msda_option_get(const msda_problem *p, int id)
{
    switch (id) {
#define MSDA_OPTION_GET(ID, field, type, flag, constants, words) \
    case MSDA_OPTION_##ID: return (int)p->field;
        MSDA_OPTIONS(MSDA_OPTION_GET)
#undef MSDA_OPTION_GET
    }
    return -1;
}

/* Sets option `id` of a problem to `value` (validation refuses one outside 0 .. count - 1). */
static inline void msda_option_set(msda_problem *p, int id, int value)
{
    switch (id) {
#define MSDA_OPTION_SET(ID, field, type, flag, constants, words) \
    case MSDA_OPTION_##ID: p->field = (type)value; break;
        MSDA_OPTIONS(MSDA_OPTION_SET)
#undef MSDA_OPTION_SET
    }
}

#endif
