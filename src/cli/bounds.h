/* crosscheck --expect's float64 reference with a bound per element (bindings/cli/bounds.js is
 * the other half): the reference of SEMANTICS.md in double precision, and beside each element
 * M (the sum of |contributions|), n (their count) and P (its change when pixel positions move by
 * float32 rounding), from which bound_of gives the element's bound for a dtype or --rtol/--atol;
 * and an element's coordinates in its tensor's layout. crosscheck.c reports with them. */
#ifndef MSDA_CLI_BOUNDS_H
#define MSDA_CLI_BOUNDS_H

#include "args.h"
#include "msda.h"

#include <stdint.h>

enum { CC_OUTPUT, CC_GRAD_VALUE, CC_GRAD_LOCATIONS, CC_GRAD_WEIGHTS, CC_COUNT };
extern const char *const CC_NAMES[CC_COUNT];
/* Per DTYPE_*: the unit roundoff u. */
extern const double UNIT_ROUNDOFF[3];

/* A problem's dimensions and layouts, as the reference walks them. */
typedef struct dims {
    int64_t B, L, H, C, Q, NL, P;
    int blnc, bq;
    const int64_t *shapes, *starts;
} dims;

/* One output: per element the reference and its M, n and P. */
typedef struct bounded {
    int64_t count;
    double *ref, *M, *n, *P;
} bounded;

int bounded_alloc(bounded *r, int64_t count); /* 0, or -1 out of memory (free it anyway) */
void bounded_free(bounded *r);

/* The outputs (forward: output; backward: the three gradients) into out[], which bounded_alloc
 * made for them; work holds 4*C doubles. */
void reference(const dims *d, const msda_problem *p, const float *value, const float *loc, const float *wts,
               const float *G, int forward, int backward, bounded out[CC_COUNT], double *work);

/* How yours is compared with ours: DTYPE_* (the bound of bounds.js), or DTYPE_NO_DTYPE with
 * |yours - ours| <= atol + rtol*|ours|. */
typedef struct tolerance {
    int dtype;
    double rtol, atol;
} tolerance;

double bound_of(const bounded *r, int64_t i, const tolerance *t);
/* No bound to compare a difference with (ours exactly 0 with nothing contributing, or a zero
 * --rtol/--atol bound). */
int no_bound(const bounded *r, int64_t i, const tolerance *t);

/* Element i of output `which` by its coordinates in the tensor's own layout, with its level
 * (grad_value, the location and weight gradients) and head. */
typedef struct coords {
    int count;
    const char *key[7];
    int64_t v[7];
    int64_t level, head;
} coords;

coords coordinates(int which, int64_t i, const dims *d);

#endif
