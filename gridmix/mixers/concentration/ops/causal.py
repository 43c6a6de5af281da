"""Causal Toeplitz mode products: a fast, exactly causal form and the dense reference it must equal.

A causal factor (:class:`gridmix.mixers.concentration.factors.CausalFactor`) is the lower-triangular
Toeplitz matrix ``T[i, j] = κ_h[i − j]`` per head. :func:`causal_mode_product_dense` applies it as
the dense ``n×n`` matrix (O(n²), the reference, as S4 keeps ``s4d.py`` beside ``s4.py``);
:func:`causal_mode_product` applies the same operator in O(n log² n) and is what the mixer uses.

Why not one FFT convolution of length 2n (O(n log n))? Its rounding spreads every input over every
output: the gradient of ``y_i`` with respect to a future ``x_j`` is ~1e-8·‖x‖ in float32 instead of
zero, and the forward value of ``y_i`` moves by as much when the future changes. The form here keeps
causality exact, by construction:

* the sequence is cut into leaf blocks of ``LEAF`` positions (padded with zeros at the end to
  ``LEAF · 2^k``); inside a leaf the dense lower-triangular block acts (exact zeros above the
  diagonal);
* in stages from the top, every block of ``P·s`` positions is cut into ``P`` sub-blocks of ``s``
  (``P ≤ BRANCH``, a power of two) and every sub-block ``j`` gets the contribution of every earlier
  one ``i < j``, ``y[js + a] += Σ_b κ[(j − i)s + a − b] x[is + b]`` — a full Toeplitz block, applied
  in the frequency domain of length ``2s``: one rfft per earlier sub-block, one irfft per later one,
  and the kernel windows' spectra computed once per stage. ``BRANCH = 2`` is one stage per doubling
  (``log₂(n / LEAF)`` stages).

Every pair ``j < i`` in different leaves is separated at exactly one stage, where they first fall in
different sub-blocks of one block, so the sum is ``T x``. Each transform reads only inputs that lie
wholly before the outputs it writes (sub-blocks ``0..P−2`` are transformed, ``1..P−1`` written):
``y_i`` is computed from ``x_{≤i}`` alone (bit-for-bit independent of the future) and the
hand-written backward sends ``x_j`` exactly zero from every ``y_i``, ``i < j`` (a block whose output
gradient is all zero transforms to exact zeros). Cost per stage: one rfft/irfft pair over (at most)
the whole tensor, so ``O(n log n)`` per stage.

Speed: rows (batch, other axes, channels) are processed in chunks of about ``CHUNK`` values, all
stages per chunk, so the intermediates stay in cache and the allocator reuses them. Transforming the
whole tensor per level instead made every level stream it from memory and allocate fresh tensors of
> 32 MB (glibc maps those anew: a page fault per 4 KiB), which made the bare product at 16,384
tokens 5.5x slower than at 8,192 (docs/mixer.md, "Causal axes").

Everything here runs in at least float32, with autocast off inside (FFTs in half precision lose the
certificate's meaning, and cuFFT takes only powers of two in float16); the result comes back in the
input's dtype.

Shape legend:
    h: heads, c: channels per head, n: causal axis length, m: kernel length (≤ n),
    R: every other dimension folded (batch, other axes, channels), L: n padded to ``leaf · 2^k``,
    Rc: rows in a chunk, Q: blocks of ``P·s`` at a stage, P: sub-blocks per block,
    s: a sub-block's length, F = s + 1: rfft bins of a length-``2s`` frame
"""

from __future__ import annotations

import torch

LEAF = 128  # dense leaf length (docs/mixer.md, benchmarks/bench_causal.py)
BRANCH = 4  # most sub-blocks per stage
CHUNK = 1 << 20  # values of the (h, R, L) tensor per chunk of rows (4 MiB in float32)


def causal_toeplitz(kernel: torch.Tensor, length: int) -> torch.Tensor:
    """Dense ``T[h, i, j] = κ_h[i − j]`` for ``0 ≤ i − j < m``, else 0: (h, n, n) from ``kernel``
    (h, m).

    Sliding windows of one padded vector ``u = [0 (n−m), κ reversed, 0 (n−1)]``: window ``i'`` is
    row ``n−1−i'`` of ``T``, so the backward is ``unfold``'s overlap-add, not a scatter over n²
    indices.
    """
    heads, m = kernel.shape
    if m > length:
        raise ValueError(f"kernel length {m} > axis length {length}; expected m <= n")
    u = torch.cat(
        [kernel.new_zeros(heads, length - m), kernel.flip(-1), kernel.new_zeros(heads, length - 1)],
        dim=-1,
    )
    # (h, n, n): [i, j] = u[n−1−i+j] = κ[i−j] for 0 ≤ i−j < m
    return u.unfold(-1, length, 1).flip(-2)


