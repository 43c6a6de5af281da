/* The mixer's Tucker chain fused per batch element: float32, CPU, compiled on first use by
 * gridmix/mixers/concentration/ops/native_build.py (-O3 -march=native -fopenmp where the compiler takes it; native_simd.h picks the
 * vector width, 1 to 16 lanes, from the target).
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
 * and scale gradients) are reduced by the caller, so results do not depend on the thread count. The entry
 * points take a range [first, last) of batch elements, so the caller may also split a batch over its own
 * threads (a build without OpenMP) with the same results.
 *
 * Register blocks: a mode product keeps MB_ROWS × MB_VECS accumulators (and MB_VECS loaded vectors), a basis
 * gradient BI × BJ (and BI loaded vectors): 4 × 4 and 4 × 4 where there are 32 vector registers, 4 × 3 and 4 × 2
 * where there are 16 (the fastest of the shapes measured, docs/benchmarks.md "The native kernels on every ISA").
 */
#include <stdlib.h>
#include <string.h>

#include "native_simd.h"

#define MAX_AXES 8
#ifndef MB_ROWS
#if GM_VREGS >= 32
#define MB_ROWS 4
#define MB_VECS 4
#define TALL 16
#define BI 4
#define BJ 4
#else
#define MB_ROWS 4
#define MB_VECS 3
#define TALL 8
#define BI 4
#define BJ 2
#endif
#endif

/* out[o, s] = Σ_i M[o·ms0 + i·ms1] · x[i, s] for OB rows o and SV vectors of s; x rows xs apart, out rows S. */
#define DEF_MODE_BLOCK(NAME, OB, SV)                                                                   \
    static inline void mode_block_##NAME(const float *M, int64_t ms0, int64_t ms1, int64_t I,          \
                                         const float *x, int64_t xs, int64_t S, float *out) {          \
        vf acc[OB][SV];                                                                                \
        for (int a = 0; a < OB; a++)                                                                   \
            for (int b = 0; b < SV; b++) acc[a][b] = (vf){0};                                          \
        for (int64_t i = 0; i < I; i++) {                                                              \
            vf xv[SV];                                                                                 \
            for (int b = 0; b < SV; b++) {                                                             \
                xv[b] = LOAD(x + i * xs + LANES * b);                                                  \
                PIN(xv[b]);                                                                            \
            }                                                                                          \
            for (int a = 0; a < OB; a++) {                                                             \
                const float m = M[a * ms0 + i * ms1];                                                  \
                for (int b = 0; b < SV; b++) acc[a][b] += m * xv[b];                                   \
            }                                                                                          \
        }                                                                                              \
        for (int a = 0; a < OB; a++)                                                                   \
            for (int b = 0; b < SV; b++) STORE(out + a * S + LANES * b, acc[a][b]);                    \
    }
DEF_MODE_BLOCK(full, MB_ROWS, MB_VECS)
DEF_MODE_BLOCK(tall, TALL, 1)
DEF_MODE_BLOCK(row, 1, MB_VECS)
DEF_MODE_BLOCK(col, MB_ROWS, 1)
DEF_MODE_BLOCK(pair, MB_ROWS, 2)
DEF_MODE_BLOCK(one, 1, 1)

/* out[p, o, s] = Σ_i M[o, i] x[p, i, s]; M is O×I with strides (ms0, ms1), so Mᵀ needs no copy. */
#define STRIP (MB_VECS * LANES)
#define SHORT_ROW 64 /* floats: rows this short of a long axis take the one-sweep projection */
#define SMALL_SLICE 8192 /* floats: an (I, S) slice this small stays in L1/L2 while every row block reads it */
#define AHEAD 2 /* software prefetch distance in strips / chunks: far-apart rows defeat the hardware's */
#define PACK_MAX 16384 /* floats: the packed strip is at most 64 KiB */
#define LINE 16 /* floats per 64-byte cache line: the step of a prefetch loop */

/* Prefetch floats [from, to) of out for writing: the hardware prefetcher follows the streams a kernel reads, not the
 * one it writes, and a written line it misses stalls the store that first touches it (docs/benchmarks.md). */
static inline void prefetch_for_write(float *out, int64_t from, int64_t to) {
    for (int64_t q = from; q < to; q += LINE) __builtin_prefetch(out + q, 1);
}

/* Prefetch floats [from, to) of in for reading: the kernels that walk p slice by p slice fetch the next slice a
 * share at a time while they compute on this one, which measured faster than leaving it to the hardware. */
