/* The mixer's Tucker chain fused per batch element: float32, CPU, compiled on first use by
 * gridmix/tucker_native.py (gcc -O3 -march=native -fopenmp).
 *
 * Library GEMMs run each mode product over the whole batch, so every stage streams the full tensor
 * through memory, and for these rank-r shapes MKL spends about as long packing the large operand and
 * zeroing the output as multiplying (docs/benchmarks.md). Here one thread takes one batch element at a
 * time and runs the whole chain on it — project every axis, scale the core, expand every axis — so the
 * intermediates stay in its cache and no operand is packed: the kernels below read the tensors as they
 * lie, vectorised along the contiguous trailing dimension.
 *
 * Layout: one batch element is (m_1, …, m_d, S0), S0 = heads · channels, row-major. A mode product
 * along axis k views it as (P, n, S): P the dimensions before the axis, S those after it.
 * Every batch element is computed by one thread in a fixed order, and per-element partial sums (basis
 * and scale gradients) are reduced by the caller, so results do not depend on the thread count.
 */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef float v16 __attribute__((vector_size(64), aligned(4), may_alias)); /* unaligned access allowed */
#define LANES 16
#define LOAD(p) (*(const v16 *)(p))
#define STORE(p, v) (*(v16 *)(p) = (v))
#define MAX_AXES 8

static inline float hsum(v16 v) {
    float s = 0.0f;
    for (int l = 0; l < LANES; l++) s += v[l];
    return s;
}

/* out[o, s] = Σ_i M[o·ms0 + i·ms1] · x[i, s] for OB rows o and SV vectors of s; x rows xs apart, out rows S. */
#define DEF_MODE_BLOCK(OB, SV)                                                                         \
    static inline void mode_block_##OB##_##SV(const float *M, int64_t ms0, int64_t ms1, int64_t I,     \
                                              const float *x, int64_t xs, int64_t S, float *out) {     \
        v16 acc[OB][SV];                                                                               \
        for (int a = 0; a < OB; a++)                                                                   \
            for (int b = 0; b < SV; b++) acc[a][b] = (v16){0};                                         \
        for (int64_t i = 0; i < I; i++) {                                                              \
            v16 xv[SV];                                                                                \
            for (int b = 0; b < SV; b++) {                                                             \
                xv[b] = LOAD(x + i * xs + LANES * b);                                                  \
                __asm__("" : "+v"(xv[b])); /* keep it in a register: one load, not one per FMA */     \
            }                                                                                          \
            for (int a = 0; a < OB; a++) {                                                             \
                const float m = M[a * ms0 + i * ms1];                                                  \
                for (int b = 0; b < SV; b++) acc[a][b] += m * xv[b];                                   \
            }                                                                                          \
        }                                                                                              \
        for (int a = 0; a < OB; a++)                                                                   \
            for (int b = 0; b < SV; b++) STORE(out + a * S + LANES * b, acc[a][b]);                    \
    }
DEF_MODE_BLOCK(4, 4)
DEF_MODE_BLOCK(16, 1)
DEF_MODE_BLOCK(1, 4)
DEF_MODE_BLOCK(4, 1)
DEF_MODE_BLOCK(1, 1)

/* out[p, o, s] = Σ_i M[o, i] x[p, i, s]; M is O×I with strides (ms0, ms1), so Mᵀ needs no copy. */
#define STRIP (4 * LANES)
#define AHEAD 2 /* software prefetch distance in strips / chunks: far-apart rows defeat the hardware's */
#define PACK_MAX 16384 /* floats: the packed strip is at most 64 KiB */

