/* The problem description shared by the wasm glue and the Node addon: one flat int64 array
 * that JS fills (a BigInt64Array), so neither side depends on the C struct's layout.
 *
 *   [0..6]  batch, num_queries, num_heads, channels, num_levels, num_points, value_length
 *   [7..12] value_layout, locations_layout, align_corners, padding, threads, value_dtype
 *   [13 ..] spatial_shapes (2 * num_levels: H, W), then level_start_index (num_levels)
 *
 * `count` is the number of int64 entries JS wrote; a description whose length does not match
 * its num_levels is rejected here, so the library never reads past it. */
#ifndef MSDA_PROBLEM_DESC_H
#define MSDA_PROBLEM_DESC_H

#include "msda.h"
#include "options.h"

#include <limits.h>
#include <string.h>

/* The slots of the header; bindings/core/problem.js's DESC names the same (a test compares). */
enum {
    MSDA_DESC_BATCH = 0,
    MSDA_DESC_NUM_QUERIES = 1,
    MSDA_DESC_NUM_HEADS = 2,
    MSDA_DESC_CHANNELS = 3,
    MSDA_DESC_NUM_LEVELS = 4,
    MSDA_DESC_NUM_POINTS = 5,
    MSDA_DESC_VALUE_LENGTH = 6,
    MSDA_DESC_VALUE_LAYOUT = 7,
    MSDA_DESC_LOCATIONS_LAYOUT = 8,
    MSDA_DESC_ALIGN_CORNERS = 9,
    MSDA_DESC_PADDING = 10,
    MSDA_DESC_THREADS = 11,
    MSDA_DESC_VALUE_DTYPE = 12,
    MSDA_DESC_HEADER = 13
};

static inline msda_status msda_desc_fail(msda_error *err, msda_status status, const char *message)
{
    err->status = status;
    strncpy(err->message, message, sizeof err->message - 1);
    err->message[sizeof err->message - 1] = '\0';
    return status;
}

static inline msda_status msda_problem_from_desc(const int64_t *desc, int64_t count, msda_problem *p,
                                                 msda_error *err)
{
    msda_problem_init(p);
    if (!desc || count < MSDA_DESC_HEADER)
        return msda_desc_fail(err, MSDA_ERR_INVALID_SIZE,
                              "problem description is shorter than its 13-entry header");
    const int64_t levels = desc[MSDA_DESC_NUM_LEVELS];
    if (levels < 1 || levels > (count - MSDA_DESC_HEADER) / 3 || count != MSDA_DESC_HEADER + 3 * levels)
        return msda_desc_fail(err, MSDA_ERR_SHAPE_MISMATCH,
                              "problem description length does not match num_levels "
                              "(expected 13 + 3 * num_levels entries)");
    p->batch = desc[MSDA_DESC_BATCH];
    p->num_queries = desc[MSDA_DESC_NUM_QUERIES];
    p->num_heads = desc[MSDA_DESC_NUM_HEADS];
    p->channels = desc[MSDA_DESC_CHANNELS];
    p->num_levels = desc[MSDA_DESC_NUM_LEVELS];
    p->num_points = desc[MSDA_DESC_NUM_POINTS];
    p->value_length = desc[MSDA_DESC_VALUE_LENGTH];
    /* Each option (src/options.h) from its slot, MSDA_DESC_<ID>. Out-of-range values become one
     * the library rejects with its own named error. */
    static const int option_slots[MSDA_OPTION_COUNT] = {
#define MSDA_DESC_OPTION_SLOT(ID, field, type, flag, constants, words) MSDA_DESC_##ID,
        MSDA_OPTIONS(MSDA_DESC_OPTION_SLOT)
#undef MSDA_DESC_OPTION_SLOT
    };
    for (int id = 0; id < MSDA_OPTION_COUNT; id++) {
        const int64_t v = desc[option_slots[id]];
        msda_option_set(p, id, v >= 0 && v < msda_options[id].count ? (int)v : 99);
    }
    const int64_t threads = desc[MSDA_DESC_THREADS], value_dtype = desc[MSDA_DESC_VALUE_DTYPE];
    p->threads = threads >= 1 && threads <= INT_MAX ? (int)threads : 0;
    p->value_dtype = (msda_dtype)(value_dtype >= 0 && value_dtype <= 2 ? value_dtype : 99);
    p->spatial_shapes = desc + MSDA_DESC_HEADER;
    p->level_start_index = desc + MSDA_DESC_HEADER + 2 * levels;
    return MSDA_OK;
}

#endif
