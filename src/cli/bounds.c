/* crosscheck --expect's bounded float64 reference (see bounds.h): a line-for-line port of
 * bindings/cli/bounds.js, in the same order of floating-point operations, so both CLIs decide
 * every element alike. */
#include "bounds.h"
#include "numbers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const CC_NAMES[CC_COUNT] = {"output", "grad_value", "grad_sampling_locations", "grad_attention_weights"};
const double UNIT_ROUNDOFF[3] = {0x1p-24, 0x1p-11, 0x1p-8};
static const double TINY[3] = {0x1p-150, 0x1p-25, 0x1p-134};
#define U32 0x1p-24


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


int bounded_alloc(bounded *r, int64_t count)
{
    r->count = count;
    size_t bytes = (size_t)(count ? count : 1) * sizeof(double);
    r->ref = calloc(1, bytes);
    r->M = calloc(1, bytes);
    r->n = calloc(1, bytes);
    r->P = calloc(1, bytes);
    return r->ref && r->M && r->n && r->P ? 0 : -1;
}

void bounded_free(bounded *r)
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

void reference(const dims *d, const msda_problem *p, const float *value, const float *loc, const float *wts,
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

double bound_of(const bounded *r, int64_t i, const tolerance *s)
{
    if (s->dtype == DTYPE_NO_DTYPE) return s->atol + s->rtol * fabs(r->ref[i]);
    const double u = UNIT_ROUNDOFF[s->dtype], n = r->n[i] + 4;
    return 4 * u * r->M[i] + 2 * n * U32 * r->M[i] + r->P[i] + n * TINY[s->dtype];
}

/* ---- coordinates ---------------------------------------------------------------------------- */


static void split(int64_t index, const int64_t *sizes, int n, int64_t *out)
{
    for (int k = n - 1; k >= 0; k--) {
        out[k] = index % sizes[k];
        index /= sizes[k];
    }
}

coords coordinates(int which, int64_t i, const dims *d)
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

/* No bound to compare a difference with: ours is exactly 0 with nothing contributing (the bound
 * is the underflow term alone), or the --rtol/--atol bound is 0 (crosscheck.js noBound). */
int no_bound(const bounded *r, int64_t i, const tolerance *s)
{
    if (s->dtype == DTYPE_NO_DTYPE) return bound_of(r, i, s) == 0;
    return r->M[i] == 0 && r->P[i] == 0;
}