def check_causal_axis(x: torch.Tensor, kernel: torch.Tensor, axis: int) -> int:
    """The axis as a non-negative index, after checking ``x`` (…, n at axis, …, h, c) against
    ``kernel`` (h, m)."""
    if not 0 <= axis < x.dim() - 2:
        raise ValueError(
            f"axis={axis} must index a grid dimension of x {tuple(x.shape)} (the last two are h, c)"
        )
    if kernel.dim() != 2 or kernel.shape[0] != x.shape[-2] or kernel.shape[1] > x.shape[axis]:
        raise ValueError(
            f"kernel {tuple(kernel.shape)} must be (h={x.shape[-2]}, m <= {x.shape[axis]}) for x "
            f"{tuple(x.shape)} along axis {axis}"
        )
    return axis


def causal_mode_product_dense(x: torch.Tensor, kernel: torch.Tensor, axis: int) -> torch.Tensor:
    """The reference: ``y[…, i, …, h, :] = Σ_j T_h[i, j] x[…, j, …, h, :]`` with the dense Toeplitz
    ``T``."""
    check_causal_axis(x, kernel, axis)
    matrices = causal_toeplitz(kernel.to(x.dtype), x.shape[axis])  # (h, n, n)
    return torch.einsum("hij,...jhc->...ihc", matrices, x.movedim(axis, -3)).movedim(-3, axis)


def _padded_length(n: int, leaf: int) -> tuple[int, int]:
    """``(b, L)``: the leaf length actually used (≤ n rounded up to a power of two) and ``L = b ·
    2^k ≥ n``."""
    b = min(leaf, 1 << (n - 1).bit_length())
    length = b
    while length < n:
        length *= 2
    return b, length