static void mode_product(const float *M, int64_t ms0, int64_t ms1, int64_t O, int64_t I, const float *x,
                         int64_t P, int64_t S, float *out) {
    float packed[PACK_MAX] __attribute__((aligned(64)));
    /* packing costs a pass over the strip; it pays when many row blocks reread it (expanding, O > I) */
    const int pack = S > STRIP && O > I && I * STRIP <= PACK_MAX;
    if (S <= STRIP && O < I && S % LANES == 0 && I * S > PACK_MAX) {
        /* short rows of a long axis (beyond L1), projecting down: every output row of a column vector in
         * one sweep over the rows, so x is read once (4 × 4 blocks would sweep it once per row block) */
        for (int64_t p = 0; p < P; p++)
            for (int64_t s = 0; s < S; s += LANES) {
                int64_t o = 0;
                for (; o + 16 <= O; o += 16) mode_block_16_1(M + o * ms0, ms0, ms1, I, x + p * I * S + s, S, S, out + (p * O + o) * S + s);
                for (; o < O; o++) mode_block_1_1(M + o * ms0, ms0, ms1, I, x + p * I * S + s, S, S, out + (p * O + o) * S + s);
            }
        return;
    }
    for (int64_t p = 0; p < P; p++) {
        const float *xp = x + p * I * S;
        float *op = out + p * O * S;
        int64_t s = 0;
        /* s outer, o inner: every row block reads the same (I, 64) column strip of x. Rows S floats apart
         * fall into the same L1 sets when S is a multiple of 1024, so there a long-row strip is first copied
         * into a contiguous buffer, where it stays in L1 for all the row blocks. */
        for (; s + STRIP <= S; s += STRIP) {
            const float *strip = xp + s;
            int64_t stride = S;
            if (pack) {
                for (int64_t i = 0; i < I; i++)
                    for (int b = 0; b < 4; b++) STORE(packed + i * STRIP + LANES * b, LOAD(xp + i * S + s + LANES * b));
                strip = packed, stride = STRIP;
            }
            if (s + (AHEAD + 1) * STRIP <= S)
                for (int64_t i = 0; i < I; i++)
                    for (int b = 0; b < 4; b++) __builtin_prefetch(xp + i * S + s + AHEAD * STRIP + LANES * b);
            int64_t o = 0;
            for (; o + 4 <= O; o += 4) mode_block_4_4(M + o * ms0, ms0, ms1, I, strip, stride, S, op + o * S + s);
            for (; o < O; o++) mode_block_1_4(M + o * ms0, ms0, ms1, I, strip, stride, S, op + o * S + s);
        }
        for (; s + LANES <= S; s += LANES) {
            int64_t o = 0;
            for (; o + 4 <= O; o += 4) mode_block_4_1(M + o * ms0, ms0, ms1, I, xp + s, S, S, op + o * S + s);
            for (; o < O; o++) mode_block_1_1(M + o * ms0, ms0, ms1, I, xp + s, S, S, op + o * S + s);
        }
        for (; s < S; s++)
            for (int64_t o = 0; o < O; o++) {
                float acc = 0.0f;
                for (int64_t i = 0; i < I; i++) acc += M[o * ms0 + i * ms1] * xp[i * S + s];
                op[o * S + s] = acc;
            }
    }
}

/* out[i·r + j] += Σ_{p, s ∈ [s0, s1)} L[p, i, s] · R[p, j, s] for IB rows i and JB rows j. */
#define DEF_BASIS_BLOCK(IB, JB)                                                                        \
    static inline void basis_block_##IB##_##JB(const float *L, const float *R, int64_t P, int64_t n,   \
                                               int64_t r, int64_t S, int64_t s0, int64_t s1,           \
                                               float *out) {                                           \
        v16 acc[IB][JB];                                                                               \
        float tail[IB][JB];                                                                            \
        for (int a = 0; a < IB; a++)                                                                   \
            for (int b = 0; b < JB; b++) acc[a][b] = (v16){0}, tail[a][b] = 0.0f;                      \
        const int64_t vend = s0 + (s1 - s0) / LANES * LANES;                                           \
        for (int64_t p = 0; p < P; p++) {                                                              \
            const float *Lp = L + p * n * S, *Rp = R + p * r * S;                                      \
            for (int64_t s = s0; s < vend; s += LANES) {                                               \
                v16 lv[IB];                                                                            \
                for (int a = 0; a < IB; a++) {                                                         \
                    lv[a] = LOAD(Lp + a * S + s);                                                      \
                    __asm__("" : "+v"(lv[a]));                                                         \
                }                                                                                      \
                for (int b = 0; b < JB; b++) {                                                         \
                    const v16 rv = LOAD(Rp + b * S + s);                                               \
                    for (int a = 0; a < IB; a++) acc[a][b] += lv[a] * rv;                              \
                }                                                                                      \
            }                                                                                          \
            for (int64_t s = vend; s < s1; s++)                                                        \
                for (int a = 0; a < IB; a++)                                                           \
                    for (int b = 0; b < JB; b++) tail[a][b] += Lp[a * S + s] * Rp[b * S + s];          \
        }                                                                                              \
        for (int a = 0; a < IB; a++)                                                                   \
            for (int b = 0; b < JB; b++) out[a * r + b] += hsum(acc[a][b]) + tail[a][b];               \
    }
