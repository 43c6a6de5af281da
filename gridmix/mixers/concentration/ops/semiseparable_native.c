/* The semiseparable causal factor as one fused recurrence: float32, CPU, compiled with tucker_native.c on first
 * use (gridmix/mixers/concentration/ops/native_build.py) and called by
 * gridmix/mixers/concentration/ops/semiseparable_native.py.
 *
 * The kernel κ_h[k] = Σ_q w_hq λ_hq^k is the impulse response of r decaying states, so T x (T[i, j] = κ[i − j],
 * i ≥ j) is the recurrence
 *     s_q[i] = λ_q s_q[i − 1] + x[i],    y[i] = Σ_q w_q s_q[i]            (s_q[−1] = 0)
 * run left to right: exactly causal (y[i] never reads x[j > i]), 2r multiply-adds per value, no matrix.
 * Its gradient, with p_q[i] = λ_q p_q[i + 1] + g[i] run right to left (the adjoint recurrence):
 *     ∂x[i] = Σ_q w_q p_q[i],   ∂w_q = Σ_i g[i] s_q[i],   ∂λ_q = w_q Σ_i p_q[i] s_q[i − 1].
 * The two sums over s are rewritten so that the backward is one right-to-left pass with no states s at all:
 * Σ_i g[i] s_q[i] = Σ_j x[j] p_q[j] (T's adjoint), and Σ_i p_q[i] s_q[i − 1] = Σ_j x[j] u_q[j] with the second
 * adjoint u_q[j] = λ_q u_q[j + 1] + p_q[j + 1] (u_q[n − 1] = 0). So it reads x and g once and writes ∂x once:
 * 5r multiply-adds per value.
 *
 * Layout: the tensor is (P, n, Q) row-major, n the causal axis, Q = (the dimensions after it) · C with the
 * channels C = heads · c last. λ and w come expanded per channel, (r, C). A tile is LANES adjacent lanes of Q
 * (native_simd.h; C is a multiple of LANES, so a tile never straddles two channel blocks). Up to TILES_TOGETHER
 * adjacent tiles walk down the axis together, taking turns block by block, so a row's cache lines are read from
 * memory once, not once per tile; within a block a tile's states stay in vector registers. Work items are
 * (group, part): `groups` contiguous ranges of p times `parts` contiguous ranges of Q's tiles, counts fixed by the
 * caller from the shape only; each item sums its gradient contributions into its own (r, C) partial in a fixed
 * order, so results do not depend on the thread count. The entry points run items [first, last), so the caller may
 * also split them over its own threads.
 */
#include "native_simd.h"

#define MAX_TERMS 64
#define TILES_TOGETHER 8 /* tiles that walk the axis together (TILES_TOGETHER in semiseparable_native.py) */
#define BLOCK 64 /* positions one tile runs before the next tile of its group takes over */

/* y = T x over `count` positions of one tile: x, y at the tile's lane of the first position (rows Q apart); lam, w
 * at its first channel (rows C apart); carry: its r states, read before and written after; `next`: the positions
 * that follow in the next block, whose rows are prefetched one block ahead (x read, y written: the hardware's
 * prefetch misses the written stream). Always inlined, so a literal r unrolls the term loops and keeps the states
 * in registers. */
static inline __attribute__((always_inline)) void forward_span(const int r, int64_t count, int64_t next, int64_t Q,
                                                               int64_t C, const float *x, const float *lam,
                                                               const float *w, float *y, vf *carry) {
    vf s[MAX_TERMS], L[MAX_TERMS], W[MAX_TERMS];
    for (int q = 0; q < r; q++) {
        L[q] = LOAD(lam + q * C);
        W[q] = LOAD(w + q * C);
        s[q] = carry[q];
    }
    for (int64_t i = 0; i < count; i++) {
        if (i < next) {
            __builtin_prefetch(x + (i + BLOCK) * Q);
            __builtin_prefetch(y + (i + BLOCK) * Q, 1);
        }
        const vf xi = LOAD(x + i * Q);
        vf even = (vf){0}, odd = (vf){0}; /* two chains, so the adds need not wait on each other */
        for (int q = 0; q < r; q++) {
            s[q] = L[q] * s[q] + xi;
            if (q & 1) odd += W[q] * s[q];
            else even += W[q] * s[q];
        }
        STORE(y + i * Q, even + odd);
    }
    for (int q = 0; q < r; q++) carry[q] = s[q];
}

