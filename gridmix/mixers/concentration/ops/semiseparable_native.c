/* The semiseparable causal factor as one fused recurrence: float32, CPU, compiled with tucker_native.c on first
 * use (gridmix/mixers/concentration/ops/native_build.py) and called by gridmix/mixers/concentration/ops/semiseparable_native.py.
 *
 * The kernel κ_h[k] = Σ_q w_hq λ_hq^k is the impulse response of r decaying states, so T x (T[i, j] = κ[i − j],
 * i ≥ j) is the recurrence
 *     s_q[i] = λ_q s_q[i − 1] + x[i],    y[i] = Σ_q w_q s_q[i]            (s_q[−1] = 0)
 * run left to right: exactly causal (y[i] never reads x[j > i]), 2r multiply-adds per value, no matrix.
 * Its gradient, with p_q[i] = λ_q p_q[i + 1] + g[i] run right to left (the adjoint recurrence):
 *     ∂x[i] = Σ_q w_q p_q[i],   ∂w_q = Σ_i g[i] s_q[i],   ∂λ_q = w_q Σ_i p_q[i] s_q[i − 1].
 * The backward needs s_q[i − 1] beside p_q[i]: a first pass stores the states at the start of every block of
 * `block` positions, the second pass recomputes one block's states from there, then runs p back over it.
 *
 * Layout: the tensor is (P, n, Q) row-major, n the causal axis, Q = (the dimensions after it) · C with the
 * channels C = heads · c last. λ and w come expanded per channel, (r, C). A tile is LANES adjacent lanes of Q
 * (native_simd.h; C is a multiple of LANES, so a tile never straddles two channel blocks); its r states stay in
 * vector registers while the tile walks down the axis. Work items are (group, part): `groups` contiguous ranges of
 * p times `parts` contiguous ranges of Q's tiles, counts fixed by the caller from the shape only; each item sums its
 * gradient contributions into its own (r, C) partial in a fixed order, so results do not depend on the thread
 * count. The entry points run items [first, last), so the caller may also split them over its own threads.
 */
#include "native_simd.h"

#define MAX_TERMS 64

/* y = T x for one tile: x, y at the tile's first lane of position 0 (rows Q apart); lam, w at its first lane (rows C
 * apart). Always inlined, so a literal r unrolls the term loops and keeps the states in registers. */
static inline __attribute__((always_inline)) void forward_tile(const int r, int64_t n, int64_t Q, int64_t C,
                                                               const float *x, const float *lam, const float *w,
                                                               float *y) {
    vf s[MAX_TERMS], L[MAX_TERMS], W[MAX_TERMS];
    for (int q = 0; q < r; q++) {
        L[q] = LOAD(lam + q * C);
        W[q] = LOAD(w + q * C);
        s[q] = (vf){0};
    }
    for (int64_t i = 0; i < n; i++) {
        const vf xi = LOAD(x + i * Q);
        vf even = (vf){0}, odd = (vf){0}; /* two chains, so the adds need not wait on each other */
        for (int q = 0; q < r; q++) {
            s[q] = L[q] * s[q] + xi;
            if (q & 1) odd += W[q] * s[q];
            else even += W[q] * s[q];
        }
        STORE(y + i * Q, even + odd);
    }
}

/* The gradient for one tile (header comment): gx = Tᵀ g; adds Σ p s_prev into gl and Σ g s into gw (r vectors
 * each). checkpoints: ceil(n / block) · r vectors; states: (block + 1) · r vectors (this thread's scratch). */
static inline __attribute__((always_inline)) void backward_tile(const int r, int64_t n, int64_t Q, int64_t C,
                                                                int64_t block, const float *x, const float *g,
                                                                const float *lam, const float *w, float *gx,
                                                                vf *gl, vf *gw, vf *checkpoints, vf *states) {
    vf s[MAX_TERMS], L[MAX_TERMS], W[MAX_TERMS], acc[MAX_TERMS];
    for (int q = 0; q < r; q++) {
        L[q] = LOAD(lam + q * C);
        W[q] = LOAD(w + q * C);
        s[q] = (vf){0};
    }
    for (int64_t start = 0; start < n; start += block) { /* pass 1: checkpoints, and Σ g s block by block */
        const int64_t end = start + block < n ? start + block : n;
        for (int q = 0; q < r; q++) {
            checkpoints[(start / block) * r + q] = s[q];
            acc[q] = (vf){0};
        }
        for (int64_t i = start; i < end; i++) {
            const vf xi = LOAD(x + i * Q), gi = LOAD(g + i * Q);
            for (int q = 0; q < r; q++) {
                s[q] = L[q] * s[q] + xi;
                acc[q] += gi * s[q];
            }
        }
        for (int q = 0; q < r; q++) gw[q] += acc[q];
    }
    vf p[MAX_TERMS];
    for (int q = 0; q < r; q++) p[q] = (vf){0};
    for (int64_t start = (n - 1) / block * block; start >= 0; start -= block) { /* pass 2: blocks right to left */
        const int64_t end = start + block < n ? start + block : n;
        for (int q = 0; q < r; q++) {
            s[q] = checkpoints[(start / block) * r + q];
            states[q] = s[q];
            acc[q] = (vf){0};
        }
        for (int64_t i = start; i < end - 1; i++) { /* states[k] = s[start + k − 1]; the last is not needed */
            const vf xi = LOAD(x + i * Q);
            for (int q = 0; q < r; q++) {
                s[q] = L[q] * s[q] + xi;
                states[(i - start + 1) * r + q] = s[q];
            }
        }
        for (int64_t i = end - 1; i >= start; i--) {
            const vf gi = LOAD(g + i * Q);
            const vf *before = states + (i - start) * r;
            vf even = (vf){0}, odd = (vf){0};
            for (int q = 0; q < r; q++) {
                p[q] = L[q] * p[q] + gi;
                acc[q] += p[q] * before[q];
                if (q & 1) odd += W[q] * p[q];
                else even += W[q] * p[q];
            }
            STORE(gx + i * Q, even + odd);
        }
        for (int q = 0; q < r; q++) gl[q] += acc[q];
    }
}