DEF_BASIS_BLOCK(4, 4)
DEF_BASIS_BLOCK(1, 4)
DEF_BASIS_BLOCK(4, 1)
DEF_BASIS_BLOCK(1, 1)

/* acc[i·r + j] += Σ_{s < CHUNK} L[i, s] · R[j, s] for a 4×4 block, as vectors: R packed (rows CHUNK apart). */
#define CHUNK 256
static inline void basis_chunk_4_4(const float *L, int64_t S, const float *R, int64_t r, v16 *acc) {
    v16 a[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) a[i][j] = acc[i * r + j];
    for (int64_t s = 0; s < CHUNK; s += LANES) {
        v16 lv[4];
        for (int i = 0; i < 4; i++) {
            lv[i] = LOAD(L + i * S + s);
            __asm__("" : "+v"(lv[i]));
        }
        for (int j = 0; j < 4; j++) {
            const v16 rv = LOAD(R + j * CHUNK + s);
            for (int i = 0; i < 4; i++) a[i][j] += lv[i] * rv;
        }
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i * r + j] = a[i][j];
}

/* basis_product for long rows: chunks of CHUNK columns, the R chunk packed so that it stays in L1 while
 * every row block of L reads it, partial sums kept as vectors across chunks (one horizontal sum each). */
static void basis_product_long(const float *L, const float *R, int64_t P, int64_t n, int64_t r, int64_t S,
                               float *out, v16 *acc) {
    float packed[PACK_MAX] __attribute__((aligned(64)));
    for (int64_t q = 0; q < n * r; q++) acc[q] = (v16){0};
    for (int64_t p = 0; p < P; p++)
        for (int64_t s0 = 0; s0 + CHUNK <= S; s0 += CHUNK) {
            for (int64_t j = 0; j < r; j++)
                for (int64_t s = 0; s < CHUNK; s += LANES) STORE(packed + j * CHUNK + s, LOAD(R + (p * r + j) * S + s0 + s));
            if (s0 + (AHEAD + 1) * CHUNK <= S)
                for (int64_t i = 0; i < n; i++)
                    for (int64_t s = 0; s < CHUNK; s += LANES) __builtin_prefetch(L + (p * n + i) * S + s0 + AHEAD * CHUNK + s);
            for (int64_t i = 0; i < n; i += 4)
                for (int64_t j = 0; j < r; j += 4) basis_chunk_4_4(L + (p * n + i) * S + s0, S, packed + j * CHUNK, r, acc + i * r + j);
        }
    for (int64_t q = 0; q < n * r; q++) out[q] += hsum(acc[q]);
}

/* basis_product for one short-row slice (P = 1, S small), as on a long 1-D axis: the reduction over s is
 * too short to amortise horizontal sums, so R is transposed to (S, 16-column blocks) and eight rows of
 * out at a time accumulate as vectors along j: out[i, j:j+16] += Σ_s L[i, s] · Rᵀ[s, j:j+16]. */
