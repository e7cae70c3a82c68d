/* crosscheck --expect (see crosscheck.h): a line-for-line port of bindings/cli/bounds.js and
 * the report of bindings/cli/crosscheck.js, in the same order of floating-point operations, so both CLIs
 * decide every element alike and print the same numbers. */
#define _POSIX_C_SOURCE 200809L
#include "crosscheck.h"
#include "cases.h"
#include "messages.h"
#include "npy.h"
#include "numbers.h"
#include "texts.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const CC_NAMES[CC_COUNT] = {"output", "grad_value", "grad_sampling_locations", "grad_attention_weights"};
static const char *const DTYPE_NAMES[3] = {"float32", "float16", "bfloat16"};
static const double UNIT_ROUNDOFF[3] = {0x1p-24, 0x1p-11, 0x1p-8};
static const double TINY[3] = {0x1p-150, 0x1p-25, 0x1p-134};
static const int U_EXPONENT[3] = {-24, -11, -8};
#define U32 0x1p-24

/* ---- the bounded reference ---------------------------------------------------------------- */

typedef struct dims {
    int64_t B, L, H, C, Q, NL, P;
    int blnc, bq;
    const int64_t *shapes, *starts;
} dims;

static int64_t value_at(const dims *d, int64_t b, int64_t pix, int64_t h, int64_t c)
{
    return d->blnc ? ((b * d->L + pix) * d->H + h) * d->C + c : ((b * d->H + h) * d->L + pix) * d->C + c;
}

static int64_t loc_at(const dims *d, int64_t b, int64_t q, int64_t h, int64_t l, int64_t p, int64_t xy)
{
    return d->bq ? (((((b * d->Q + q) * d->H + h) * d->NL + l) * d->P + p) * 2 + xy)
                 : (((((b * 2 + xy) * d->Q + q) * d->H + h) * d->NL + l) * d->P + p);
}

typedef struct axis {
    int ok;
    double i0, frac, grad_scale;
} axis;

static axis pad(double pos, int64_t size, int border, double scale)
{
    axis a = {0, 0, 0, 0};
    if (isnan(pos)) return a;
    double derivative = 1;
    if (border) {
        if (!(pos > 0 && pos < (double)(size - 1))) {
            derivative = 0;
            pos = pos <= 0 ? 0 : (double)(size - 1);
        }
    } else if (!(pos >= -1 && pos < (double)size)) {
        return a;
    }
    a.ok = 1;
    a.i0 = floor(pos);
    a.frac = pos - a.i0;
    a.grad_scale = scale * derivative;
    return a;
}

typedef struct geom {
    int ok, n;
    axis ax, ay;
    double fx, fy, x0, y0;
    int64_t pix[4];
    double w[4];
} geom;

static geom geometry(const dims *d, int64_t l, double px, double py, double sx, double sy, int border)
{
    geom g;
    memset(&g, 0, sizeof g);
    const int64_t Hl = d->shapes[2 * l], Wl = d->shapes[2 * l + 1];
    g.ax = pad(px, Wl, border, sx);
    if (g.ax.ok) g.ay = pad(py, Hl, border, sy);
    if (!g.ax.ok || !g.ay.ok) return g;
    g.ok = 1;
    g.fx = g.ax.frac;
    g.fy = g.ay.frac;
    g.x0 = g.ax.i0;
    g.y0 = g.ay.i0;
    const double ci[4] = {g.y0, g.y0, g.y0 + 1, g.y0 + 1}, cj[4] = {g.x0, g.x0 + 1, g.x0, g.x0 + 1};
    const double cw[4] = {(1 - g.fy) * (1 - g.fx), (1 - g.fy) * g.fx, g.fy * (1 - g.fx), g.fy * g.fx};
    for (int k = 0; k < 4; k++) {
        if (ci[k] >= 0 && ci[k] < (double)Hl && cj[k] >= 0 && cj[k] < (double)Wl) {
            g.pix[g.n] = d->starts[l] + (int64_t)ci[k] * Wl + (int64_t)cj[k];
            g.w[g.n++] = cw[k];
        }
    }
    return g;
}

static void sample(const dims *d, const float *value, int64_t b, int64_t h, const geom *g, double *s, double *abs_s)
{
    for (int64_t c = 0; c < d->C; c++) {
        s[c] = 0;
        if (abs_s) abs_s[c] = 0;
    }
    if (!g->ok) return;
    for (int k = 0; k < g->n; k++)
        for (int64_t c = 0; c < d->C; c++) {
            const double t = g->w[k] * (double)value[value_at(d, b, g->pix[k], h, c)];
            s[c] += t;
            if (abs_s) abs_s[c] += fabs(t);
        }
}

static double vat(const dims *d, const float *value, int64_t b, int64_t h, int64_t l, double i, double j, int64_t c)
{
    const int64_t Hl = d->shapes[2 * l], Wl = d->shapes[2 * l + 1];
    if (i < 0 || i >= (double)Hl || j < 0 || j >= (double)Wl) return 0;
    return value[value_at(d, b, d->starts[l] + (int64_t)i * Wl + (int64_t)j, h, c)];
}

