/* The symmetric factors' orthonormal bases in one call: torch's Householder map for k tall weights (m, r), then
 * the dense DCT product, and the gradient of both (gridmix/mixers/concentration/ops/householder_native.py).
 *
 * For a weight W (m, r): reflector j (0-based) is v_j = e_j + W[j+1:, j] (the rows below the diagonal) with
 * tau_j = 2 / ||v_j||^2, an exact reflection H_j = I - tau_j v_j v_j^T; the column signs are the signs of W's
 * diagonal. Q = H_0 H_1 ... H_{r-1} E diag(signs) with E = I[:, :r], as torch's householder_product (LAPACK
 * orgqr); with a DCT D (n, m) the result is U = D Q (n, r).
 *
 * The backward walks the reflectors left to right. With Q_j = H_j Q_{j+1} (Q_0 the product, Q_r = E):
 *   p = Q_j^T v, s = Qbar_j^T v, Q_{j+1} = Q_j - tau v p^T (so Q_{j+1}^T v = -p), Qbar_{j+1} = Qbar_j - tau v s^T,
 *   vbar = tau (Qbar_j p - Q_{j+1} s), taubar = s . p, and through tau = 2 / (1 + ||a||^2):
 *   Wbar[i, j] = vbar_i - taubar tau^2 W[i, j] for i > j.
 * Q_{j+1} comes from Q_j (H_j is its own inverse), so nothing is saved but W.
 *
 * Q and Qbar are held column by column (r, m), so every loop runs down a column, in vectors of LANES; the backward
 * updates Q, Qbar and the gradient in one pass down the rows per reflector. One thread (a layer's bases are a few
 * thousand floats), every sum in a fixed order, so results are reproducible. D's products use the Tucker kernel's
 * mode product.
 */
#include <string.h>

#include "native_simd.h"

/* tucker_native.c: out[p, o, s] = sum_i M[o ms0 + i ms1] x[p, i, s] for p < P, o < O, s < S */
void gm_mode_product(const float *M, int64_t ms0, int64_t ms1, int64_t O, int64_t I, const float *x, int64_t P,
                     int64_t S, float *out);

static float dot(const float *a, const float *b, int64_t len) {
    vf acc = (vf){0};
    int64_t i = 0;
    for (; i + LANES <= len; i += LANES) acc += LOAD(a + i) * LOAD(b + i);
    float sum = hsum(acc);
    for (; i < len; i++) sum += a[i] * b[i];
    return sum;
}

static void axpy(float *y, float alpha, const float *x, int64_t len) {
    int64_t i = 0;
    for (; i + LANES <= len; i += LANES) STORE(y + i, LOAD(y + i) + alpha * LOAD(x + i));
    for (; i < len; i++) y[i] += alpha * x[i];
}

/* v (m): reflector j of w (m, r), zero above row j; returns its tau. Loops over a reflector's rows start at the
 * vector boundary at or above row j (its zeros change nothing), so successive reflectors load and store the same
 * vectors (starting at row j itself measured 1.5x slower: loads straddling the last reflector's stores). */
static float reflector(int64_t m, int64_t r, const float *w, int64_t j, float *v) {
    memset(v, 0, (size_t)j * sizeof(float));
    v[j] = 1.0f;
    for (int64_t i = j + 1; i < m; i++) v[i] = w[i * r + j];
    return 2.0f / dot(v + j, v + j, m - j);
}

static int64_t vector_start(int64_t j) { return j - j % LANES; }

static float column_sign(const float *w, int64_t r, int64_t c) { return w[c * r + c] < 0.0f ? -1.0f : 1.0f; }

/* qt (r, m): the columns of H_0 ... H_{r-1} E, before the column signs; v: m floats of scratch */
static void householder_product(int64_t m, int64_t r, const float *w, float *qt, float *v) {
    memset(qt, 0, (size_t)(r * m) * sizeof(float));
    for (int64_t c = 0; c < r; c++) qt[c * m + c] = 1.0f;
    for (int64_t j = r - 1; j >= 0; j--) {
        const float tau = reflector(m, r, w, j, v);
        const int64_t i0 = vector_start(j);
        for (int64_t c = j; c < r; c++) { /* columns c < j of H_{j+1} ... E are e_c, zero from row j: unchanged */
            float *col = qt + c * m + i0;
            axpy(col, -tau * dot(v + i0, col, m - i0), v + i0, m - i0);
        }
    }
}

