"""Mode products: how the mixer's factors act on one grid axis of a (B, *grid, h, c) tensor without copies.

The Tucker form of the mixer (DESIGN.md section 2) projects each symmetric axis onto its basis,
``x ×_k U_kᵀ`` (n_k → r_k), and later expands it back, ``x ×_k U_k``. :func:`project` and :func:`expand`
run a whole chain of such mode products as one autograd node whose backward walks the chain in
reverse with two GEMMs per axis (input and basis gradient). Per-node autograd and view bookkeeping
would otherwise cost about as much as the small GEMMs on short axes.

A mode product views ``x`` as ``(P, n, S)`` (P: the dimensions before the axis, S: those after it, heads
and channels included), so every contraction is a batched GEMM on the tensor as it lies in memory.

Shape legend:
    P: product of the dimensions before the contracted axis, S: product of those after it
    n: axis length, r: rank (basis columns), h: heads, c: channels per head
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch


def _mode_gemm(x: torch.Tensor, matrix: torch.Tensor, axis: int) -> torch.Tensor:
    """``out[.., o, ..] = Σ_i matrix[o, i] x[.., i, ..]`` along ``axis``: one batched GEMM on a (P, n, S) view."""
    shape = x.shape
    x3 = x.reshape(math.prod(shape[:axis]), shape[axis], -1)  # (P, n, S)
    # bmm on a stride-0 expand: torch.matmul(2-D, 3-D) would fold through a transposed copy of x3
    out = torch.bmm(matrix.expand(x3.shape[0], -1, -1), x3)  # (P, o, S)
    return out.view(*shape[:axis], matrix.shape[0], *shape[axis + 1 :])


def _basis_gemm(long: torch.Tensor, short: torch.Tensor, axis: int) -> torch.Tensor:
    """``Σ_{p,s} long[p, i, s] · short[p, j, s]`` along ``axis``: (n, r), the gradient of a shared basis.

    ``long`` has the axis at length n, ``short`` at rank r. The GEMM runs as ``short @ longᵀ`` (an
    r-row left operand, measured about 20% faster for the small GEMMs of a short axis) and is transposed.
    """
    p = math.prod(long.shape[:axis])
    long3 = long.reshape(p, long.shape[axis], -1)  # (P, n, S)
    short3 = short.reshape(p, short.shape[axis], -1)  # (P, r, S)
    return torch.bmm(short3, long3.transpose(1, 2)).sum(0).t()  # (n, r)


class _Chain(torch.autograd.Function):
    """``x ×_{a_1} M_1 ×_{a_2} M_2 …``, ``M_k = U_kᵀ`` (``project``) or ``U_k`` (``expand``), ``U_k`` (n_k, r_k)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, axes: tuple[int, ...], project: bool, *bases: torch.Tensor) -> torch.Tensor:
        inputs = []
        for axis, basis in zip(axes, bases):
            inputs.append(x)
            x = _mode_gemm(x, basis.t() if project else basis, axis)
        ctx.axes, ctx.project = axes, project
        ctx.save_for_backward(*inputs, *bases)
        return x

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        count = len(ctx.axes)
        inputs, bases = ctx.saved_tensors[:count], ctx.saved_tensors[count:]
        grad_bases: list[torch.Tensor | None] = [None] * count
        for k in reversed(range(count)):
            axis, basis, x = ctx.axes[k], bases[k], inputs[k]
            if ctx.needs_input_grad[3 + k]:
                # project: out = Uᵀx, so ∂U = Σ x ⊗ grad; expand: out = U x, so ∂U = Σ grad ⊗ x
                grad_bases[k] = _basis_gemm(x, grad, axis) if ctx.project else _basis_gemm(grad, x, axis)
            if k > 0 or ctx.needs_input_grad[0]:
                grad = _mode_gemm(grad, basis if ctx.project else basis.t(), axis)
            else:
                grad = None
        return grad, None, None, *grad_bases


def project(x: torch.Tensor, bases: Sequence[torch.Tensor], axes: Sequence[int]) -> torch.Tensor:
    """Project ``x`` onto ``bases[k]`` (n_k, r_k) along ``axes[k]`` in turn: each axis n_k → r_k."""
    return _Chain.apply(x.contiguous(), tuple(axes), True, *bases)


def expand(x: torch.Tensor, bases: Sequence[torch.Tensor], axes: Sequence[int]) -> torch.Tensor:
    """Expand ``x`` from ``bases[k]`` (n_k, r_k) along ``axes[k]`` in turn: each axis r_k → n_k."""
    return _Chain.apply(x.contiguous(), tuple(axes), False, *bases)


def mode_product_per_head(x: torch.Tensor, matrices: torch.Tensor, axis: int) -> torch.Tensor:
    """Contract ``axis`` of ``x`` (..., h, c) with one matrix per head, ``matrices`` (h, out, in)."""
    shape = x.shape  # (B, ..., n, ..., h, c)
    heads, head_dim, out_len = shape[-2], shape[-1], matrices.shape[1]
    prefix, suffix = math.prod(shape[:axis]), math.prod(shape[axis + 1 : -2])
    x5 = x.reshape(prefix, shape[axis], suffix, heads, head_dim)  # (P, n, S, h, c)
    # One layout copy puts each head's columns behind its axis: one GEMM per head, (o, n) @ (n, P·S·c).
    # (A broadcast matmul over (h, P) would instead materialise the matrices P times.)
    cols = x5.permute(3, 1, 0, 2, 4).reshape(heads, shape[axis], -1)  # (h, n, P·S·c)
    out = torch.bmm(matrices, cols).view(heads, out_len, prefix, suffix, head_dim)  # (h, o, P, S, c)
    return out.permute(2, 1, 3, 0, 4).reshape(*shape[:axis], out_len, *shape[axis + 1 :])