static void basis_product_short(const float *L, const float *R, int64_t n, int64_t r, int64_t S, float *out) {
    float packed[PACK_MAX] __attribute__((aligned(64)));
    const int64_t rpad = (r + LANES - 1) / LANES * LANES;
    for (int64_t s = 0; s < S; s++)
        for (int64_t j = 0; j < rpad; j++) packed[s * rpad + j] = j < r ? R[j * S + s] : 0.0f;
    for (int64_t j0 = 0; j0 < rpad; j0 += LANES) {
        const int64_t lanes = r - j0 < LANES ? r - j0 : LANES;
        for (int64_t i0 = 0; i0 < n; i0 += 8) {
            const int64_t rows = n - i0 < 8 ? n - i0 : 8;
            v16 acc[8];
            for (int a = 0; a < 8; a++) acc[a] = (v16){0};
            if (rows == 8)
                for (int64_t s = 0; s < S; s++) {
                    const v16 rv = LOAD(packed + s * rpad + j0);
                    for (int a = 0; a < 8; a++) acc[a] += L[(i0 + a) * S + s] * rv;
                }
            else
                for (int64_t s = 0; s < S; s++) {
                    const v16 rv = LOAD(packed + s * rpad + j0);
                    for (int a = 0; a < rows; a++) acc[a] += L[(i0 + a) * S + s] * rv;
                }
            for (int64_t a = 0; a < rows; a++)
                for (int64_t l = 0; l < lanes; l++) out[(i0 + a) * r + j0 + l] += acc[a][l];
        }
    }
}

/* out (n×r) += Σ_{p,s} L[p, i, s] R[p, j, s]: L is (P, n, S), R is (P, r, S). */
static void basis_product(const float *L, const float *R, int64_t P, int64_t n, int64_t r, int64_t S,
                          float *out) {
    if (S % CHUNK == 0 && n % 4 == 0 && r % 4 == 0 && r * CHUNK <= PACK_MAX && n * r <= 4096) {
        v16 *acc = malloc(sizeof(v16) * n * r);
        if (acc) {
            basis_product_long(L, R, P, n, r, S, out, acc);
            free(acc);
            return;
        }
    }
    if (P == 1 && S < CHUNK && S * ((r + LANES - 1) / LANES * LANES) <= PACK_MAX) {
        basis_product_short(L, R, n, r, S, out);
        return;
    }
    const int64_t chunk = 1024; /* columns per pass: the rows of one block stay in L1/L2 */
    for (int64_t s0 = 0; s0 < S; s0 += chunk) {
        const int64_t s1 = s0 + chunk < S ? s0 + chunk : S;
        int64_t i = 0;
        for (; i + 4 <= n; i += 4) {
            int64_t j = 0;
            for (; j + 4 <= r; j += 4) basis_block_4_4(L + i * S, R + j * S, P, n, r, S, s0, s1, out + i * r + j);
            for (; j < r; j++) basis_block_4_1(L + i * S, R + j * S, P, n, r, S, s0, s1, out + i * r + j);
        }
        for (; i < n; i++) {
            int64_t j = 0;
            for (; j + 4 <= r; j += 4) basis_block_1_4(L + i * S, R + j * S, P, n, r, S, s0, s1, out + i * r + j);
            for (; j < r; j++) basis_block_1_1(L + i * S, R + j * S, P, n, r, S, s0, s1, out + i * r + j);
        }
    }
}

/* The shape of one batch element as the chain changes it: dims[a] for the d grid axes, then S0. */
typedef struct {
    int d;
    int64_t dims[MAX_AXES];
    int64_t S0;
} shape_t;

static int64_t numel(const shape_t *sh) {
    int64_t total = sh->S0;
    for (int a = 0; a < sh->d; a++) total *= sh->dims[a];
    return total;
}

/* The chain's steps: step t projects grid axis ax[t] from n[t] to r[t] with U[t] (n[t] × r[t], row-major);
 * the expansion runs the steps in reverse. */
typedef struct {
    int d;
    const int64_t *ax, *n, *r;
    const float *const *U;
    int64_t S0;
} plan_t;