static void loc_grads(const dims *d, const float *value, const float *G, int64_t b, int64_t h, int64_t l,
                      const geom *g, int64_t base, double *gx_out, double *gy_out)
{
    *gx_out = *gy_out = 0;
    if (!g->ok) return;
    double gx = 0, gy = 0;
    for (int64_t c = 0; c < d->C; c++) {
        const double v00 = vat(d, value, b, h, l, g->y0, g->x0, c), v01 = vat(d, value, b, h, l, g->y0, g->x0 + 1, c);
        const double v10 = vat(d, value, b, h, l, g->y0 + 1, g->x0, c), v11 = vat(d, value, b, h, l, g->y0 + 1, g->x0 + 1, c);
        gx += (double)G[base + c] * ((1 - g->fy) * (v01 - v00) + g->fy * (v11 - v10));
        gy += (double)G[base + c] * ((1 - g->fx) * (v10 - v00) + g->fx * (v11 - v01));
    }
    *gx_out = gx * g->ax.grad_scale;
    *gy_out = gy * g->ay.grad_scale;
}

static void loc_abs(const dims *d, const float *value, const float *G, int64_t b, int64_t h, int64_t l,
                    const geom *g, int64_t base, double *mx_out, double *my_out)
{
    *mx_out = *my_out = 0;
    if (!g->ok) return;
    double mx = 0, my = 0;
    for (int64_t c = 0; c < d->C; c++) {
        const double v00 = fabs(vat(d, value, b, h, l, g->y0, g->x0, c)), v01 = fabs(vat(d, value, b, h, l, g->y0, g->x0 + 1, c));
        const double v10 = fabs(vat(d, value, b, h, l, g->y0 + 1, g->x0, c)), v11 = fabs(vat(d, value, b, h, l, g->y0 + 1, g->x0 + 1, c));
        const double ag = fabs((double)G[base + c]);
        mx += ag * ((1 - g->fy) * (v01 + v00) + g->fy * (v11 + v10));
        my += ag * ((1 - g->fx) * (v10 + v00) + g->fx * (v11 + v01));
    }
    *mx_out = mx * fabs(g->ax.grad_scale);
    *my_out = my * fabs(g->ay.grad_scale);
}

static double weight_of(const geom *g, int64_t pix)
{
    if (g->ok)
        for (int k = 0; k < g->n; k++)
            if (g->pix[k] == pix) return g->w[k];
    return 0;
}

typedef struct bounded {
    int64_t count;
    double *ref, *M, *n, *P;
} bounded;

static int bounded_alloc(bounded *r, int64_t count)
{
    r->count = count;
    size_t bytes = (size_t)(count ? count : 1) * sizeof(double);
    r->ref = calloc(1, bytes);
    r->M = calloc(1, bytes);
    r->n = calloc(1, bytes);
    r->P = calloc(1, bytes);
    return r->ref && r->M && r->n && r->P ? 0 : -1;
}

static void bounded_free(bounded *r)
{
    free(r->ref);
    free(r->M);
    free(r->n);
    free(r->P);
}

static void pixel(double coord, int64_t size, int align, double *pos, double *scale)
{
    if (align) {
        *pos = size == 1 && !isnan(coord) ? 0 : coord * (double)(size - 1);
        *scale = (double)(size - 1);
    } else {
        *pos = coord * (double)size - 0.5;
        *scale = (double)size;
    }
}

