"""Prototype (not wired into the mixer): a semiseparable causal kernel applied as an exactly causal chunked scan.

    python benchmarks/bench_semiseparable.py --out DIR [--threads 2] [--lengths 1024 4096 16384]

The kernel is a sum of ``r`` decaying exponentials per head, ``κ_h[k] = Σ_q w_hq λ_hq^k`` (0 ≤ k < n), with
``w_hq = sigmoid(ρ_h) · softmax(a_h)_q · (1 − λ_hq) / (1 − λ_hq^n)``, so that
``‖κ_h‖₁ = Σ_q w_hq (1 − λ_hq^n) / (1 − λ_hq) = sigmoid(ρ_h) < 1`` exactly: the same certificate as
:class:`gridmix.factors.CausalFactor`, a full-length kernel, but ``2r`` numbers per head instead of ``n``.

Applied in O(n·(b + r)) per row with chunks of ``b`` positions (the SSD / chunked linear-attention form):

* inside a chunk, the dense lower-triangular Toeplitz block of ``κ[:b]`` (exact zeros above the diagonal);
* each chunk's end state ``s_q(c) = Σ_a λ_q^(b−1−a) x[cb + a]`` (one GEMM), carried to later chunks by the
  strictly lower-triangular ``D_q[c, c'] = λ_q^(b(c−1−c'))`` (one GEMM over chunks: O((n/b)²·r), i.e. (n/b²)·r
  multiply-adds per value: 4 at 1,024 tokens, 64 at 16,384, against 2b + 4r ≈ 190 for the rest), and read
  out as ``y[cb + a] += Σ_q w_q λ_q^(a+1) h_q(c)``.

No FFT: a chunk's output reads earlier chunks only through exact zeros of ``D`` and of the leaf block, so
``y_i`` does not move when a later finite input does and the future gets exactly zero gradient (checked
below before timing). Forward+backward on (8, n, 4 heads, 16 channels), the mixer benchmark's shape,
against: the symmetric rank-16 mixer's ``mix`` (C = 64), the exactly causal blocked FFT
(:func:`gridmix.causal.causal_mode_product`, full-length kernel) and causal SDPA (flash kernel). Interleaved
rounds (``bench_common.interleaved``); ratios to the symmetric mixer are medians of per-round ratios.
Writes ``DIR/bench_semiseparable.json`` and prints the table.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from bench_common import length_sweep_main
from torch.nn.attention import SDPBackend, sdpa_kernel

from gridmix import ConcentrationMixer, Grid
from gridmix.causal import causal_mode_product, causal_mode_product_dense

BATCH, HEADS, HEAD_DIM, RANK = 8, 4, 16, 16
TERMS, CHUNK = 16, 64  # exponentials per head, chunk length
NAMES = ["semiseparable", "blocked_fft", "symmetric_mix", "sdpa_causal"]


def semiseparable_kernel(decay_logits: torch.Tensor, weight_logits: torch.Tensor, gain_logit: torch.Tensor,
                         n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(λ, w)``, each (h, r), with ``‖κ_h‖₁ = sigmoid(ρ_h)`` over ``n`` lags exactly."""
    lam = torch.sigmoid(decay_logits)  # (h, r) in (0, 1)
    mass = -torch.expm1(n * torch.log(lam)) / (1 - lam)  # (h, r): Σ_{k<n} λ^k
    weights = torch.sigmoid(gain_logit)[:, None] * torch.softmax(weight_logits, dim=-1) / mass  # (h, r)
    return lam, weights


def semiseparable_dense_kernel(lam: torch.Tensor, weights: torch.Tensor, n: int) -> torch.Tensor:
    """``κ`` (h, n) from ``(λ, w)``: the reference the scan must equal."""
    lags = torch.arange(n, dtype=lam.dtype)
    return (weights[..., None] * lam[..., None] ** lags).sum(1)  # (h, n)