/* y = T x for `tiles` adjacent tiles from lane `lane0` of one p: x, y at that p's position 0. The tiles take turns
 * block by block down the axis, so the cache lines of a row that one tile loads serve its neighbours too, whatever
 * n (one tile at a time would stream the whole (n, Q) slab once per tile). carry: tiles · r vectors. */
static inline __attribute__((always_inline)) void forward_tiles(const int r, int64_t n, int64_t Q, int64_t C,
                                                                int64_t lane0, int64_t tiles, const float *x,
                                                                const float *lam, const float *w, float *y,
                                                                vf *carry) {
    for (int64_t k = 0; k < tiles * r; k++) carry[k] = (vf){0};
    for (int64_t start = 0; start < n; start += BLOCK) {
        const int64_t count = start + BLOCK < n ? BLOCK : n - start, after = n - start - count;
        const int64_t next = after < BLOCK ? after : BLOCK;
        for (int64_t k = 0; k < tiles; k++) {
            const int64_t lane = lane0 + LANES * k, channel = lane % C;
            forward_span(r, count, next, Q, C, x + start * Q + lane, lam + channel, w + channel, y + start * Q + lane,
                         carry + k * r);
        }
    }
}

/* The gradient over `count` positions of one tile, right to left from the last (header comment): x, g, gx at the
 * tile's lane of the span's first position; carry: its p and u states (2r vectors), read before and written after;
 * gl, gw: its Σ x u and Σ x p (r vectors each), added to; `ahead`: whether a whole block precedes the span, whose
 * rows are then prefetched one block ahead (x and g read, gx written). */
static inline __attribute__((always_inline)) void backward_span(const int r, int64_t count, int ahead, int64_t Q,
                                                                int64_t C, const float *x, const float *g,
                                                                const float *lam, const float *w, float *gx,
                                                                vf *carry, vf *gl, vf *gw) {
    vf p[MAX_TERMS], u[MAX_TERMS], L[MAX_TERMS], W[MAX_TERMS], xu[MAX_TERMS], xp[MAX_TERMS];
    for (int q = 0; q < r; q++) {
        L[q] = LOAD(lam + q * C);
        W[q] = LOAD(w + q * C);
        p[q] = carry[q];
        u[q] = carry[r + q];
        xu[q] = xp[q] = (vf){0};
    }
    for (int64_t i = count - 1; i >= 0; i--) {
        if (ahead) {
            __builtin_prefetch(x + (i - BLOCK) * Q);
            __builtin_prefetch(g + (i - BLOCK) * Q);
            __builtin_prefetch(gx + (i - BLOCK) * Q, 1);
        }
        const vf xi = LOAD(x + i * Q), gi = LOAD(g + i * Q);
        vf even = (vf){0}, odd = (vf){0};
        for (int q = 0; q < r; q++) {
            u[q] = L[q] * u[q] + p[q]; /* u[i] = λ u[i + 1] + p[i + 1] */
            p[q] = L[q] * p[q] + gi;   /* p[i] = λ p[i + 1] + g[i] */
            xu[q] += xi * u[q];
            xp[q] += xi * p[q];
            if (q & 1) odd += W[q] * p[q];
            else even += W[q] * p[q];
        }
        STORE(gx + i * Q, even + odd);
    }
    for (int q = 0; q < r; q++) {
        carry[q] = p[q];
        carry[r + q] = u[q];
        gl[q] += xu[q];
        gw[q] += xp[q];
    }
}

/* The gradient for `tiles` adjacent tiles from lane `lane0` of one p, taking turns block by block from the end of the
 * axis as forward_tiles does from its start: gx = Tᵀ g; adds Σ x u into gl and Σ x p into gw (tiles · r vectors
 * each). carry: tiles · 2r vectors. */
static inline __attribute__((always_inline)) void backward_tiles(const int r, int64_t n, int64_t Q, int64_t C,
                                                                 int64_t lane0, int64_t tiles, const float *x,
                                                                 const float *g, const float *lam, const float *w,
                                                                 float *gx, vf *gl, vf *gw, vf *carry) {
    for (int64_t k = 0; k < tiles * 2 * r; k++) carry[k] = (vf){0};
    for (int64_t start = (n - 1) / BLOCK * BLOCK; start >= 0; start -= BLOCK) {
        const int64_t count = start + BLOCK < n ? BLOCK : n - start;
        for (int64_t k = 0; k < tiles; k++) {
            const int64_t lane = lane0 + LANES * k, channel = lane % C, at = start * Q + lane;
            backward_span(r, count, start > 0, Q, C, x + at, g + at, lam + channel, w + channel, gx + at,
                          carry + k * 2 * r, gl + k * r, gw + k * r);
        }
    }
}