static void reference(const dims *d, const msda_problem *p, const float *value, const float *loc, const float *wts,
                      const float *G, int forward, int backward, bounded out[CC_COUNT], double *work)
{
    static const int MOVES[8][2] = {{-1, -1}, {-1, 0}, {-1, 1}, {0, -1}, {0, 1}, {1, -1}, {1, 0}, {1, 1}};
    const int align = p->align_corners, border = p->padding == MSDA_PADDING_BORDER;
    const int64_t C = d->C;
    double *S = work, *absS = work + C, *S2 = work + 2 * C, *moved = work + 3 * C;
    for (int64_t b = 0; b < d->B; b++)
        for (int64_t q = 0; q < d->Q; q++)
            for (int64_t h = 0; h < d->H; h++) {
                const int64_t base = (b * d->Q + q) * d->H * C + h * C;
                for (int64_t l = 0; l < d->NL; l++)
                    for (int64_t pt = 0; pt < d->P; pt++) {
                        const int64_t Hl = d->shapes[2 * l], Wl = d->shapes[2 * l + 1];
                        const int64_t wi = (((b * d->Q + q) * d->H + h) * d->NL + l) * d->P + pt;
                        const int64_t lx = loc_at(d, b, q, h, l, pt, 0), ly = loc_at(d, b, q, h, l, pt, 1);
                        const double a = wts[wi];
                        double xpos, xscale, ypos, yscale;
                        pixel(loc[lx], Wl, align, &xpos, &xscale);
                        pixel(loc[ly], Hl, align, &ypos, &yscale);
                        const double ex = 4 * U32 * (fabs(xpos) + 1), ey = 4 * U32 * (fabs(ypos) + 1);
                        const geom g0 = geometry(d, l, xpos, ypos, xscale, yscale, border);
                        geom gs[8];
                        int ngs = 0, any = g0.ok;
                        if (isfinite(ex) && isfinite(ey))
                            for (int m = 0; m < 8; m++) {
                                gs[ngs] = geometry(d, l, xpos + MOVES[m][0] * ex, ypos + MOVES[m][1] * ey, xscale, yscale, border);
                                any |= gs[ngs++].ok;
                            }
                        if (!any) continue;
                        sample(d, value, b, h, &g0, S, absS);
                        for (int64_t c = 0; c < C; c++) moved[c] = 0;
                        double movedG = 0;
                        for (int m = 0; m < ngs; m++) {
                            sample(d, value, b, h, &gs[m], S2, NULL);
                            double dot = 0;
                            for (int64_t c = 0; c < C; c++) {
                                const double dS = S2[c] - S[c];
                                moved[c] = js_max(moved[c], fabs(dS));
                                if (backward) dot += (double)G[base + c] * dS;
                            }
                            movedG = js_max(movedG, fabs(dot));
                        }
                        if (forward) {
                            bounded *o = &out[CC_OUTPUT];
                            for (int64_t c = 0; c < C; c++) {
                                if (g0.ok) {
                                    o->ref[base + c] += a * S[c];
                                    o->M[base + c] += fabs(a) * absS[c];
                                    o->n[base + c] += 4;
                                }
                                o->P[base + c] += fabs(a) * moved[c];
                            }
                        }
                        if (!backward) continue;
                        bounded *gw = &out[CC_GRAD_WEIGHTS], *gl = &out[CC_GRAD_LOCATIONS], *gv = &out[CC_GRAD_VALUE];
                        double gS = 0, mS = 0;
                        for (int64_t c = 0; c < C; c++) {
                            gS += (double)G[base + c] * S[c];
                            mS += fabs((double)G[base + c]) * absS[c];
                        }
                        if (g0.ok) {
                            gw->ref[wi] = gS;
                            gw->M[wi] = mS;
                        }
                        gw->n[wi] = (double)(4 * C);
                        gw->P[wi] = movedG;
                        double gx, gy, px = 0, py = 0, mx, my;
                        loc_grads(d, value, G, b, h, l, &g0, base, &gx, &gy);
                        for (int m = 0; m < ngs; m++) {
                            double qx, qy;
                            loc_grads(d, value, G, b, h, l, &gs[m], base, &qx, &qy);
                            px = js_max(px, fabs(a * (qx - gx)));
                            py = js_max(py, fabs(a * (qy - gy)));
                        }
                        loc_abs(d, value, G, b, h, l, &g0, base, &mx, &my);
                        if (g0.ok) {
                            gl->ref[lx] = a * gx;
                            gl->ref[ly] = a * gy;
                            gl->M[lx] = fabs(a) * mx;
                            gl->M[ly] = fabs(a) * my;
                        }
                        gl->P[lx] = px;
                        gl->P[ly] = py;
                        gl->n[lx] = gl->n[ly] = (double)(4 * C);
                        int64_t pixels[36];
                        int np = 0;
                        for (int m = -1; m < ngs; m++) {
                            const geom *g = m < 0 ? &g0 : &gs[m];
                            if (!g->ok) continue;
                            for (int k = 0; k < g->n; k++) {
                                int seen = 0;
                                for (int j = 0; j < np; j++) seen |= pixels[j] == g->pix[k];
                                if (!seen) pixels[np++] = g->pix[k];
                            }
                        }
                        for (int j = 0; j < np; j++) {
                            const int64_t pix = pixels[j];
                            const double w = weight_of(&g0, pix);
                            int corner = 0;
                            if (g0.ok)
                                for (int k = 0; k < g0.n; k++) corner |= g0.pix[k] == pix;
                            double dw = 0;
                            for (int m = 0; m < ngs; m++) dw = js_max(dw, fabs(weight_of(&gs[m], pix) - w));
                            for (int64_t c = 0; c < C; c++) {
                                const int64_t e = value_at(d, b, pix, h, c);
                                if (corner) {
                                    const double t = a * w * (double)G[base + c];
                                    gv->ref[e] += t;
                                    gv->M[e] += fabs(t);
                                    gv->n[e] += 1;
                                }
                                gv->P[e] += fabs(a * (double)G[base + c]) * dw;
                            }
                        }
                    }
            }
}

static double bound_of(const bounded *r, int64_t i, const cc_settings *s)
{
    if (s->dtype == DTYPE_NO_DTYPE) return s->atol + s->rtol * fabs(r->ref[i]);
    const double u = UNIT_ROUNDOFF[s->dtype], n = r->n[i] + 4;
    return 4 * u * r->M[i] + 2 * n * U32 * r->M[i] + r->P[i] + n * TINY[s->dtype];
}

/* ---- coordinates and comparison ----------------------------------------------------------- */

typedef struct coords {
    int count;
    const char *key[7];
    int64_t v[7];
    int64_t level, head;
} coords;

static void split(int64_t index, const int64_t *sizes, int n, int64_t *out)
{
    for (int k = n - 1; k >= 0; k--) {
        out[k] = index % sizes[k];
        index /= sizes[k];
    }
}