static shape_t grid_shape(const plan_t *pl) {
    shape_t sh = {.d = pl->d, .S0 = pl->S0};
    for (int t = 0; t < pl->d; t++) sh.dims[pl->ax[t]] = pl->n[t];
    return sh;
}

/* View a batch element as (P, n, S) along grid axis a. */
static void view3(const shape_t *sh, int64_t a, int64_t *P, int64_t *S) {
    *P = 1, *S = sh->S0;
    for (int j = 0; j < a; j++) *P *= sh->dims[j];
    for (int j = a + 1; j < sh->d; j++) *S *= sh->dims[j];
}

/* Step t down (n → r, with Uᵀ) or up (r → n, with U), updating *sh. */
static void apply_step(const plan_t *pl, shape_t *sh, int t, int down, const float *in, float *out) {
    const int64_t n = pl->n[t], r = pl->r[t];
    int64_t P, S;
    view3(sh, pl->ax[t], &P, &S);
    if (down)
        mode_product(pl->U[t], 1, r, r, n, in, P, S, out), sh->dims[pl->ax[t]] = r; /* (Uᵀ)[o, i] = U[i·r + o] */
    else
        mode_product(pl->U[t], r, 1, n, r, in, P, S, out), sh->dims[pl->ax[t]] = n;
}

/* ∂U_t += Σ long ⊗ short along step t's axis: long (shape *sh_long) has it at n_t, short at r_t. */
static void basis_grad(const plan_t *pl, const shape_t *sh_long, int t, const float *lng, const float *shrt,
                       float *out) {
    int64_t P, S;
    view3(sh_long, pl->ax[t], &P, &S);
    basis_product(lng, shrt, P, pl->n[t], pl->r[t], S, out);
}

/* One batch element's pointers into the saved intermediates (see gm_tucker_forward). */
typedef struct {
    float *project_in[MAX_AXES]; /* before step t's projection: x, then proj[t-1] */
    float *expand_in[MAX_AXES];  /* before step t's expansion: expd[t], then (t = d-1) the scaled core */
    float *core;
} chain_t;

static chain_t element_chain(const plan_t *pl, int64_t b, const float *x, float *const *proj, float *core,
                             float *scaled, float *const *expd) {
    chain_t c;
    shape_t sh = grid_shape(pl);
    c.project_in[0] = (float *)x + b * numel(&sh);
    for (int t = 1; t < pl->d; t++) {
        sh.dims[pl->ax[t - 1]] = pl->r[t - 1];
        c.project_in[t] = proj[t - 1] + b * numel(&sh);
    }
    sh.dims[pl->ax[pl->d - 1]] = pl->r[pl->d - 1];
    c.core = core + b * numel(&sh);
    c.expand_in[pl->d - 1] = scaled + b * numel(&sh);
    for (int t = pl->d - 2; t >= 0; t--) {
        sh.dims[pl->ax[t + 1]] = pl->n[t + 1];
        c.expand_in[t] = expd[t] + b * numel(&sh);
    }
    return c;
}

/* Forward for the whole batch. Besides y it writes the intermediates the backward needs:
 *   proj[t-1] (t = 1 … d-1): the element after the projections of steps 0 … t-1;
 *   core: after every projection (r at every axis, grid order); scaled = core · scale;
 *   expd[t] (t = 0 … d-2): the input of step t's expansion (steps d-1 … t+1 expanded).
 * scale is (R, heads), R = Π r_t in the core's order; channel s of S0 belongs to head s / (S0 / heads). */