/* The tiles [first, last) of Q for one p, in groups of up to TILES_TOGETHER that walk the axis together; `tiles`
 * and `lane0` name the group's tile count and first lane. */
#define GROUP_LOOP(BODY)                                                                                         \
    for (int64_t t = first; t < last; t += TILES_TOGETHER) {                                                     \
        const int64_t tiles = last - t < TILES_TOGETHER ? last - t : TILES_TOGETHER, lane0 = LANES * t;          \
        BODY                                                                                                     \
    }

static void forward_item(int r, int64_t n, int64_t Q, int64_t C, const float *x, const float *lam, const float *w,
                         float *y, int64_t first, int64_t last, vf *carry) {
    switch (r) { /* literal term counts unroll; others take the generic loop */
    case 16: GROUP_LOOP(forward_tiles(16, n, Q, C, lane0, tiles, x, lam, w, y, carry);) break;
    case 8: GROUP_LOOP(forward_tiles(8, n, Q, C, lane0, tiles, x, lam, w, y, carry);) break;
    case 4: GROUP_LOOP(forward_tiles(4, n, Q, C, lane0, tiles, x, lam, w, y, carry);) break;
    default: GROUP_LOOP(forward_tiles(r, n, Q, C, lane0, tiles, x, lam, w, y, carry);) break;
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
        vf carry[TILES_TOGETHER * MAX_TERMS];
        for (int64_t p = p_first; p < p_last; p++)
            forward_item(r, n, Q, C, x + p * n * Q, lam, w, y + p * n * Q, first, last, carry);
    }
}

static void backward_item(int r, int64_t n, int64_t Q, int64_t C, const float *x, const float *g, const float *lam,
                          const float *w, float *gx, float *gl, float *gw, vf *scratch, int64_t first, int64_t last) {
    vf *carry = scratch, *group_gl = carry + TILES_TOGETHER * 2 * r, *group_gw = group_gl + TILES_TOGETHER * r;
#define BACKWARD(R)                                                                                              \
    GROUP_LOOP(for (int64_t k = 0; k < tiles * r; k++) group_gl[k] = group_gw[k] = (vf){0};                     \
               backward_tiles(R, n, Q, C, lane0, tiles, x, g, lam, w, gx, group_gl, group_gw, carry);            \
               for (int64_t k = 0; k < tiles; k++) {                                                             \
                   const int64_t channel = (lane0 + LANES * k) % C;                                              \
                   for (int q = 0; q < r; q++) {                                                                 \
                       STORE(gl + q * C + channel, LOAD(gl + q * C + channel) + group_gl[k * r + q]);            \
                       STORE(gw + q * C + channel, LOAD(gw + q * C + channel) + group_gw[k * r + q]);            \
                   }                                                                                             \
               })
    switch (r) {
    case 16: BACKWARD(16) break;
    case 8: BACKWARD(8) break;
    case 4: BACKWARD(4) break;
    default: BACKWARD(r) break;
    }
#undef BACKWARD
}

/* gx = Tᵀ g; gl, gw: (groups · parts, r, C) partials, zeroed by the caller: each item adds Σ x u and Σ x p of its
 * rows and lanes into its own (r, C) slice, tile by tile in order. scratch: threads · scratch_vectors vectors of LANES
 * floats, scratch_vectors = 4 · TILES_TOGETHER · r. */
void gm_semiseparable_backward(int64_t P, int64_t n, int64_t Q, int64_t C, int r, int64_t groups, int64_t parts,
                               int64_t first_item, int64_t last_item, const float *x, const float *g, const float *lam,
                               const float *w, float *gx, float *gl, float *gw, float *scratch,
                               int64_t scratch_vectors, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t item = first_item; item < last_item; item++) {
        ITEM_RANGES
        vf *mine = (vf *)scratch + THREAD_SLOT() * scratch_vectors;
        for (int64_t p = p_first; p < p_last; p++)
            backward_item(r, n, Q, C, x + p * n * Q, g + p * n * Q, lam, w, gx + p * n * Q, gl + item * r * C,
                          gw + item * r * C, mine, first, last);
    }
}