def _stages(length: int, leaf: int, branch: int) -> list[tuple[int, int]]:
    """``[(s, P), …]`` from the top: blocks of ``P·s`` cut into ``P`` sub-blocks of ``s``, down to
    the leaves.

    ``log₂(L / leaf)`` is split into as few stages as ``P ≤ branch`` allows, as evenly as possible
    (``P`` a power of two); ``branch=2`` gives one stage per doubling (the level-by-level form).
    """
    levels, most = (length // leaf).bit_length() - 1, max(1, branch.bit_length() - 1)
    stages, size = [], length
    while levels > 0:
        step = -(-levels // -(-levels // most))  # ceil(levels / number of stages still needed)
        size >>= step
        stages.append((size, 1 << step))
        levels -= step
    return stages


def _flip_sign(s: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """``(−1)^k`` for the ``s + 1`` bins of a length-``2s`` rfft: a shift by ``s`` positions,
    exactly."""
    return 1 - 2 * (torch.arange(s + 1, device=device) % 2).to(dtype)  # (s + 1,)


class _CausalBlocks(torch.autograd.Function):
    """:func:`causal_mode_product` on the padded tensor ``t`` (h, R, L): leaves and stages, chunk of
    rows by chunk.

    Stage ``(s, P)`` cuts every block of ``P·s`` positions into ``P`` sub-blocks and adds to
    sub-block ``j`` the contribution of every earlier sub-block ``i < j``: ``y_j += irfft(X_i ·
    G_{j−i})[s:]`` with ``X_i`` the length-``2s`` rfft of sub-block ``i`` and ``G_d`` that of the
    kernel window ``κ[(d−1)s : (d+1)s]``. Only sub-blocks ``0..P−2`` are transformed forward and
    ``1..P−1`` back: an output never reads a later input, not even multiplied by zero. Backward: the
    adjoint correlation ``x̄_i = irfft(Σ_{j>i} Ḡ_j · conj(G_{j−i}))[:s]`` (``Ḡ_j`` the rfft of the
    output gradient placed at ``s..2s−1``: its rfft at ``0..s−1`` times ``(−1)^k``) and the kernel
    gradient ``κ̄[(d−1)s : (d+1)s] += irfft(Σ Ḡ_{i+d} · conj(X_i))``.

    Rows are processed in chunks of about ``CHUNK`` values, every stage and the leaves per chunk:
    the intermediates stay in cache and are reused by the allocator instead of paging in fresh
    memory per level. Within a head a chunk is contiguous, so the leaves are one GEMM per head (rows
    × leaf blocks, b) @ (b, b).
    """

    @staticmethod
    def forward(
        ctx, t: torch.Tensor, kappa: torch.Tensor, leaf: int, stages: list[tuple[int, int]]
    ) -> torch.Tensor:
        heads, rows, length = t.shape  # (h, R, L)
        # (h, b, b): x_block @ Tᵀ
        leaf_matrices = causal_toeplitz(kappa[:, :leaf], leaf).mT.contiguous()
        filters = [
            torch.fft.rfft(kappa[:, : p * s].unfold(-1, 2 * s, s), n=2 * s) for s, p in stages
        ]  # (h, P−1, s+1)
        y = torch.empty_like(t)  # (h, R, L)
        step = _chunk_rows(heads, length)
        for start in range(0, rows, step):
            tc = t[:, start : start + step]  # (h, Rc, L)
            yc = torch.bmm(tc.reshape(heads, -1, leaf), leaf_matrices).view(tc.shape)  # (h, Rc, L)
            for (s, p), filt in zip(stages, filters):
                blocks = tc.view(heads, -1, length // (p * s), p, s)  # (h, Rc, Q, P, s)
                # (h, Rc, Q, P−1, s+1): sub-blocks 0..P−2
                spectra = torch.fft.rfft(blocks[..., : p - 1, :], n=2 * s)
                mixed = _causal_sum(spectra, filt)  # (h, Rc, Q, P−1, s+1): into sub-blocks 1..P−1
                yc.view(blocks.shape)[..., 1:, :] += torch.fft.irfft(mixed, n=2 * s)[..., s:]
            y[:, start : start + step] = yc
        ctx.save_for_backward(t, kappa, leaf_matrices, *filters)
        ctx.leaf, ctx.stages = leaf, stages
        return y

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        t, kappa, leaf_matrices, *filters = ctx.saved_tensors
        heads, rows, length = t.shape
        leaf, stages = ctx.leaf, ctx.stages
        want_t, want_kappa = ctx.needs_input_grad[:2]
        leaf_matrices = leaf_matrices.mT.contiguous()  # (h, b, b): the forward's, untransposed
        signs = [_flip_sign(s, t.device, t.dtype) for s, _ in stages]  # (s+1,) per stage
        adjoints = [sign * f.conj() for sign, f in zip(signs, filters)]  # (h, P−1, s+1)
        grad_t = torch.empty_like(t) if want_t else None
        leaf_outer = t.new_zeros(heads, leaf, leaf)  # Σ ḡ_i x_j over all leaf blocks: (h, b, b)
        # Σ rfft(ḡ_j) conj(X_{j−d}): (h, P−1, s+1) per stage
        cross = [f.new_zeros(f.shape) for f in filters]
        step = _chunk_rows(heads, length)
        for start in range(0, rows, step):
            gc = grad[:, start : start + step].contiguous()  # (h, Rc, L)
            tc = t[:, start : start + step]
            if want_t:
                xc = torch.bmm(gc.view(heads, -1, leaf), leaf_matrices).view(gc.shape)  # (h, Rc, L)
            if want_kappa:
                # (h, b, b)
                leaf_outer += torch.bmm(gc.view(heads, -1, leaf).mT, tc.reshape(heads, -1, leaf))
            for (s, p), adjoint, acc in zip(stages, adjoints, cross):
                shape = (heads, -1, length // (p * s), p, s)  # (h, Rc, Q, P, s)
                # (h, Rc, Q, P−1, s+1): ḡ, sub-blocks 1..P−1
                out = torch.fft.rfft(gc.view(shape)[..., 1:, :], n=2 * s)
                if want_t:
                    # (h, Rc, Q, P−1, 2s)
                    back = torch.fft.irfft(_anticausal_sum(out, adjoint), n=2 * s)
                    xc.view(shape)[..., : p - 1, :] += back[..., :s]  # into sub-blocks 0..P−2
                if want_kappa:
                    # (h, Rc, Q, P−1, s+1)
                    spectra = torch.fft.rfft(tc.view(shape)[..., : p - 1, :], n=2 * s)
                    for d in range(1, p):
                        products = torch.linalg.vecdot(
                            spectra[..., : p - d, :], out[..., d - 1 :, :], dim=1
                        )
                        # Σ over rows, blocks, sub-blocks: (h, s+1)
                        acc[:, d - 1] += products.sum((1, 2))
            if want_t:
                grad_t[:, start : start + step] = xc
        grad_kappa = None
        if want_kappa:
            grad_kappa = torch.zeros_like(kappa)  # (h, L)
            grad_kappa[:, :leaf] = _lower_diagonal_sums(leaf_outer)
            for (s, p), acc, sign in zip(stages, cross, signs):
                windows = torch.fft.irfft(acc * sign, n=2 * s)  # (h, P−1, 2s)
                for d in range(1, p):
                    grad_kappa[:, (d - 1) * s : (d + 1) * s] += windows[:, d - 1]
        return grad_t, grad_kappa, None, None


def _lower_diagonal_sums(matrices: torch.Tensor) -> torch.Tensor:
    """``out[:, k] = Σ_{i − j = k} M[:, i, j]`` for ``k = 0..b−1``: (h, b) from (h, b, b), the
    adjoint of :func:`causal_toeplitz` on one leaf.

    Rows padded to ``2b − 1`` and read back ``2b`` wide put ``M[i, j]`` in column ``(j − i) mod
    2b``.
    """
    heads, b, _ = matrices.shape
    flat = torch.nn.functional.pad(
        torch.nn.functional.pad(matrices, (0, b - 1)).reshape(heads, -1), (0, b)
    )
    sums = flat.view(heads, b, 2 * b).sum(1)  # (h, 2b): column c holds the lags j − i ≡ c (mod 2b)
    # (h, b): column −k mod 2b for k = 0..b−1, i.e. 0, 2b−1, 2b−2, …, b+1
    return torch.roll(sums.flip(-1), 1, dims=-1)[:, :b]


def _chunk_rows(heads: int, length: int) -> int:
    """Rows per chunk: about ``CHUNK`` values of the (h, R, L) tensor, at least one row."""
    return max(1, CHUNK // (heads * length))


def _causal_sum(spectra: torch.Tensor, filters: torch.Tensor) -> torch.Tensor:
    """``out_j = Σ_{i<j} X_i · G_{j−i}`` for ``j = 1..P−1``: (h, Rc, Q, P−1, F) from ``X_{0..P−2}``
    and (h, P−1, F)."""
    parts = spectra.shape[-2] + 1
    out = spectra * filters[:, None, None, :1]  # d = 1: X_{j−1} G_1
    for d in range(2, parts):
        out[..., d - 1 :, :] += spectra[..., : parts - d, :] * filters[:, None, None, d - 1 : d]
    return out


def _anticausal_sum(grads: torch.Tensor, adjoints: torch.Tensor) -> torch.Tensor:
    """``out_i = Σ_{j>i} Ḡ_j · H_{j−i}`` for ``i = 0..P−2``: (h, Rc, Q, P−1, F) from ``Ḡ_{1..P−1}``
    and (h, P−1, F)."""
    parts = grads.shape[-2] + 1
    out = grads * adjoints[:, None, None, :1]  # d = 1: Ḡ_{i+1} H_1
    for d in range(2, parts):
        out[..., : parts - d, :] += grads[..., d - 1 :, :] * adjoints[:, None, None, d - 1 : d]
    return out


def causal_mode_product(
    x: torch.Tensor, kernel: torch.Tensor, axis: int, *, leaf: int = LEAF, branch: int = BRANCH
) -> torch.Tensor:
    """``causal_mode_product_dense(x, kernel, axis)`` in O(n log² n), exactly causal (module
    docstring).

    ``x``: (…, n at ``axis``, …, h, c); ``kernel``: (h, m), m ≤ n. Returns ``x``'s shape and dtype.
    ``leaf``: the dense block length; ``branch``: the most sub-blocks per stage (a power of two ≥
    2).
    """
    check_causal_axis(x, kernel, axis)
    if leaf < 1 or branch < 2 or branch & (branch - 1):
        raise ValueError(
            f"leaf={leaf}, branch={branch}; expected a positive leaf and a power of two branch >= 2"
        )
    work = torch.promote_types(x.dtype, torch.float32)
    n, heads = x.shape[axis], x.shape[-2]
    b, length = _padded_length(n, leaf)
    with torch.autocast(x.device.type, enabled=False):
        # (h, …, c, n): heads first, the axis last
        moved = x.to(work).movedim(axis, -1).movedim(-3, 0)
        # (h, R, L): zeros after the end
        t = torch.nn.functional.pad(moved, (0, length - n)).reshape(heads, -1, length)
        kappa = torch.nn.functional.pad(kernel.to(work), (0, length - kernel.shape[1]))  # (h, L)
        y = _CausalBlocks.apply(t, kappa, b, _stages(length, b, branch))  # (h, R, L)
        y = y[..., :n].view(moved.shape)  # (h, …, c, n)
        return y.movedim(0, -3).movedim(-1, axis).to(x.dtype)  # (…, n, …, h, c)