static coords coordinates(int which, int64_t i, const dims *d)
{
    coords co;
    memset(&co, 0, sizeof co);
    int64_t v[6];
#define SET(...)                                                                        \
    do {                                                                                \
        const char *k_[] = {__VA_ARGS__};                                               \
        co.count = (int)(sizeof k_ / sizeof k_[0]);                                     \
        for (int j_ = 0; j_ < co.count; j_++) co.key[j_] = k_[j_];                      \
    } while (0)
    if (which == CC_OUTPUT) {
        const int64_t s[4] = {d->B, d->Q, d->H, d->C};
        split(i, s, 4, v);
        SET("b", "q", "h", "c");
        memcpy(co.v, v, 4 * sizeof v[0]);
    } else if (which == CC_GRAD_WEIGHTS) {
        const int64_t s[5] = {d->B, d->Q, d->H, d->NL, d->P};
        split(i, s, 5, v);
        SET("b", "q", "h", "l", "p");
        memcpy(co.v, v, 5 * sizeof v[0]);
        co.level = v[3];
    } else if (which == CC_GRAD_LOCATIONS) {
        if (d->bq) {
            const int64_t s[6] = {d->B, d->Q, d->H, d->NL, d->P, 2};
            split(i, s, 6, v);
            SET("b", "q", "h", "l", "p", "xy");
            co.level = v[3];
        } else {
            const int64_t s[6] = {d->B, 2, d->Q, d->H, d->NL, d->P};
            split(i, s, 6, v);
            SET("b", "xy", "q", "h", "l", "p");
            co.level = v[4];
        }
        memcpy(co.v, v, 6 * sizeof v[0]);
    } else {
        int64_t b, pix, h, c;
        if (d->blnc) {
            const int64_t s[4] = {d->B, d->L, d->H, d->C};
            split(i, s, 4, v);
            b = v[0]; pix = v[1]; h = v[2]; c = v[3];
        } else {
            const int64_t s[4] = {d->B, d->H, d->L, d->C};
            split(i, s, 4, v);
            b = v[0]; pix = v[2]; h = v[1]; c = v[3];
        }
        int64_t l = 0;
        while (l + 1 < d->NL && d->starts[l + 1] <= pix) l++;
        const int64_t W = d->shapes[2 * l + 1], y = (pix - d->starts[l]) / W, x = (pix - d->starts[l]) % W;
        co.level = l;
        if (d->blnc) {
            SET("b", "pix", "l", "y", "x", "h", "c");
            const int64_t vv[7] = {b, pix, l, y, x, h, c};
            memcpy(co.v, vv, sizeof vv);
        } else {
            SET("b", "h", "pix", "l", "y", "x", "c");
            const int64_t vv[7] = {b, h, pix, l, y, x, c};
            memcpy(co.v, vv, sizeof vv);
        }
    }
#undef SET
    for (int k = 0; k < co.count; k++)
        if (!strcmp(co.key[k], "h")) co.head = co.v[k];
    return co;
}

typedef struct worst_entry {
    double diff;
    int64_t index;
} worst_entry;

typedef struct cc_result {
    int64_t count, disagree, no_bound;
    double max_abs, max_ratio;
    int64_t *per_level; /* NULL for output */
    int64_t *per_head;
    worst_entry *worst;
    int nworst;
} cc_result;

/* No bound to compare a difference with: ours is exactly 0 with nothing contributing (the bound
 * is the underflow term alone), or the --rtol/--atol bound is 0 (crosscheck.js noBound). */
static int no_bound(const bounded *r, int64_t i, const cc_settings *s)
{
    if (s->dtype == DTYPE_NO_DTYPE) return bound_of(r, i, s) == 0;
    return r->M[i] == 0 && r->P[i] == 0;
}

static int compare(int which, const float *yours, const bounded *r, const dims *d, const cc_settings *s, cc_result *res)
{
    memset(res, 0, sizeof *res);
    res->count = r->count;
    if (which != CC_OUTPUT) {
        res->per_level = calloc((size_t)d->NL, sizeof(int64_t));
        if (!res->per_level) return -1;
    }
    res->per_head = calloc((size_t)d->H, sizeof(int64_t));
    if (!res->per_head) return -1;
    res->worst = malloc((size_t)(s->top ? s->top : 1) * sizeof(worst_entry));
    if (!res->worst) return -1;
    for (int64_t i = 0; i < r->count; i++) {
        const double y = yours[i], o = r->ref[i];
        if (isnan(y) && isnan(o)) continue;
        if (y == o) continue;
        const double diff = fabs(y - o), bound = bound_of(r, i, s);
        const double abs_diff = isnan(diff) ? INFINITY : diff;
        res->max_abs = js_max(res->max_abs, abs_diff);
        if (no_bound(r, i, s)) res->no_bound++;
        else res->max_ratio = js_max(res->max_ratio, bound > 0 ? abs_diff / bound : INFINITY);
        if (!(abs_diff <= bound)) {
            res->disagree++;
            const coords co = coordinates(which, i, d);
            if (res->per_level) res->per_level[co.level]++;
            res->per_head[co.head]++;
            if (s->top > 0 && (res->nworst < s->top || abs_diff > res->worst[res->nworst - 1].diff)) {
                int at = res->nworst < s->top ? res->nworst++ : s->top - 1;
                while (at > 0 && res->worst[at - 1].diff < abs_diff) {
                    res->worst[at] = res->worst[at - 1];
                    at--;
                }
                res->worst[at].diff = abs_diff;
                res->worst[at].index = i;
            }
        }
    }
    return 0;
}

