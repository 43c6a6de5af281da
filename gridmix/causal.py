"""Causal Toeplitz mode products: a fast, exactly causal form and the dense reference it must equal.

A causal factor (:class:`gridmix.factors.CausalFactor`) is the lower-triangular Toeplitz matrix
``T[i, j] = κ_h[i − j]`` per head. :func:`causal_mode_product_dense` applies it as the dense ``n×n``
matrix (O(n²), the reference, as S4 keeps ``s4d.py`` beside ``s4.py``); :func:`causal_mode_product`
applies the same operator in O(n log² n) and is what the mixer uses.

Why not one FFT convolution of length 2n (O(n log n))? Its rounding spreads every input over every
output: the gradient of ``y_i`` with respect to a future ``x_j`` is ~1e-8·‖x‖ in float32 instead of
zero, and the forward value of ``y_i`` moves by as much when the future changes. The form here keeps
causality exact, by construction:

* the sequence is cut into leaf blocks of ``LEAF`` positions (padded with zeros at the end to
  ``LEAF · 2^k``); inside a leaf the dense lower-triangular block acts (exact zeros above the diagonal);
* at each level ``s = LEAF, 2·LEAF, …`` every parent block of ``2s`` positions adds the contribution of
  its left half to its right half, ``y[s + a] += Σ_b κ[s + a − b] x[b]`` — a full Toeplitz block, applied
  by a length-``2s`` FFT of the left half only.

Every pair ``j < i`` in different leaves is separated at exactly one level, where ``j`` lies in the left
and ``i`` in the right half of one parent, so the sum is ``T x``. Each FFT reads only inputs that lie
wholly before the outputs it writes: ``y_i`` is computed from ``x_{≤i}`` alone (bit-for-bit independent of
the future) and autograd's gradient with respect to ``x_j`` gets exactly zero from every ``y_i``, ``i < j``
(a block whose output gradient is all zero transforms to exact zeros). Cost per level: one rfft/irfft
pair over the whole tensor, so ``O(n log n)`` per level and ``log₂(n / LEAF)`` levels.

Everything here runs in at least float32, with autocast off inside (FFTs in half precision lose the
certificate's meaning, and cuFFT takes only powers of two in float16); the result comes back in the
input's dtype.

Shape legend:
    h: heads, c: channels per head, n: causal axis length, m: kernel length (≤ n),
    R: every other dimension folded (batch, other axes, channels), L: n padded to ``leaf · 2^k``,
    P: parent blocks at a level, s: half a parent block
"""

from __future__ import annotations

import torch

LEAF = 256  # leaf length: 2.7x one plain FFT at 16,384 tokens, 3.6x for 64 (docs/mixer.md, benchmarks/bench_causal.py)


def causal_toeplitz(kernel: torch.Tensor, length: int) -> torch.Tensor:
    """Dense ``T[h, i, j] = κ_h[i − j]`` for ``0 ≤ i − j < m``, else 0: (h, n, n) from ``kernel`` (h, m).

    Sliding windows of one padded vector ``u = [0 (n−m), κ reversed, 0 (n−1)]``: window ``i'`` is row
    ``n−1−i'`` of ``T``, so the backward is ``unfold``'s overlap-add, not a scatter over n² indices.
    """
    heads, m = kernel.shape
    if m > length:
        raise ValueError(f"kernel length {m} > axis length {length}; expected m <= n")
    u = torch.cat([kernel.new_zeros(heads, length - m), kernel.flip(-1), kernel.new_zeros(heads, length - 1)], dim=-1)
    return u.unfold(-1, length, 1).flip(-2)  # (h, n, n): [i, j] = u[n−1−i+j] = κ[i−j] for 0 ≤ i−j < m


def _check(x: torch.Tensor, kernel: torch.Tensor, axis: int) -> int:
    """The axis as a non-negative index, after checking ``x`` (…, n at axis, …, h, c) against ``kernel`` (h, m)."""
    if not 0 <= axis < x.dim() - 2:
        raise ValueError(f"axis={axis} must index a grid dimension of x {tuple(x.shape)} (the last two are h, c)")
    if kernel.dim() != 2 or kernel.shape[0] != x.shape[-2] or kernel.shape[1] > x.shape[axis]:
        raise ValueError(f"kernel {tuple(kernel.shape)} must be (h={x.shape[-2]}, m <= {x.shape[axis]}) for x "
                         f"{tuple(x.shape)} along axis {axis}")
    return axis


def causal_mode_product_dense(x: torch.Tensor, kernel: torch.Tensor, axis: int) -> torch.Tensor:
    """The reference: ``y[…, i, …, h, :] = Σ_j T_h[i, j] x[…, j, …, h, :]`` with the dense Toeplitz ``T``."""
    _check(x, kernel, axis)
    matrices = causal_toeplitz(kernel.to(x.dtype), x.shape[axis])  # (h, n, n)
    return torch.einsum("hij,...jhc->...ihc", matrices, x.movedim(axis, -3)).movedim(-3, axis)


def _padded_length(n: int, leaf: int) -> tuple[int, int]:
    """``(b, L)``: the leaf length actually used (≤ n rounded up to a power of two) and ``L = b · 2^k ≥ n``."""
    b = min(leaf, 1 << (n - 1).bit_length())
    length = b
    while length < n:
        length *= 2
    return b, length


