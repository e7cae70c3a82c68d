/* Status names and the error setter: a leaf that validation, the kernels' dispatch and the
 * thread pool all report through. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>

const char *msda_status_string(msda_status status)
{
    switch (status) {
    case MSDA_OK: return "MSDA_OK";
    case MSDA_ERR_NULL_POINTER: return "MSDA_ERR_NULL_POINTER";
    case MSDA_ERR_INVALID_SIZE: return "MSDA_ERR_INVALID_SIZE";
    case MSDA_ERR_SHAPE_MISMATCH: return "MSDA_ERR_SHAPE_MISMATCH";
    case MSDA_ERR_INVALID_OPTION: return "MSDA_ERR_INVALID_OPTION";
    case MSDA_ERR_OVERFLOW: return "MSDA_ERR_OVERFLOW";
    case MSDA_ERR_OVERLAP: return "MSDA_ERR_OVERLAP";
    case MSDA_ERR_THREADS: return "MSDA_ERR_THREADS";
    }
    return "MSDA_UNKNOWN_STATUS";
}

void msda__set_error(msda_error *err, msda_status status, const char *fmt, ...)
{
    if (!err) return;
    err->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}