/* name[b=0, q=12, ...], as bindings/cli/bounds.js formatCoordinates writes it. */
static void append_coordinates(text *t, const char *name, const coords *co)
{
    append(t, "%s[", name);
    for (int k = 0; k < co->count; k++) append(t, "%s%s=%lld", k ? ", " : "", co->key[k], (long long)co->v[k]);
    append(t, "]");
}

/* Does dtype hold x exactly (the bits back through it)? */
static int holds(float x, int dtype)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return (dtype == DTYPE_FLOAT16 ? npy_f16_to_f32(npy_f32_to_f16(u)) : npy_bf16_to_f32(npy_f32_to_bf16(u))) == u;
}

/* Does dtype hold every value of data (NaN aside), which has a value other than 0?
 * (bindings/cli/crosscheck.js halfDtypeHolding) */
static int holds_all(const float *data, int64_t n, int dtype)
{
    int nonzero = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(data[i])) continue;
        if (!holds(data[i], dtype)) return 0;
        nonzero |= data[i] != 0;
    }
    return nonzero;
}

/* The first input element the dtype cannot hold, or -1. */
static int64_t not_representable(const float *data, int64_t n, int dtype)
{
    for (int64_t i = 0; i < n; i++)
        if (!isnan(data[i]) && !holds(data[i], dtype)) return i;
    return -1;
}