/* The tiles [first, last) of Q for one p; tile t starts at lane LANES·t, channel (LANES·t) mod C. */
#define TILE_LOOP(BODY)                                                                                          \
    for (int64_t t = first; t < last; t++) {                                                                     \
        const int64_t lane = LANES * t, channel = lane % C;                                                      \
        BODY                                                                                                     \
    }

static void forward_item(int r, int64_t n, int64_t Q, int64_t C, const float *x, const float *lam, const float *w,
                         float *y, int64_t first, int64_t last) {
    switch (r) { /* literal term counts unroll; others take the generic loop */
    case 16: TILE_LOOP(forward_tile(16, n, Q, C, x + lane, lam + channel, w + channel, y + lane);) break;
    case 8: TILE_LOOP(forward_tile(8, n, Q, C, x + lane, lam + channel, w + channel, y + lane);) break;
    case 4: TILE_LOOP(forward_tile(4, n, Q, C, x + lane, lam + channel, w + channel, y + lane);) break;
    default: TILE_LOOP(forward_tile(r, n, Q, C, x + lane, lam + channel, w + channel, y + lane);) break;
    }
}

/* Item (group, part) of `groups` × `parts` (header comment): its rows p and its tiles [first, last). */
#define ITEM_RANGES                                                                                              \
    const int64_t group = item / parts, part = item % parts;                                                     \
    const int64_t p_first = P * group / groups, p_last = P * (group + 1) / groups;                               \
    const int64_t first = Q / LANES * part / parts, last = Q / LANES * (part + 1) / parts;

void gm_semiseparable_forward(int64_t P, int64_t n, int64_t Q, int64_t C, int r, int64_t groups, int64_t parts,
                              int64_t first_item, int64_t last_item, const float *x, const float *lam, const float *w,
                              float *y, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t item = first_item; item < last_item; item++) {
        ITEM_RANGES
        for (int64_t p = p_first; p < p_last; p++)
            forward_item(r, n, Q, C, x + p * n * Q, lam, w, y + p * n * Q, first, last);
    }
}

static void backward_item(int r, int64_t n, int64_t Q, int64_t C, int64_t block, const float *x, const float *g,
                          const float *lam, const float *w, float *gx, float *gl, float *gw, vf *scratch,
                          int64_t first, int64_t last) {
    vf *checkpoints = scratch, *states = scratch + (n + block - 1) / block * r;
    vf tile_gl[MAX_TERMS], tile_gw[MAX_TERMS];
#define BACKWARD(R)                                                                                              \
    TILE_LOOP(for (int q = 0; q < r; q++) tile_gl[q] = tile_gw[q] = (vf){0};                                    \
              backward_tile(R, n, Q, C, block, x + lane, g + lane, lam + channel, w + channel, gx + lane,        \
                            tile_gl, tile_gw, checkpoints, states);                                              \
              for (int q = 0; q < r; q++) {                                                                      \
                  STORE(gl + q * C + channel, LOAD(gl + q * C + channel) + tile_gl[q]);                          \
                  STORE(gw + q * C + channel, LOAD(gw + q * C + channel) + tile_gw[q]);                          \
              })
    switch (r) {
    case 16: BACKWARD(16) break;
    case 8: BACKWARD(8) break;
    case 4: BACKWARD(4) break;
    default: BACKWARD(r) break;
    }
#undef BACKWARD
}

/* gx = Tᵀ g; gl, gw: (groups · parts, r, C) partials, zeroed by the caller: each item adds Σ p s_prev and Σ g s of
 * its rows and lanes into its own (r, C) slice. scratch: threads · scratch_vectors vectors of LANES floats. */
void gm_semiseparable_backward(int64_t P, int64_t n, int64_t Q, int64_t C, int r, int64_t groups, int64_t parts,
                               int64_t first_item, int64_t last_item, int64_t block, const float *x, const float *g,
                               const float *lam, const float *w, float *gx, float *gl, float *gw, float *scratch,
                               int64_t scratch_vectors, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t item = first_item; item < last_item; item++) {
        ITEM_RANGES
        vf *mine = (vf *)scratch + THREAD_SLOT() * scratch_vectors;
        for (int64_t p = p_first; p < p_last; p++)
            backward_item(r, n, Q, C, block, x + p * n * Q, g + p * n * Q, lam, w, gx + p * n * Q, gl + item * r * C,
                          gw + item * r * C, mine, first, last);
    }
}