/* w (k, m, r) -> out (k, n, r) = D Q_t, or (k, m, r) = Q_t where dct is NULL; work: 2 m r + m floats */
void gm_householder_forward(int64_t k, int64_t m, int64_t r, int64_t n, const float *w, const float *dct, float *out,
                            float *work) {
    float *qt = work, *q = work + r * m, *v = q + m * r;
    for (int64_t t = 0; t < k; t++) {
        const float *wt = w + t * m * r;
        householder_product(m, r, wt, qt, v);
        float *signed_q = dct ? q : out + t * m * r; /* (m, r) */
        for (int64_t i = 0; i < m; i++)
            for (int64_t c = 0; c < r; c++) signed_q[i * r + c] = qt[c * m + i] * column_sign(wt, r, c);
        if (dct) gm_mode_product(dct, m, 1, n, m, q, 1, r, out + t * n * r);
    }
}

/* grad (k, n, r) of the forward's out ((k, m, r) where dct is NULL) -> grad_w (k, m, r); work: 3 m r + 2 m + 4 r */
void gm_householder_backward(int64_t k, int64_t m, int64_t r, int64_t n, const float *w, const float *dct,
                             const float *grad, float *grad_w, float *work) {
    float *qt = work, *qbt = qt + r * m, *qbar = qbt + r * m, *v = qbar + m * r, *through = v + m;
    float *p = through + m, *s = p + r, *tp = s + r, *ts = tp + r;
    for (int64_t t = 0; t < k; t++) {
        const float *wt = w + t * m * r, *gt = grad + t * (dct ? n : m) * r;
        float *gw = grad_w + t * m * r;
        if (dct) gm_mode_product(dct, 1, m, m, n, gt, 1, r, qbar); /* Qbar = D^T Ubar (m, r) */
        const float *qb = dct ? qbar : gt;
        for (int64_t c = 0; c < r; c++)
            for (int64_t i = 0; i < m; i++) qbt[c * m + i] = qb[i * r + c] * column_sign(wt, r, c); /* before signs */
        householder_product(m, r, wt, qt, v);
        memset(gw, 0, (size_t)(m * r) * sizeof(float));
        for (int64_t j = 0; j < r; j++) {
            const float tau = reflector(m, r, wt, j, v);
            const int64_t i0 = vector_start(j);
            float taubar = 0.0f;
            for (int64_t c = 0; c < r; c++) {
                p[c] = dot(v + i0, qt + c * m + i0, m - i0);
                s[c] = dot(v + i0, qbt + c * m + i0, m - i0);
                taubar += s[c] * p[c];
            }
            for (int64_t c = 0; c < r; c++) tp[c] = tau * p[c], ts[c] = tau * s[c];
            int64_t i = i0;
            for (; i + LANES <= m; i += LANES) { /* one pass down the rows: Q_{j+1}, Qbar_j p - Q_{j+1} s, Qbar_{j+1} */
                const vf vi = LOAD(v + i);
                vf acc = (vf){0};
                for (int64_t c = 0; c < r; c++) {
                    float *qc = qt + c * m + i, *qbc = qbt + c * m + i;
                    const vf next = LOAD(qc) - tp[c] * vi, bar = LOAD(qbc);
                    STORE(qc, next);
                    acc += p[c] * bar - s[c] * next;
                    STORE(qbc, bar - ts[c] * vi);
                }
                STORE(through + i, acc);
            }
            for (; i < m; i++) {
                float acc = 0.0f;
                for (int64_t c = 0; c < r; c++) {
                    const float next = qt[c * m + i] - tp[c] * v[i], bar = qbt[c * m + i];
                    qt[c * m + i] = next;
                    acc += p[c] * bar - s[c] * next;
                    qbt[c * m + i] = bar - ts[c] * v[i];
                }
                through[i] = acc;
            }
            for (i = j + 1; i < m; i++) gw[i * r + j] = tau * through[i] - taubar * tau * tau * wt[i * r + j];
        }
    }
}
