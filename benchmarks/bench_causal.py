"""Variants of the causal Toeplitz product, timed against each other in one process.

    python benchmarks/bench_causal.py --out DIR [--threads 2] [--lengths 1024 16384]

Forward+backward (gradients of the input and the kernel) on (8, n, 4 heads, 16 channels), the
mixer's benchmark shape, for: the exactly causal blocked form
(:func:`gridmix.mixers.concentration.ops.causal.causal_mode_product`) at several leaf lengths
(``leafB``, at most ``BRANCH`` sub-blocks per stage) and several branchings (``branchP``, at the
default leaf); one zero-padded FFT convolution of length 2n (faster, but its rounding leaks the
future, see docs/mixer.md "Causal axes"); the dense Toeplitz reference (up to 4,096); and the
rank-16 projection and expansion GEMMs of one symmetric axis, for scale. Interleaved rounds
(``bench_common.interleaved``); every figure is also given as a ratio to the one-FFT time, the
median of per-round ratios. Writes ``DIR/bench_causal.json`` and prints the table.
"""

from __future__ import annotations

import torch
from bench_common import length_sweep_main

from gridmix.mixers.concentration.ops.causal import (
    BRANCH,
    LEAF,
    causal_mode_product,
    causal_mode_product_dense,
)

BATCH, HEADS, HEAD_DIM, RANK = 8, 4, 16, 16
LEAVES = (64, 128, 256, 512)
# the default branching is timed as leaf{LEAF}
BRANCHES = tuple(p for p in (2, 4, 8) if p != BRANCH)
DENSE_MAX = 4096
NAMES = [
    *(f"leaf{b}" for b in LEAVES),
    *(f"branch{p}" for p in BRANCHES),
    "one_fft",
    "symmetric_r16",
    "dense",
]


def one_fft(x: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """The plain FFT convolution along axis 1 of (B, n, h, c), zero-padded to 2n."""
    n = x.shape[1]
    spectrum = torch.fft.rfft(x.movedim(1, -1), n=2 * n) * torch.fft.rfft(kernel, n=2 * n)[:, None]
    return torch.fft.irfft(spectrum, n=2 * n)[..., :n].movedim(-1, 1)


def cases(n: int) -> dict:
    """Name → forward+backward step on fresh leaf tensors of length n."""
    torch.manual_seed(0)
    x = torch.randn(BATCH, n, HEADS, HEAD_DIM, requires_grad=True)  # (B, n, h, c)
    kernel = torch.rand(HEADS, n, requires_grad=True)  # (h, n)
    basis = torch.randn(n, RANK, requires_grad=True)  # (n, r)
    grad = torch.randn(BATCH, n, HEADS, HEAD_DIM)

    def step(fn, inputs):
        return lambda: torch.autograd.grad(fn(), inputs, grad)

    out = {
        f"leaf{b}": step(lambda b=b: causal_mode_product(x, kernel, 1, leaf=b), (x, kernel))
        for b in LEAVES
    }
    out.update(
        {
            f"branch{p}": step(
                lambda p=p: causal_mode_product(x, kernel, 1, leaf=LEAF, branch=p), (x, kernel)
            )
            for p in BRANCHES
        }
    )
    out["one_fft"] = step(lambda: one_fft(x, kernel), (x, kernel))
    out["symmetric_r16"] = step(
        lambda: torch.einsum("brhc,nr->bnhc", torch.einsum("bnhc,nr->brhc", x, basis), basis),
        (x, basis),
    )
    if n <= DENSE_MAX:
        out["dense"] = step(lambda: causal_mode_product_dense(x, kernel, 1), (x, kernel))
    return out


def main() -> None:
    length_sweep_main(
        __doc__.split("\n\n")[0],
        "bench_causal.json",
        cases,
        names=NAMES,
        reference="one_fft",
        repeats=7,
    )


if __name__ == "__main__":
    main()
