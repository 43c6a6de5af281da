"""The semiseparable causal factor: its fused recurrence, its chunked scan at several sizes, and its
neighbours.

    python benchmarks/bench_semiseparable.py --out DIR [--threads 2] [--lengths 1024 4096 16384]

Forward+backward (gradients of the input and the factor's parameters) through
:class:`gridmix.mixers.concentration.factors.SemiseparableFactor` (``TERMS`` exponentials per head)
on (8, n, 4 heads, 16 channels), the mixer benchmark's shape: ``fused``,
:func:`gridmix.mixers.concentration.ops.semiseparable.semiseparable_mode_product` (the native
recurrence where it applies, as the mixer runs it), and the torch-op form
:func:`gridmix.mixers.concentration.ops.semiseparable.torch_mode_product` at chunk lengths
``chunkB`` (the default group) and groups ``groupG`` (the default chunk), and without pieces of rows
(``unpieced``: the whole tensor at once), for choosing the defaults ``CHUNK``, ``GROUP`` and
``PIECE`` on an idle machine; against the symmetric rank-16 mixer's ``mix`` (C = 64, the reference),
the exactly causal blocked FFT with a full-length kernel
(:func:`gridmix.mixers.concentration.ops.causal.causal_mode_product`) and causal SDPA (flash
kernel). Interleaved rounds (``bench_common.interleaved``); ratios to the symmetric mixer are
medians of per-round ratios. Writes ``DIR/bench_semiseparable.json`` and prints the table. Exactness
(the dense Toeplitz reference, the zero future gradient, the certificate) is tested in
``tests/test_semiseparable.py``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from bench_common import length_sweep_main
from torch.nn.attention import SDPBackend, sdpa_kernel

from gridmix import ConcentrationMixer, Grid, SemiseparableFactor
from gridmix.mixers.concentration.ops.causal import causal_mode_product
from gridmix.mixers.concentration.ops.semiseparable import (
    CHUNK,
    GROUP,
    PIECE,
    semiseparable_mode_product,
    torch_mode_product,
)

BATCH, HEADS, HEAD_DIM, RANK, TERMS = 8, 4, 16, 16, 16
CHUNKS = (32, 64, 128)
GROUPS = tuple(g for g in (4, 16, 64) if g != GROUP)  # the default group is timed as chunk{CHUNK}
NAMES = [
    "fused",
    *(f"chunk{b}" for b in CHUNKS),
    *(f"group{g}" for g in GROUPS),
    "unpieced",
    "blocked_fft",
    "symmetric_mix",
    "sdpa_causal",
]


def cases(n: int) -> dict:
    """Name → forward+backward step on fresh tensors of length n."""
    torch.manual_seed(0)
    x = torch.randn(BATCH, n, HEADS, HEAD_DIM, requires_grad=True)  # (B, n, h, c)
    grad = torch.randn(BATCH, n, HEADS, HEAD_DIM)
    factor = SemiseparableFactor(length=n, terms=TERMS, num_heads=HEADS)
    # (h, n): the full-length kernel of CausalFactor
    kernel = torch.rand(HEADS, n, requires_grad=True)
    mixer = ConcentrationMixer(HEADS * HEAD_DIM, Grid((n,)), num_heads=HEADS, rank=RANK)
    v = torch.randn(BATCH, n, HEADS * HEAD_DIM, requires_grad=True)  # (B, n, C)
    # (B, h, n, c)
    q, k, w = (torch.randn(BATCH, HEADS, n, HEAD_DIM, requires_grad=True) for _ in range(3))

    def scan(chunk: int, group: int, piece: int = PIECE):
        def step():
            y = torch_mode_product(
                x, factor.log_decays(), factor.weights(), 1, chunk=chunk, group=group, piece=piece
            )
            return torch.autograd.grad(y, (x, *factor.parameters()), grad)

        return step

    def sdpa():
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            y = F.scaled_dot_product_attention(q, k, w, is_causal=True)
        return torch.autograd.grad(y, (q, k, w), grad.transpose(1, 2))

    def fused():
        y = semiseparable_mode_product(x, factor.log_decays(), factor.weights(), 1)
        return torch.autograd.grad(y, (x, *factor.parameters()), grad)

    out = {"fused": fused, **{f"chunk{b}": scan(b, GROUP) for b in CHUNKS}}
    out.update({f"group{g}": scan(CHUNK, g) for g in GROUPS})
    out["unpieced"] = scan(CHUNK, GROUP, piece=1 << 62)  # one piece: every row at once
    out.update(
        blocked_fft=lambda: torch.autograd.grad(
            causal_mode_product(x, kernel, 1), (x, kernel), grad
        ),
        symmetric_mix=lambda: torch.autograd.grad(
            mixer.mix(v), (v, *mixer.parameters()), grad.flatten(2), allow_unused=True
        ),  # W_v, W_o: not part of mix
        sdpa_causal=sdpa,
    )
    return out


def main() -> None:
    length_sweep_main(
        __doc__.split("\n\n")[0],
        "bench_semiseparable.json",
        cases,
        names=NAMES,
        reference="symmetric_mix",
        repeats=5,
        record=dict(terms=TERMS, chunk=CHUNK, group=GROUP, piece=PIECE),
    )


if __name__ == "__main__":
    main()