class _CrossBlocks(torch.autograd.Function):
    """The levels of :func:`causal_mode_product`: ``y[s + a] = Σ_b κ[s + a − b] x[b]`` per parent block of 2s.

    One node with a hand-written backward (autograd through ``rfft`` would pad and run complex-to-complex
    transforms, and allocate a zero half per level): per level, forward one rfft of the left halves and
    one irfft; backward the adjoint correlation ``x̄ = irfft(rfft(ḡ) · conj(K̂))[:s]`` with ``ḡ`` the output
    gradient of the right halves (zero-padded in front), and the kernel gradient
    ``κ̄[:2s] += irfft(Σ_{R,P} rfft(ḡ) · conj(X̂))`` (X̂ recomputed, not stored: one more rfft instead of
    a complex copy of the input per level). A block whose output gradient is zero gives exact zeros.
    """

    @staticmethod
    def forward(ctx, t: torch.Tensor, kappa: torch.Tensor, leaf: int) -> torch.Tensor:
        heads, rows, length = t.shape  # (h, R, L), L = leaf · 2^k
        y = t.new_zeros(heads, rows, length)
        s = leaf
        while s < length:
            parents = t.view(heads, rows, length // (2 * s), 2, s)  # (h, R, P, 2, s)
            filt = torch.fft.rfft(kappa[:, : 2 * s], n=2 * s)[:, None, None]  # (h, 1, 1, s + 1)
            spectrum = torch.fft.rfft(parents[..., 0, :], n=2 * s)  # (h, R, P, s + 1): left halves only
            right = torch.fft.irfft(spectrum * filt, n=2 * s)[..., s:]  # (h, R, P, s): y[s + a], a < s
            y.view(heads, rows, length // (2 * s), 2, s)[..., 1, :] += right
            s *= 2
        ctx.save_for_backward(t, kappa)
        ctx.leaf = leaf
        return y

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        t, kappa = ctx.saved_tensors
        heads, rows, length = t.shape
        grad_t = torch.zeros_like(t) if ctx.needs_input_grad[0] else None
        grad_kappa = torch.zeros_like(kappa) if ctx.needs_input_grad[1] else None
        s = ctx.leaf
        while s < length:
            shape = (heads, rows, length // (2 * s), 2, s)  # (h, R, P, 2, s)
            # the right halves' gradient at positions s..2s−1 of a length-2s frame: rfft of [0 (s), ḡ]
            out = torch.fft.rfft(grad.reshape(shape)[..., 1, :], n=2 * s)  # (h, R, P, s + 1) of ḡ at 0..s−1
            # moved to s..2s−1: a shift by s multiplies bin k by e^{−2πiks/2s} = (−1)^k, exactly
            out = out * (1 - 2 * (torch.arange(s + 1, device=t.device) % 2)).to(t.dtype)
            if grad_t is not None:
                filt = torch.fft.rfft(kappa[:, : 2 * s], n=2 * s)[:, None, None]  # (h, 1, 1, s + 1)
                grad_t.view(shape)[..., 0, :] += torch.fft.irfft(out * filt.conj(), n=2 * s)[..., :s]
            if grad_kappa is not None:
                spectrum = torch.fft.rfft(t.view(shape)[..., 0, :], n=2 * s)  # (h, R, P, s + 1)
                cross = (out * spectrum.conj()).sum(dim=(1, 2))  # (h, s + 1)
                grad_kappa[:, : 2 * s] += torch.fft.irfft(cross, n=2 * s)
            s *= 2
        return grad_t, grad_kappa, None


def causal_mode_product(x: torch.Tensor, kernel: torch.Tensor, axis: int, *, leaf: int = LEAF) -> torch.Tensor:
    """``causal_mode_product_dense(x, kernel, axis)`` in O(n log² n), exactly causal (module docstring).

    ``x``: (…, n at ``axis``, …, h, c); ``kernel``: (h, m), m ≤ n. Returns ``x``'s shape and dtype.
    """
    _check(x, kernel, axis)
    if leaf < 1:
        raise ValueError(f"leaf={leaf}; expected a positive block length")
    work = torch.promote_types(x.dtype, torch.float32)
    n, heads = x.shape[axis], x.shape[-2]
    b, length = _padded_length(n, leaf)
    with torch.autocast(x.device.type, enabled=False):
        t = x.to(work).movedim(-2, 0).movedim(axis + 1, -1)  # (h, …, c, n): heads first, the axis last
        moved = t.shape
        t = torch.nn.functional.pad(t.reshape(heads, -1, n), (0, length - n))  # (h, R, L): zeros after the end
        kappa = kernel.to(work)
        kappa = torch.nn.functional.pad(kappa, (0, length - kappa.shape[1]))  # (h, L)
        rows = t.shape[1]
        leaves = t.view(heads, rows * (length // b), b)  # (h, R·L/b, b)
        y = torch.bmm(leaves, causal_toeplitz(kappa[:, :b], b).mT).view(heads, rows, length)  # (h, R, L)
        if length > b:
            y = y + _CrossBlocks.apply(t, kappa, b)
        y = y[..., :n].reshape(moved)  # (h, …, c, n)
        return y.movedim(-1, axis + 1).movedim(0, -2).to(x.dtype)  # (…, n, …, h, c)