void gm_tucker_forward(int d, int64_t B, const int64_t *ax, const int64_t *n, const int64_t *r, int64_t S0,
                       int64_t heads, const float *x, const float *const *U, const float *scale,
                       float *const *proj, float *core, float *scaled, float *const *expd, float *y, int threads) {
    const plan_t pl = {.d = d, .ax = ax, .n = n, .r = r, .U = U, .S0 = S0};
    const int64_t c = S0 / heads;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t b = 0; b < B; b++) {
        const chain_t ch = element_chain(&pl, b, x, proj, core, scaled, expd);
        shape_t sh = grid_shape(&pl);
        const int64_t size = numel(&sh);
        for (int t = 0; t < d; t++) apply_step(&pl, &sh, t, 1, ch.project_in[t], t + 1 < d ? ch.project_in[t + 1] : ch.core);
        const int64_t R = numel(&sh) / S0;
        float *scaled_b = ch.expand_in[d - 1];
        for (int64_t q = 0; q < R; q++)
            for (int64_t s = 0; s < S0; s++) scaled_b[q * S0 + s] = ch.core[q * S0 + s] * scale[q * heads + s / c];
        for (int t = d - 1; t >= 0; t--) apply_step(&pl, &sh, t, 0, ch.expand_in[t], t > 0 ? ch.expand_in[t - 1] : y + b * size);
    }
}

/* Backward for the whole batch, from the forward's intermediates. Per element b it writes gx, the basis
 * gradient partials basis_grads[t] + b·n_t·r_t (n_t × r_t) and the scale gradient partial
 * scale_grad + b·R·heads, Σ_c grad_scaled · core per (ρ, head); the caller sums the partials over b.
 * work holds 2 · threads · work_size floats, work_size ≥ every intermediate of one element. */
void gm_tucker_backward(int d, int64_t B, const int64_t *ax, const int64_t *n, const int64_t *r, int64_t S0,
                        int64_t heads, const float *gy, const float *x, const float *const *U, const float *scale,
                        float *const *proj, float *core, float *scaled, float *const *expd, float *gx,
                        float *const *basis_grads, float *scale_grad, float *work, int64_t work_size, int threads) {
    const plan_t pl = {.d = d, .ax = ax, .n = n, .r = r, .U = U, .S0 = S0};
    const int64_t c = S0 / heads;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t b = 0; b < B; b++) {
        float *buf[2] = {work + (2 * omp_get_thread_num()) * work_size,
                         work + (2 * omp_get_thread_num() + 1) * work_size};
        const chain_t ch = element_chain(&pl, b, x, proj, core, scaled, expd);
        shape_t sh = grid_shape(&pl);
        const int64_t size = numel(&sh);
        const float *g = gy + b * size;
        for (int t = 0; t < d; t++) { /* the expansion ran steps d-1 … 0; its backward runs 0 … d-1 */
            float *gb = basis_grads[t] + b * n[t] * r[t];
            memset(gb, 0, sizeof(float) * n[t] * r[t]);
            basis_grad(&pl, &sh, t, g, ch.expand_in[t], gb); /* out = U x: ∂U = Σ grad ⊗ x */
            apply_step(&pl, &sh, t, 1, g, buf[t % 2]);
            g = buf[t % 2];
        }
        const int64_t R = numel(&sh) / S0;
        float *gs = buf[d % 2], *sg = scale_grad + b * R * heads;
        for (int64_t q = 0; q < R; q++)
            for (int64_t h = 0; h < heads; h++) {
                float acc = 0.0f;
                const float sc = scale[q * heads + h];
                for (int64_t s = h * c; s < (h + 1) * c; s++) {
                    acc += g[q * S0 + s] * ch.core[q * S0 + s];
                    gs[q * S0 + s] = g[q * S0 + s] * sc;
                }
                sg[q * heads + h] = acc;
            }
        g = gs;
        for (int t = d - 1; t >= 0; t--) {
            shape_t sh_long = sh; /* the projection's input: step t's axis at n_t */
            sh_long.dims[ax[t]] = n[t];
            basis_grad(&pl, &sh_long, t, ch.project_in[t], g, basis_grads[t] + b * n[t] * r[t]); /* out = Uᵀ x */
            float *out = t > 0 ? buf[t % 2] : gx + b * size;
            apply_step(&pl, &sh, t, 0, g, out);
            g = out;
        }
    }
}