int cc_run(const msda_problem *p, const float *value, const float *locations, const float *weights,
           const float *grad_output, const cc_file files[CC_COUNT], const cc_settings *s, FILE *out, char **failure)
{
    *failure = NULL;
    dims d = {p->batch, p->value_length, p->num_heads, p->channels, p->num_queries, p->num_levels, p->num_points,
              p->value_layout == MSDA_VALUE_BLNC, p->locations_layout == MSDA_LOCATIONS_BQHLP2, p->spatial_shapes,
              p->level_start_index};
    const int forward = files[CC_OUTPUT].path != NULL;
    const int backward = files[CC_GRAD_VALUE].path || files[CC_GRAD_LOCATIONS].path || files[CC_GRAD_WEIGHTS].path;
    const int64_t counts[CC_COUNT] = {d.B * d.Q * d.H * d.C, d.B * d.L * d.H * d.C, d.B * d.Q * d.H * d.NL * d.P * 2,
                                      d.B * d.Q * d.H * d.NL * d.P};
    bounded r[CC_COUNT];
    memset(r, 0, sizeof r);
    cc_result res[CC_COUNT];
    memset(res, 0, sizeof res);
    int rc = 0;
    enum { NOTE_CHARS = 4096 + 512 };
    char (*notes)[NOTE_CHARS] = NULL;
    double *work = malloc((size_t)(4 * d.C) * sizeof(double));
    if (!work) rc = -1;
    for (int k = 0; k < CC_COUNT && !rc; k++)
        if ((k == CC_OUTPUT ? forward : backward) && bounded_alloc(&r[k], counts[k])) rc = -1;
    if (!rc) reference(&d, p, value, locations, weights, grad_output, forward, backward, r, work);
    for (int k = 0; k < CC_COUNT && !rc; k++)
        if (files[k].path && compare(k, files[k].data, &r[k], &d, s, &res[k])) rc = -1;
    if (rc) goto done;

    /* notes */
    int nnotes = 0;
    char num[40];
    notes = malloc(9 * sizeof *notes); /* 4 inputs, 4 outputs, --backend */
    if (!notes) {
        rc = -1;
        goto done;
    }
    if (s->dtype == DTYPE_FLOAT16 || s->dtype == DTYPE_BFLOAT16)
        for (int k = 0; k < 4; k++) {
            if (!s->input_path[k]) continue;
            int64_t i = not_representable(s->input_data[k], s->input_count[k], s->dtype);
            if (i >= 0)
                snprintf(notes[nnotes++], sizeof notes[0], TEXT_NOTE_NOT_REPRESENTABLE, s->input_path[k], DTYPE_NAMES[s->dtype], (long long)i,
                         js_number(s->input_data[k][i], num), DTYPE_NAMES[s->dtype]);
        }
    if (!strcmp(s->dtype_from, TEXT_DTYPE_FROM_DEFAULT))
        for (int k = 0; k < CC_COUNT; k++) {
            if (!files[k].path || !res[k].disagree) continue;
            /* bfloat16 first: its values within float16's range are float16 values too */
            const int half = holds_all(files[k].data, res[k].count, DTYPE_BFLOAT16) ? DTYPE_BFLOAT16
                           : holds_all(files[k].data, res[k].count, DTYPE_FLOAT16)  ? DTYPE_FLOAT16 : DTYPE_NO_DTYPE;
            if (half != DTYPE_NO_DTYPE)
                snprintf(notes[nnotes++], sizeof notes[0], TEXT_NOTE_HALF_VALUES, files[k].path, DTYPE_NAMES[half], DTYPE_NAMES[half], DTYPE_NAMES[half]);
        }
    if (s->backend)
        snprintf(notes[nnotes++], sizeof notes[0], TEXT_NOTE_BACKEND, s->backend);

    char rule[512];
    if (s->dtype == DTYPE_NO_DTYPE) {
        char a[40], b[40];
        snprintf(rule, sizeof rule, TEXT_RULE_GIVEN, js_number(s->atol, a), js_number(s->rtol, b));
    } else {
        snprintf(rule, sizeof rule, TEXT_RULE_OF_DTYPE, TEXT_BOUND_RULE, U_EXPONENT[s->dtype]);
    }
    int nresults = 0, nfail = 0;
    for (int k = 0; k < CC_COUNT; k++) {
        if (!files[k].path) continue;
        nresults++;
        nfail += res[k].disagree > 0;
    }
    char x[40], y[40], f1[40], f2[40];
    if (s->json) {
        fputs("{\n  \"in\": ", out);
        json_string(out, s->in);
        fputs(",\n  \"expect\": ", out);
        json_string(out, s->expect);
        fputs(",\n  \"yours\": ", out);
        text yours = {NULL, 0, 0};
        append(&yours, TEXT_YOURS, s->expect);
        if (yours.failed) {
            free(yours.s);
            rc = -1;
            goto done;
        }
        json_string(out, yours.s);
        free(yours.s);
        fputs(",\n  \"ours\": ", out);
        json_string(out, TEXT_OURS);
        fputs(",\n  \"tolerance\": {\n", out);
        if (s->dtype == DTYPE_NO_DTYPE) {
            fprintf(out, "    \"rtol\": %s,\n    \"atol\": %s,\n", js_number(s->rtol, x), js_number(s->atol, y));
        } else {
            fprintf(out, "    \"dtype\": \"%s\",\n    \"from\": \"%s\",\n    \"unitRoundoff\": %s,\n", DTYPE_NAMES[s->dtype],
                    s->dtype_from, js_number(UNIT_ROUNDOFF[s->dtype], x));
        }
        fputs("    \"rule\": ", out);
        json_string(out, rule);
        fprintf(out, "\n  },\n  \"agree\": %s,\n  \"notes\": [", nfail ? "false" : "true");
        for (int k = 0; k < nnotes; k++) {
            fputs(k ? ",\n    " : "\n    ", out);
            json_string(out, notes[k]);
        }
        fputs(nnotes ? "\n  ],\n  \"outputs\": {" : "],\n  \"outputs\": {", out);
        int first = 1;
        for (int k = 0; k < CC_COUNT; k++) {
            if (!files[k].path) continue;
            const cc_result *q = &res[k];
            fprintf(out, "%s\n    \"%s\": {\n      \"file\": ", first ? "" : ",", CC_NAMES[k]);
            first = 0;
            json_string(out, files[k].path);
            fprintf(out, ",\n      \"dtype\": \"%s\",\n      \"count\": %lld,\n      \"disagree\": %lld,\n      \"maxAbsDiff\": ",
                    files[k].descr, (long long)q->count, (long long)q->disagree);
            json_number(out, q->max_abs);
            fputs(",\n      \"maxRatioToBound\": ", out);
            json_number(out, q->max_ratio);
            fprintf(out, ",\n      \"noBound\": %lld,\n      \"perLevel\": ", (long long)q->no_bound);
            if (!q->per_level) {
                fputs("null", out);
            } else {
                fputc('[', out);
                for (int64_t l = 0; l < d.NL; l++) fprintf(out, "%s\n        %lld", l ? "," : "", (long long)q->per_level[l]);
                fputs("\n      ]", out);
            }
            fputs(",\n      \"perHead\": [", out);
            for (int64_t h = 0; h < d.H; h++) fprintf(out, "%s\n        %lld", h ? "," : "", (long long)q->per_head[h]);
            fputs("\n      ],\n      \"worst\": [", out);
            for (int w = 0; w < q->nworst; w++) {
                const int64_t i = q->worst[w].index;
                const coords co = coordinates(k, i, &d);
                fprintf(out, "%s\n        {\n          \"coordinates\": {", w ? "," : "");
                for (int c = 0; c < co.count; c++)
                    fprintf(out, "%s\n            \"%s\": %lld", c ? "," : "", co.key[c], (long long)co.v[c]);
                fprintf(out, "\n          },\n          \"index\": %lld,\n          \"yours\": ", (long long)i);
                json_number(out, files[k].data[i]);
                fputs(",\n          \"ours\": ", out);
                json_number(out, r[k].ref[i]);
                fputs(",\n          \"diff\": ", out);
                json_number(out, fabs((double)files[k].data[i] - r[k].ref[i]));
                fputs(",\n          \"bound\": ", out);
                json_number(out, bound_of(&r[k], i, s));
                fputs("\n        }", out);
            }
            fputs(q->nworst ? "\n      ]\n    }" : "]\n    }", out);
        }
        fputs(first ? "}\n}\n" : "\n  }\n}\n", out);
    } else {
        text yours = {NULL, 0, 0};
        append(&yours, TEXT_YOURS, s->expect);
        if (!yours.failed) fprintf(out, TEXT_HEADER "\n", s->in, yours.s, TEXT_OURS);
        rc = yours.failed ? -1 : 0;
        free(yours.s);
        if (rc) goto done;
        if (s->dtype == DTYPE_NO_DTYPE) fprintf(out, TEXT_TOLERANCE_GIVEN "\n", rule);
        else fprintf(out, TEXT_TOLERANCE_FOR "\n", DTYPE_NAMES[s->dtype], s->dtype_from, rule);
        for (int k = 0; k < nnotes; k++) fprintf(out, TEXT_NOTE "\n", notes[k]);
        for (int k = 0; k < CC_COUNT && !rc; k++) {
            if (!files[k].path) continue;
            const cc_result *q = &res[k];
            text max = {NULL, 0, 0}, per = {NULL, 0, 0};
            append(&max, TEXT_MAX_DIFF, js_fmt(q->max_abs, f1));
            /* a ratio to the bound of an element with none (ours exactly 0) would say nothing */
            if (!q->no_bound || q->max_ratio > 0) {
                append(&max, ", ");
                append(&max, TEXT_MAX_RATIO, js_fmt(q->max_ratio, f2));
            }
            if (q->no_bound) {
                append(&max, ", ");
                append(&max, TEXT_NO_BOUND, (long long)q->no_bound);
            }
            if (q->disagree) {
                text levels = {NULL, 0, 0}, heads = {NULL, 0, 0};
                for (int64_t l = 0; q->per_level && l < d.NL; l++) {
                    if (l) append(&levels, ", ");
                    append(&levels, TEXT_LEVEL_COUNT, (long long)l, (long long)q->per_level[l]);
                }
                for (int64_t h = 0; h < d.H; h++) {
                    if (h) append(&heads, ", ");
                    append(&heads, TEXT_HEAD_COUNT, (long long)h, (long long)q->per_head[h]);
                }
                if (q->per_level && !levels.failed) {
                    append(&per, TEXT_PER_LEVEL, levels.s);
                    append(&per, "; ");
                }
                if (!heads.failed) append(&per, TEXT_PER_HEAD, heads.s);
                rc = levels.failed || heads.failed || per.failed ? -1 : 0;
                if (!rc && !max.failed)
                    fprintf(out, TEXT_VERDICT_DISAGREE "\n", CC_NAMES[k], (long long)q->disagree, (long long)q->count,
                            per.s, max.s);
                free(levels.s);
                free(heads.s);
            } else if (!max.failed) {
                fprintf(out, TEXT_VERDICT_OK "\n", CC_NAMES[k], (long long)q->count, max.s);
            }
            if (max.failed) rc = -1;
            free(max.s);
            free(per.s);
            for (int w = 0; w < q->nworst && !rc; w++) {
                const int64_t i = q->worst[w].index;
                const coords co = coordinates(k, i, &d);
                text where = {NULL, 0, 0};
                append_coordinates(&where, CC_NAMES[k], &co);
                js_pair(files[k].data[i], r[k].ref[i], x, y);
                if (!where.failed)
                    fprintf(out, TEXT_WORST "\n", where.s, x, y, js_fmt(fabs((double)files[k].data[i] - r[k].ref[i]), f1),
                            js_fmt(bound_of(&r[k], i, s), f2));
                else
                    rc = -1;
                free(where.s);
            }
        }
        if (rc) goto done;
        if (!nfail && nresults == 1) {
            for (int k = 0; k < CC_COUNT; k++)
                if (files[k].path) fprintf(out, TEXT_AGREES "\n", CC_NAMES[k]);
        } else if (!nfail) {
            fprintf(out, TEXT_ALL_AGREE "\n", nresults);
        }
    }
    if (nfail) {
        text list = {NULL, 0, 0}, msg = {NULL, 0, 0};
        int n = 0;
        for (int k = 0; k < CC_COUNT; k++) {
            if (!files[k].path || !res[k].disagree) continue;
            if (n++) append(&list, ", ");
            append(&list, TEXT_OUTPUT_FAILED, CC_NAMES[k], (long long)res[k].disagree, (long long)res[k].count);
        }
        if (!list.failed) append(&msg, TEXT_FAILED, list.s);
        free(list.s);
        if (list.failed || msg.failed) {
            free(msg.s);
            rc = -1;
            goto done;
        }
        *failure = msg.s;
        rc = 1;
    }
done:
    for (int k = 0; k < CC_COUNT; k++) {
        bounded_free(&r[k]);
        free(res[k].per_level);
        free(res[k].per_head);
        free(res[k].worst);
    }
    free(work);
    free(notes);
    return rc;
}