static inline void prefetch_for_read(const float *in, int64_t from, int64_t to) {
    for (int64_t q = from; q < to; q += LINE) __builtin_prefetch(in + q);
}

/* Rows [o, o + rows) of one p's output, columns [s, S), one scalar at a time (the columns no vector covers). */
static void scalar_columns(const float *M, int64_t ms0, int64_t ms1, int64_t o, int64_t rows, int64_t I,
                           const float *xp, int64_t s, int64_t S, float *op) {
    for (; s < S; s++)
        for (int64_t a = o; a < o + rows; a++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < I; i++) acc += M[a * ms0 + i * ms1] * xp[i * S + s];
            op[a * S + s] = acc;
        }
}

static void mode_product(const float *M, int64_t ms0, int64_t ms1, int64_t O, int64_t I, const float *x,
                         int64_t P, int64_t S, float *out) {
    if (S <= SHORT_ROW && O < I && S % LANES == 0 && I * S > PACK_MAX) {
        /* short rows of a long axis (beyond L1), projecting down: TALL output rows of a column vector in
         * one sweep over the rows, so x is read O / TALL times (row blocks would sweep it O / MB_ROWS times) */
        for (int64_t p = 0; p < P; p++)
            for (int64_t s = 0; s < S; s += LANES) {
                int64_t o = 0;
                for (; o + TALL <= O; o += TALL) mode_block_tall(M + o * ms0, ms0, ms1, I, x + p * I * S + s, S, S, out + (p * O + o) * S + s);
                for (; o < O; o++) mode_block_one(M + o * ms0, ms0, ms1, I, x + p * I * S + s, S, S, out + (p * O + o) * S + s);
            }
        return;
    }
    if (I * S <= SMALL_SLICE) {
        /* a small (I, S) slice, as when expanding a long axis from its rank: row blocks outer, so each output row
         * is written once and whole (strips outer would revisit every output line once per strip) */
        const int64_t ahead = P > 1 ? O : 64; /* rows: one p slice, or 64 rows on along a single long slice */
        for (int64_t p = 0; p < P; p++) {
            const float *xp = x + p * I * S;
            float *op = out + p * O * S;
            int64_t o = 0;
            for (; o + MB_ROWS <= O; o += MB_ROWS) {
                if (p * O + o + ahead + MB_ROWS <= P * O) /* output rows `ahead` on: the next p's, or this p's */
                    prefetch_for_write(op, (o + ahead) * S, (o + ahead + MB_ROWS) * S);
                if (p + 1 < P) /* the next p's share of the input */
                    prefetch_for_read(xp, I * S + I * S * o / O, I * S + I * S * (o + MB_ROWS) / O);
                int64_t s = 0;
                for (; s + STRIP <= S; s += STRIP) mode_block_full(M + o * ms0, ms0, ms1, I, xp + s, S, S, op + o * S + s);
                for (; s + 2 * LANES <= S; s += 2 * LANES) /* two vectors left: 2·MB_ROWS accumulators, not MB_ROWS */
                    mode_block_pair(M + o * ms0, ms0, ms1, I, xp + s, S, S, op + o * S + s);
                for (; s + LANES <= S; s += LANES) mode_block_col(M + o * ms0, ms0, ms1, I, xp + s, S, S, op + o * S + s);
                scalar_columns(M, ms0, ms1, o, MB_ROWS, I, xp, s, S, op);
            }
            for (; o < O; o++) {
                int64_t s = 0;
                for (; s + STRIP <= S; s += STRIP) mode_block_row(M + o * ms0, ms0, ms1, I, xp + s, S, S, op + o * S + s);
                for (; s + LANES <= S; s += LANES) mode_block_one(M + o * ms0, ms0, ms1, I, xp + s, S, S, op + o * S + s);
                scalar_columns(M, ms0, ms1, o, 1, I, xp, s, S, op);
            }
        }
        return;
    }
    float packed[PACK_MAX] __attribute__((aligned(64)));
    /* packing costs a pass over the strip; it pays when many row blocks reread it (expanding, O > I) */
    const int pack = S > STRIP && O > I && I * STRIP <= PACK_MAX;
    for (int64_t p = 0; p < P; p++) {
        const float *xp = x + p * I * S;
        float *op = out + p * O * S;
        int64_t s = 0;
        /* s outer, o inner: every row block reads the same (I, STRIP) column strip of x. Rows S floats apart
         * fall into the same L1 sets when S is a multiple of 1024, so there a long-row strip is first copied
         * into a contiguous buffer, where it stays in L1 for all the row blocks. */
        for (; s + STRIP <= S; s += STRIP) {
            const float *strip = xp + s;
            int64_t stride = S;
            if (pack) {
                for (int64_t i = 0; i < I; i++)
                    for (int b = 0; b < MB_VECS; b++) STORE(packed + i * STRIP + LANES * b, LOAD(xp + i * S + s + LANES * b));
                strip = packed, stride = STRIP;
            }
            if (s + (AHEAD + 1) * STRIP <= S) {
                for (int64_t i = 0; i < I; i++)
                    prefetch_for_read(xp, i * S + s + AHEAD * STRIP, i * S + s + (AHEAD + 1) * STRIP);
                for (int64_t o = 0; o < O; o++)
                    prefetch_for_write(op, o * S + s + AHEAD * STRIP, o * S + s + (AHEAD + 1) * STRIP);
            }
            int64_t o = 0;
            for (; o + MB_ROWS <= O; o += MB_ROWS) mode_block_full(M + o * ms0, ms0, ms1, I, strip, stride, S, op + o * S + s);
            for (; o < O; o++) mode_block_row(M + o * ms0, ms0, ms1, I, strip, stride, S, op + o * S + s);
        }
        for (; s + LANES <= S; s += LANES) {
            int64_t o = 0;
            for (; o + MB_ROWS <= O; o += MB_ROWS) mode_block_col(M + o * ms0, ms0, ms1, I, xp + s, S, S, op + o * S + s);
            for (; o < O; o++) mode_block_one(M + o * ms0, ms0, ms1, I, xp + s, S, S, op + o * S + s);
        }
        scalar_columns(M, ms0, ms1, 0, O, I, xp, s, S, op);
    }
}