def semiseparable_product(x: torch.Tensor, lam: torch.Tensor, weights: torch.Tensor,
                          chunk: int = CHUNK) -> torch.Tensor:
    """``y[:, i] = Σ_{j≤i} κ[i − j] x[:, j]`` along axis 1 of (B, n, h, c), by the chunked scan (module docstring)."""
    B, n, h, c = x.shape
    b = min(chunk, n)
    length = -(-n // b) * b
    t = F.pad(x.permute(2, 0, 3, 1), (0, length - n))  # (h, B, c, L)
    chunks = length // b
    blocks = t.reshape(h, B * c, chunks, b)  # (h, R, C, b)
    offsets = torch.arange(b, dtype=x.dtype)
    kappa = semiseparable_dense_kernel(lam, weights, b)  # (h, b)
    lags = torch.arange(b)[:, None] - torch.arange(b)[None, :]  # (b, b): i − j
    leaf = torch.where(lags >= 0, kappa[:, lags.clamp(min=0)], 0.0)  # (h, b, b): [i, j] = κ[i − j], i ≥ j
    y = blocks @ leaf.mT[:, None]  # (h, R, C, b)
    into_state = lam[:, None, :] ** (b - 1 - offsets)[None, :, None]  # (h, b, r): λ^(b−1−a)
    states = blocks @ into_state[:, None]  # (h, R, C, r): s_q(c)
    steps = torch.arange(chunks, dtype=x.dtype)
    gap = steps[:, None] - steps[None, :] - 1  # (C, C): c − 1 − c'
    carry = torch.where(gap >= 0, lam[:, :, None, None] ** (b * gap.clamp(min=0)), 0.0)  # (h, r, C, C)
    carried = torch.einsum("hqcd,hrdq->hrcq", carry, states)  # (h, R, C, r): h_q(c)
    out_of_state = weights[:, :, None] * lam[:, :, None] ** (offsets + 1)  # (h, r, b): w_q λ_q^(a+1)
    y = y + carried @ out_of_state[:, None]  # (h, R, C, b)
    return y.reshape(h, B, c, length)[..., :n].permute(1, 3, 0, 2)  # (B, n, h, c)


def check(n: int = 300) -> None:
    """Float64: equals the dense reference, and the future moves nothing and gets exactly zero gradient."""
    torch.manual_seed(0)
    x = torch.randn(2, n, HEADS, 3, dtype=torch.float64, requires_grad=True)
    params = [torch.randn(HEADS, TERMS, dtype=torch.float64) + 2, torch.randn(HEADS, TERMS, dtype=torch.float64),
              torch.randn(HEADS, dtype=torch.float64)]
    lam, weights = semiseparable_kernel(*params, n)
    kernel = semiseparable_dense_kernel(lam, weights, n)
    assert torch.allclose(kernel.abs().sum(1), torch.sigmoid(params[2]), rtol=1e-12), "ℓ1 cap"
    out = semiseparable_product(x, lam, weights, chunk=16)
    torch.testing.assert_close(out, causal_mode_product_dense(x, kernel, 1), rtol=1e-10, atol=1e-12)
    t = n // 2
    grad = torch.autograd.grad(out[:, : t + 1].sum(), x)[0]
    moved = semiseparable_product(torch.cat([x[:, : t + 1], 1e3 * torch.randn_like(x[:, t + 1 :])], 1), lam, weights,
                                  chunk=16)
    assert grad[:, t + 1 :].abs().max() == 0 and torch.equal(moved[:, : t + 1], out[:, : t + 1]), "exact causality"


def cases(n: int) -> dict:
    """Name → forward+backward step on fresh tensors of length n."""
    torch.manual_seed(0)
    x = torch.randn(BATCH, n, HEADS, HEAD_DIM, requires_grad=True)  # (B, n, h, c)
    grad = torch.randn(BATCH, n, HEADS, HEAD_DIM)
    params = [(torch.randn(HEADS, TERMS) + 2).requires_grad_(), torch.randn(HEADS, TERMS, requires_grad=True),
              torch.randn(HEADS, requires_grad=True)]
    kernel = torch.rand(HEADS, n, requires_grad=True)  # (h, n): the full-length kernel of CausalFactor
    mixer = ConcentrationMixer(HEADS * HEAD_DIM, Grid((n,)), num_heads=HEADS, rank=RANK)
    v = torch.randn(BATCH, n, HEADS * HEAD_DIM, requires_grad=True)  # (B, n, C)
    q, k, w = (torch.randn(BATCH, HEADS, n, HEAD_DIM, requires_grad=True) for _ in range(3))  # (B, h, n, c)

    def semiseparable():
        y = semiseparable_product(x, *semiseparable_kernel(*params, n))
        return torch.autograd.grad(y, (x, *params), grad)

    def sdpa():
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            y = F.scaled_dot_product_attention(q, k, w, is_causal=True)
        return torch.autograd.grad(y, (q, k, w), grad.transpose(1, 2))

    return dict(semiseparable=semiseparable,
                blocked_fft=lambda: torch.autograd.grad(causal_mode_product(x, kernel, 1), (x, kernel), grad),
                symmetric_mix=lambda: torch.autograd.grad(mixer.mix(v), (v, *mixer.parameters()), grad.flatten(2),
                                                  allow_unused=True),  # W_v, W_o: not part of mix
                sdpa_causal=sdpa)


def main() -> None:
    length_sweep_main(__doc__.split("\n")[0], "bench_semiseparable.json", cases, names=NAMES,
                      reference="symmetric_mix", repeats=5, record=dict(terms=TERMS, chunk=CHUNK), before=check)


if __name__ == "__main__":
    main()
