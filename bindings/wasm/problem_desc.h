/* The problem description shared by the wasm glue and the Node addon: one flat int64 array
 * that JS fills (a BigInt64Array), so neither side depends on the C struct's layout.
 *
 *   [0..6]  batch, num_queries, num_heads, channels, num_levels, num_points, value_length
 *   [7..11] value_layout, locations_layout, align_corners, padding, threads
 *   [12 ..] spatial_shapes (2 * num_levels: H, W), then level_start_index (num_levels)
 *
 * `count` is the number of int64 entries JS wrote; a description whose length does not match
 * its num_levels is rejected here, so the library never reads past it. */
#ifndef MSDA_PROBLEM_DESC_H
#define MSDA_PROBLEM_DESC_H

#include "msda.h"

#include <limits.h>
#include <string.h>

#define MSDA_DESC_HEADER 12

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
                              "problem description is shorter than its 12-entry header");
    const int64_t levels = desc[4];
    if (levels < 1 || levels > (count - MSDA_DESC_HEADER) / 3 || count != MSDA_DESC_HEADER + 3 * levels)
        return msda_desc_fail(err, MSDA_ERR_SHAPE_MISMATCH,
                              "problem description length does not match num_levels "
                              "(expected 12 + 3 * num_levels entries)");
    p->batch = desc[0];
    p->num_queries = desc[1];
    p->num_heads = desc[2];
    p->channels = desc[3];
    p->num_levels = desc[4];
    p->num_points = desc[5];
    p->value_length = desc[6];
    /* Out-of-range enums become a value the library rejects with its own named error. */
    p->value_layout = (msda_value_layout)(desc[7] == 0 || desc[7] == 1 ? desc[7] : 99);
    p->locations_layout = (msda_locations_layout)(desc[8] == 0 || desc[8] == 1 ? desc[8] : 99);
    p->align_corners = desc[9] == 0 || desc[9] == 1 ? (int)desc[9] : 99;
    p->padding = (msda_padding)(desc[10] == 0 || desc[10] == 1 ? desc[10] : 99);
    p->threads = desc[11] >= 1 && desc[11] <= INT_MAX ? (int)desc[11] : 0;
    p->spatial_shapes = desc + MSDA_DESC_HEADER;
    p->level_start_index = desc + MSDA_DESC_HEADER + 2 * levels;
    return MSDA_OK;
}

#endif