/* In the JS CLI's order of checks, so that both name the same problem first. */
int run_crosscheck(options *o)
{
    source src;
    int opened = source_open(&src, "--expect", o->expect);
    if (opened) return opened;
    static const char *const OUTPUT_FILES[] = {"output.npy", "grad_value.npy", "grad_sampling_locations.npy",
                                               "grad_attention_weights.npy", NULL};
    opened = source_strays(&src, "--expect", OUTPUT_FILES, TEXT_OUTPUT_LIST);
    if (opened) {
        source_close(&src);
        return opened;
    }
    char *path[CC_COUNT] = {0};
    npy_array arr[CC_COUNT];
    float *data[CC_COUNT] = {0};
    text problems = {NULL, 0, 0};
    int code = 0, found = 0;
    for (int k = 0; k < CC_COUNT && code != EXIT_OTHER; k++) {
        char name[64], err[320];
        snprintf(name, sizeof name, "%s.npy", CC_NAMES[k]);
        path[k] = source_path(&src, name);
        if (!path[k]) { code = report(EXIT_OTHER, TEXT_OUT_OF_MEMORY); break; }
        if (!source_has(&src, path[k], name)) {
            free(path[k]);
            path[k] = NULL;
            continue;
        }
        int io_error = 0;
        void *loaded = NULL;
        int rc = source_load(&src, path[k], name, 0, &arr[k], &loaded, &io_error, err, sizeof err);
        data[k] = loaded;
        if (rc == 0) { found++; continue; }
        if (code) append(&problems, TEXT_ALSO);
        code = EXIT_BAD_INPUT;
        if (arr[k].bad_dtype) dtype_hint(&problems, path[k], name, arr[k].descr, 0);
        else append(&problems, TEXT_FILE_SAYS, path[k], err);
    }
    if (code == EXIT_BAD_INPUT) report(code, "%s", problems.s ? problems.s : TEXT_OUT_OF_MEMORY);
    free(problems.s);
    source_close(&src);
    if (!code && !found)
        code = report(EXIT_BAD_INPUT, TEXT_EXPECT_NONE, o->expect, TEXT_OUTPUT_LIST);
    case_data c;
    memset(&c, 0, sizeof c);
    msda_problem p;
    if (!code) {
        o->backward = data[CC_GRAD_VALUE] || data[CC_GRAD_LOCATIONS] || data[CC_GRAD_WEIGHTS];
        code = load_case(o, &c);
    }
    if (!code) code = derive_problem(o, &c, &p);
    for (int k = 0; k < CC_COUNT && !code; k++) {
        if (!data[k]) continue;
        const int64_t out_shape[3] = {p.batch, p.num_queries, p.num_heads * p.channels};
        const npy_array *want = k == CC_GRAD_VALUE ? &c.arr[F_VALUE] : k == CC_GRAD_LOCATIONS ? &c.arr[F_LOCATIONS]
                              : &c.arr[F_WEIGHTS];
        const int ndim = k == CC_OUTPUT ? 3 : want->ndim;
        const int64_t *shape = k == CC_OUTPUT ? out_shape : want->shape;
        if (!same_shape(&arr[k], ndim, shape)) {
            shape_text got, expected;
            code = report(EXIT_BAD_INPUT, TEXT_EXPECT_SHAPE, path[k], shape_of(&arr[k], got),
                          npy_format_shape(ndim, shape, expected, sizeof expected), CC_NAMES[k]);
        }
    }
    if (!code) {
        cc_settings s;
        memset(&s, 0, sizeof s);
        s.in = o->in;
        s.expect = o->expect;
        s.top = o->top;
        s.json = o->json;
        s.backend = o->backend;
        s.rtol = o->rtol;
        s.atol = o->atol;
        s.dtype = o->dtype;
        s.dtype_from = TEXT_DTYPE_FROM_FLAG;
        if (o->dtype == DTYPE_NO_DTYPE && !o->have_rtol && !o->have_atol) {
            /* the files' own dtype when all are float16, or all bfloat16 */
            int f2 = 0, bf = 0, all = 0;
            for (int k = 0; k < CC_COUNT; k++) {
                if (!data[k]) continue;
                all++;
                f2 += arr[k].dtype == NPY_F2;
                bf += arr[k].dtype == NPY_BF16;
            }
            s.dtype = f2 == all ? DTYPE_FLOAT16 : bf == all ? DTYPE_BFLOAT16 : DTYPE_FLOAT32;
            s.dtype_from = s.dtype == DTYPE_FLOAT32 ? TEXT_DTYPE_FROM_DEFAULT : TEXT_DTYPE_FROM_FILES;
        }
        const int inputs[4] = {F_VALUE, F_LOCATIONS, F_WEIGHTS, F_GRAD_OUTPUT};
        for (int k = 0; k < 4; k++) {
            if (!c.f32[inputs[k]]) continue;
            s.input_path[k] = c.path[inputs[k]];
            s.input_data[k] = c.f32[inputs[k]];
            s.input_count[k] = c.arr[inputs[k]].count;
        }
        cc_file files[CC_COUNT];
        for (int k = 0; k < CC_COUNT; k++) {
            files[k].path = data[k] ? path[k] : NULL;
            files[k].descr = data[k] ? npy_dtype_name(arr[k].dtype) : NULL;
            files[k].data = data[k];
        }
        char *failure = NULL;
        int rc = cc_run(&p, c.f32[F_VALUE], c.f32[F_LOCATIONS], c.f32[F_WEIGHTS], c.f32[F_GRAD_OUTPUT], files, &s, stdout,
                        &failure);
        fflush(stdout);
        if (rc < 0) code = report(EXIT_OTHER, TEXT_OUT_OF_MEMORY);
        else if (rc) code = report(EXIT_OTHER, "%s", failure);
        free(failure);
    }
    case_free(&c);
    for (int k = 0; k < CC_COUNT; k++) {
        free(path[k]);
        free(data[k]);
    }
    return code;
}