/* mode_product for householder_native.c, which applies the DCT to the bases with it */
void gm_mode_product(const float *M, int64_t ms0, int64_t ms1, int64_t O, int64_t I, const float *x, int64_t P,
                     int64_t S, float *out) {
    mode_product(M, ms0, ms1, O, I, x, P, S, out);
}

/* Columns [s0, s1) of out[o, s] = Σ_i M[o·ms0 + i·ms1] · x[i, s], x and out rows S apart; s1 - s0 a multiple of LANES. */
static inline void mode_columns(const float *M, int64_t ms0, int64_t ms1, int64_t O, int64_t I, const float *x,
                                int64_t S, int64_t s0, int64_t s1, float *out) {
    int64_t s = s0;
    for (; s + STRIP <= s1; s += STRIP) {
        int64_t o = 0;
        for (; o + MB_ROWS <= O; o += MB_ROWS) mode_block_full(M + o * ms0, ms0, ms1, I, x + s, S, S, out + o * S + s);
        for (; o < O; o++) mode_block_row(M + o * ms0, ms0, ms1, I, x + s, S, S, out + o * S + s);
    }
    for (; s + 2 * LANES <= s1; s += 2 * LANES) {
        int64_t o = 0;
        for (; o + MB_ROWS <= O; o += MB_ROWS) mode_block_pair(M + o * ms0, ms0, ms1, I, x + s, S, S, out + o * S + s);
        for (; o < O; o++) {
            mode_block_one(M + o * ms0, ms0, ms1, I, x + s, S, S, out + o * S + s);
            mode_block_one(M + o * ms0, ms0, ms1, I, x + s + LANES, S, S, out + o * S + s + LANES);
        }
    }
    for (; s < s1; s += LANES) {
        int64_t o = 0;
        for (; o + MB_ROWS <= O; o += MB_ROWS) mode_block_col(M + o * ms0, ms0, ms1, I, x + s, S, S, out + o * S + s);
        for (; o < O; o++) mode_block_one(M + o * ms0, ms0, ms1, I, x + s, S, S, out + o * S + s);
    }
}

