/* The vector type the native kernels compute with, taken from what the compiler targets
 * (gridmix/mixers/concentration/ops/native_build.py tries -march=native first, then a generic build):
 *
 *   AVX-512F          16 float lanes, 32 vector registers
 *   AVX / AVX2         8 lanes, 16 registers
 *   aarch64 NEON       4 lanes, 32 registers
 *   SSE, 32-bit NEON   4 lanes, 16 registers
 *   anything else      1 lane (plain scalar code), 16 registers assumed
 *
 * GM_SCALAR forces the scalar form on any target (the tests build it to check that path). The kernels size
 * their register blocks from GM_VREGS, so a block's accumulators fit the register file at every width.
 * OpenMP is optional: without it the kernels run serially per call, and gridmix splits the work over torch's
 * threads from Python instead (native_build.run_parallel).
 */
#ifndef GRIDMIX_NATIVE_SIMD_H
#define GRIDMIX_NATIVE_SIMD_H

#include <stdint.h>

#if defined(GM_SCALAR)
#define LANES 1
#define GM_VREGS 16
#define GM_ISA "scalar"
#elif defined(__AVX512F__)
#define LANES 16
#define GM_VREGS 32
#define GM_ISA "avx512f"
#elif defined(__AVX2__)
#define LANES 8
#define GM_VREGS 16
#define GM_ISA "avx2"
#elif defined(__AVX__)
#define LANES 8
#define GM_VREGS 16
#define GM_ISA "avx"
#elif defined(__ARM_NEON) && defined(__aarch64__)
#define LANES 4
#define GM_VREGS 32
#define GM_ISA "neon"
#elif defined(__ARM_NEON)
#define LANES 4
#define GM_VREGS 16
#define GM_ISA "neon32"
#elif defined(__SSE2__)
#define LANES 4
#define GM_VREGS 16
#define GM_ISA "sse2"
#else
#define LANES 1
#define GM_VREGS 16
#define GM_ISA "scalar"
#endif

typedef float vf __attribute__((vector_size(4 * LANES), aligned(4), may_alias)); /* unaligned access allowed */
#define LOAD(p) (*(const vf *)(p))
#define STORE(p, v) (*(vf *)(p) = (v))

#ifdef _OPENMP
#include <omp.h>
#define THREAD_SLOT() omp_get_thread_num()
#define GM_OPENMP 1
#else
#define THREAD_SLOT() 0
#define GM_OPENMP 0
#endif

/* PIN(v): keep v in a register (one load, not one per FMA that reads it), where the constraint is valid: "v" for
 * any SSE/AVX/AVX-512 register of the vector's width, "w" for a NEON register. */
#if defined(GM_NO_PIN) || LANES == 1
#define PIN(v) ((void)0)
#elif defined(__x86_64__) || defined(__i386__)
#define PIN(v) __asm__("" : "+v"(v))
#elif defined(__aarch64__) || defined(__ARM_NEON)
#define PIN(v) __asm__("" : "+w"(v))
#else
#define PIN(v) ((void)0)
#endif

static inline float hsum(vf v) {
    float s = 0.0f;
    for (int l = 0; l < LANES; l++) s += v[l];
    return s;
}

#endif