/* out[i·r + j] += Σ_{p, s ∈ [s0, s1)} L[p, i, s] · R[p, j, s] for IB rows i and JB rows j. */
#define DEF_BASIS_BLOCK(NAME, IB, JB)                                                                  \
    static inline void basis_block_##NAME(const float *L, const float *R, int64_t P, int64_t n,        \
                                          int64_t r, int64_t S, int64_t s0, int64_t s1, float *out) {  \
        vf acc[IB][JB];                                                                                \
        float tail[IB][JB];                                                                            \
        for (int a = 0; a < IB; a++)                                                                   \
            for (int b = 0; b < JB; b++) acc[a][b] = (vf){0}, tail[a][b] = 0.0f;                       \
        const int64_t vend = s0 + (s1 - s0) / LANES * LANES;                                           \
        for (int64_t p = 0; p < P; p++) {                                                              \
            const float *Lp = L + p * n * S, *Rp = R + p * r * S;                                      \
            for (int64_t s = s0; s < vend; s += LANES) {                                               \
                vf lv[IB];                                                                             \
                for (int a = 0; a < IB; a++) {                                                         \
                    lv[a] = LOAD(Lp + a * S + s);                                                      \
                    PIN(lv[a]);                                                                        \
                }                                                                                      \
                for (int b = 0; b < JB; b++) {                                                         \
                    const vf rv = LOAD(Rp + b * S + s);                                                \
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
DEF_BASIS_BLOCK(full, BI, BJ)
DEF_BASIS_BLOCK(row, 1, BJ)
DEF_BASIS_BLOCK(col, BI, 1)
DEF_BASIS_BLOCK(one, 1, 1)

/* acc[i·r + j] += Σ_{k < slices, s < width} L[k, i, s] · R[k, j, s] for a BI × BJ block, as vectors: L rows ls
 * apart and slices lk apart, R rows rs apart and slices rk apart. */
#define CHUNK 256 /* columns per pass of basis_product_vec: the R chunk (r rows) stays in L1 */
#define SLICES 4 /* short-row p slices one register block sums before it writes its partial sums back */
static inline void basis_chunk(const float *L, int64_t ls, int64_t lk, const float *R, int64_t rs, int64_t rk,
                               int64_t slices, int64_t width, int64_t r, vf *acc) {
    vf a[BI][BJ];
    for (int i = 0; i < BI; i++)
        for (int j = 0; j < BJ; j++) a[i][j] = acc[i * r + j];
    for (int64_t k = 0; k < slices; k++)
        for (int64_t s = 0; s < width; s += LANES) {
            vf lv[BI];
            for (int i = 0; i < BI; i++) {
                lv[i] = LOAD(L + k * lk + i * ls + s);
                PIN(lv[i]);
            }
            for (int j = 0; j < BJ; j++) {
                const vf rv = LOAD(R + k * rk + j * rs + s);
                for (int i = 0; i < BI; i++) a[i][j] += lv[i] * rv;
            }
        }
    for (int i = 0; i < BI; i++)
        for (int j = 0; j < BJ; j++) acc[i * r + j] = a[i][j];
}

/* basis_product with the n·r partial sums kept as vectors across the whole reduction (one horizontal sum each at the
 * end), reading each of L and R from memory once however many p slices there are. Short rows (S ≤ CHUNK) go SLICES
 * p slices at a time, so a register block reads and writes its partial sums once per SLICES slices; longer rows go
 * p by p in chunks of at most CHUNK columns, each chunk's R rows packed (rows S floats apart would share L1 sets). */
static void basis_product_vec(const float *L, const float *R, int64_t P, int64_t n, int64_t r, int64_t S, float *out,
                              vf *acc, const float *U, float *projected) {
    float packed[PACK_MAX] __attribute__((aligned(64)));
    for (int64_t q = 0; q < n * r; q++) acc[q] = (vf){0};
    if (S <= CHUNK) {
        for (int64_t p0 = 0; p0 < P; p0 += SLICES) {
            const int64_t slices = P - p0 < SLICES ? P - p0 : SLICES;
            const float *Lp = L + p0 * n * S, *Rp = R + p0 * r * S;
            for (int64_t i = 0; i < n; i += BI) {
                if (p0 + slices < P) /* the next group's rows i … i + BI */
                    for (int64_t k = slices; k < slices + SLICES && p0 + k < P; k++)
                        prefetch_for_read(Lp, k * n * S + i * S, k * n * S + (i + BI) * S);
                for (int64_t j = 0; j < r; j += BJ)
                    basis_chunk(Lp + i * S, S, n * S, Rp + j * S, S, r * S, slices, S, r, acc + i * r + j);
            }
            if (U) /* the group's L slices are in cache: project them too, (Uᵀ)[o, i] = U[i·r + o] */
                for (int64_t k = 0; k < slices; k++)
                    mode_columns(U, 1, r, r, n, Lp + k * n * S, S, 0, S, projected + (p0 + k) * r * S);
        }
    } else {
        for (int64_t p = 0; p < P; p++) {
            const float *Lp = L + p * n * S, *Rp = R + p * r * S;
            for (int64_t s0 = 0; s0 < S; s0 += CHUNK) {
                const int64_t width = S - s0 < CHUNK ? S - s0 : CHUNK;
                for (int64_t j = 0; j < r; j++)
                    for (int64_t s = 0; s < width; s += LANES) STORE(packed + j * CHUNK + s, LOAD(Rp + j * S + s0 + s));
                if (s0 + (AHEAD + 1) * CHUNK <= S)
                    for (int64_t i = 0; i < n; i++)
                        prefetch_for_read(Lp, i * S + s0 + AHEAD * CHUNK, i * S + s0 + (AHEAD + 1) * CHUNK);
                for (int64_t i = 0; i < n; i += BI)
                    for (int64_t j = 0; j < r; j += BJ)
                        basis_chunk(Lp + i * S + s0, S, 0, packed + j * CHUNK, CHUNK, 0, 1, width, r, acc + i * r + j);
                if (U) /* the chunk of L is in cache: project it too */
                    mode_columns(U, 1, r, r, n, Lp, S, s0, s0 + width, projected + p * r * S);
            }
        }
    }
    for (int64_t q = 0; q < n * r; q++) out[q] += hsum(acc[q]);
}

/* basis_product for one short-row slice (P = 1, S small), as on a long 1-D axis: the reduction over s is
 * too short to amortise horizontal sums, so R is transposed to (S, LANES-column blocks) and eight rows of
 * out at a time accumulate as vectors along j: out[i, j:j+LANES] += Σ_s L[i, s] · Rᵀ[s, j:j+LANES]. */
static void basis_product_short(const float *L, const float *R, int64_t n, int64_t r, int64_t S, float *out) {
    float packed[PACK_MAX] __attribute__((aligned(64)));
    const int64_t rpad = (r + LANES - 1) / LANES * LANES;
    for (int64_t s = 0; s < S; s++)
        for (int64_t j = 0; j < rpad; j++) packed[s * rpad + j] = j < r ? R[j * S + s] : 0.0f;
    for (int64_t j0 = 0; j0 < rpad; j0 += LANES) {
        const int64_t lanes = r - j0 < LANES ? r - j0 : LANES;
        for (int64_t i0 = 0; i0 < n; i0 += 8) {
            const int64_t rows = n - i0 < 8 ? n - i0 : 8;
            vf acc[8];
            for (int a = 0; a < 8; a++) acc[a] = (vf){0};
            if (rows == 8)
                for (int64_t s = 0; s < S; s++) {
                    const vf rv = LOAD(packed + s * rpad + j0);
                    for (int a = 0; a < 8; a++) acc[a] += L[(i0 + a) * S + s] * rv;
                }
            else
                for (int64_t s = 0; s < S; s++) {
                    const vf rv = LOAD(packed + s * rpad + j0);
                    for (int a = 0; a < rows; a++) acc[a] += L[(i0 + a) * S + s] * rv;
                }
            for (int64_t a = 0; a < rows; a++)
                for (int64_t l = 0; l < lanes; l++) out[(i0 + a) * r + j0 + l] += acc[a][l];
        }
    }
}

/* out (n×r) += Σ_{p,s} L[p, i, s] R[p, j, s]: L is (P, n, S), R is (P, r, S). With U (n × r), also
 * projected[p, o, s] = Σ_i U[i, o] L[p, i, s] in the same pass over L where it can (returns 1), else not at all (0). */
static int basis_product(const float *L, const float *R, int64_t P, int64_t n, int64_t r, int64_t S, float *out,
                         const float *U, float *projected) {
    if (P == 1 && S < CHUNK && S * ((r + LANES - 1) / LANES * LANES) <= PACK_MAX) {
        basis_product_short(L, R, n, r, S, out);
        return 0;
    }
    if (S % LANES == 0 && n % BI == 0 && r % BJ == 0 && r * CHUNK <= PACK_MAX && n * r <= 4096) {
        vf *acc = malloc(sizeof(vf) * n * r);
        if (acc) {
            basis_product_vec(L, R, P, n, r, S, out, acc, U, projected);
            free(acc);
            return U != NULL;
        }
    }
    const int64_t chunk = 1024; /* columns per pass: the rows of one block stay in L1/L2 */
    for (int64_t s0 = 0; s0 < S; s0 += chunk) {
        const int64_t s1 = s0 + chunk < S ? s0 + chunk : S;
        int64_t i = 0;
        for (; i + BI <= n; i += BI) {
            int64_t j = 0;
            for (; j + BJ <= r; j += BJ) basis_block_full(L + i * S, R + j * S, P, n, r, S, s0, s1, out + i * r + j);
            for (; j < r; j++) basis_block_col(L + i * S, R + j * S, P, n, r, S, s0, s1, out + i * r + j);
        }
        for (; i < n; i++) {
            int64_t j = 0;
            for (; j + BJ <= r; j += BJ) basis_block_row(L + i * S, R + j * S, P, n, r, S, s0, s1, out + i * r + j);
            for (; j < r; j++) basis_block_one(L + i * S, R + j * S, P, n, r, S, s0, s1, out + i * r + j);
        }
    }
    return 0;
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
    basis_product(lng, shrt, P, pl->n[t], pl->r[t], S, out, NULL, NULL);
}

/* basis_grad, then step t down on the same long tensor (*sh has step t's axis at n_t), in one pass over it where
 * basis_product can fuse the two; the result is the same either way. */
static void basis_grad_down(const plan_t *pl, shape_t *sh, int t, const float *lng, const float *shrt, float *grad,
                            float *projected) {
    int64_t P, S;
    view3(sh, pl->ax[t], &P, &S);
    if (basis_product(lng, shrt, P, pl->n[t], pl->r[t], S, grad, pl->U[t], projected))
        sh->dims[pl->ax[t]] = pl->r[t];
    else
        apply_step(pl, sh, t, 1, lng, projected);
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

/* Forward for batch elements [first, last). Besides y it writes the intermediates the backward needs:
 *   proj[t-1] (t = 1 … d-1): the element after the projections of steps 0 … t-1;
 *   core: after every projection (r at every axis, grid order); scaled = core · scale;
 *   expd[t] (t = 0 … d-2): the input of step t's expansion (steps d-1 … t+1 expanded).
 * scale is (R, heads), R = Π r_t in the core's order; channel s of S0 belongs to head s / (S0 / heads). */
void gm_tucker_forward(int d, int64_t first, int64_t last, const int64_t *ax, const int64_t *n, const int64_t *r, int64_t S0,
                       int64_t heads, const float *x, const float *const *U, const float *scale,
                       float *const *proj, float *core, float *scaled, float *const *expd, float *y, int threads) {
    const plan_t pl = {.d = d, .ax = ax, .n = n, .r = r, .U = U, .S0 = S0};
    const int64_t c = S0 / heads;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t b = first; b < last; b++) {
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

/* Backward for batch elements [first, last), from the forward's intermediates. Per element b it writes gx, the basis
 * gradient partials basis_grads[t] + b·n_t·r_t (n_t × r_t) and the scale gradient partial
 * scale_grad + b·R·heads, Σ_c grad_scaled · core per (ρ, head); the caller sums the partials over b.
 * work holds 2 · threads · work_size floats, work_size ≥ every intermediate of one element. */
void gm_tucker_backward(int d, int64_t first, int64_t last, const int64_t *ax, const int64_t *n, const int64_t *r, int64_t S0,
                        int64_t heads, const float *gy, const float *x, const float *const *U, const float *scale,
                        float *const *proj, float *core, float *scaled, float *const *expd, float *gx,
                        float *const *basis_grads, float *scale_grad, float *work, int64_t work_size, int threads) {
    const plan_t pl = {.d = d, .ax = ax, .n = n, .r = r, .U = U, .S0 = S0};
    const int64_t c = S0 / heads;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t b = first; b < last; b++) {
        float *buf[2] = {work + (2 * THREAD_SLOT()) * work_size, work + (2 * THREAD_SLOT() + 1) * work_size};
        const chain_t ch = element_chain(&pl, b, x, proj, core, scaled, expd);
        shape_t sh = grid_shape(&pl);
        const int64_t size = numel(&sh);
        const float *g = gy + b * size;
        for (int t = 0; t < d; t++) { /* the expansion ran steps d-1 … 0; its backward runs 0 … d-1 */
            float *gb = basis_grads[t] + b * n[t] * r[t];
            memset(gb, 0, sizeof(float) * n[t] * r[t]);
            basis_grad_down(&pl, &sh, t, g, ch.expand_in[t], gb, buf[t % 2]); /* out = U x: ∂U = Σ grad ⊗ x */
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

/* What this build computes with (native_simd.h), for gridmix info and the benchmarks' records. */
const char *gm_native_isa(void) { return GM_ISA; }
int gm_native_lanes(void) { return LANES; }
int gm_native_openmp(void) { return GM_OPENMP; }
