"""The Tucker form of the mixer as one autograd node: project each axis down, scale the core, expand
back.

The mixer's operator on its symmetric axes is ``⊗_k U_k diag(λ_k) U_kᵀ`` (docs/design.md section 2).
Applied in Tucker form it projects each axis onto its basis, ``x ×_k U_kᵀ`` (n_k → r_k), multiplies
the core by the per-head eigenvalues ``Π_k λ_k[h, ρ_k]``, and expands each axis back, ``x ×_k U_k``.
:func:`tucker` runs that chain (or its project-only / scale-and-expand halves, when dense per-head
factors must act on the core in between) as a single autograd node with a hand-written backward: two
GEMMs per mode product (input and basis gradient), and the eigenvalue gradients from one reduced
product and small batched GEMMs.
Per-node autograd bookkeeping, views and broadcast reductions would otherwise cost about as much as
the small GEMMs on short axes.

A mode product views ``x`` as ``(P, n, S)`` (P: the dimensions before the axis, S: those after it,
heads and channels included), so every contraction is a batched GEMM on the tensor as it lies in
memory.

Shape legend:
    P: product of the dimensions before the contracted axis, S: product of those after it
    n: axis length, r: rank (basis columns), h: heads, c: channels per head, k: index of a Tucker
    axis
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence

import torch

from gridmix.mixers.concentration.ops.tucker_native import (
    innermost_first_among_ties,
    native_applies,
    tucker_chain,
)


def _mode_gemm(x: torch.Tensor, matrix: torch.Tensor, axis: int) -> torch.Tensor:
    """``out[.., o, ..] = Σ_i matrix[o, i] x[.., i, ..]`` along ``axis``: one batched GEMM on a (P,
    n, S) view."""
    shape = x.shape
    x3 = x.reshape(math.prod(shape[:axis]), shape[axis], -1)  # (P, n, S)
    # bmm on a stride-0 expand: torch.matmul(2-D, 3-D) would fold through a transposed copy of x3
    out = torch.bmm(matrix.expand(x3.shape[0], -1, -1), x3)  # (P, o, S)
    return out.view(*shape[:axis], matrix.shape[0], *shape[axis + 1 :])


def _basis_products(
    long: torch.Tensor, short: torch.Tensor, axis: int, into: torch.Tensor | None = None
) -> torch.Tensor:
    """``Σ_s short[p, j, s] · long[p, i, s]`` along ``axis``, per ``p``: (P, r, n), added in place
    to ``into`` (the products of another pair of the same shapes) when given. Their sum over ``p``,
    transposed, is the gradient of a shared basis (n, r).

    ``long`` has the axis at length n, ``short`` at rank r. The GEMM runs as ``short @ longᵀ`` (an
    r-row left operand, measured about 20% faster for the small GEMMs of a short axis). A basis used
    to project and to expand gets both of its products in one (P, r, n) accumulator (``baddbmm``),
    and one sum.
    """
    p = math.prod(long.shape[:axis])
    long3 = long.reshape(p, long.shape[axis], -1)  # (P, n, S)
    short3 = short.reshape(p, short.shape[axis], -1)  # (P, r, S)
    if into is None:
        return torch.bmm(short3, long3.transpose(1, 2))  # (P, r, n)
    return into.baddbmm_(short3, long3.transpose(1, 2))


def _broadcast_eigenvalues(
    eigenvalues: Sequence[torch.Tensor], axes: Sequence[int], ndim: int
) -> list[torch.Tensor]:
    """Each ``λ_k`` (h, r_k) as (1, …, r_k at ``axes[k]``, …, h, 1) for a core of ``ndim`` dims (…,
    h, c)."""
    views = []
    for lam, axis in zip(eigenvalues, axes):
        shape = [1] * ndim
        shape[axis], shape[-2] = lam.shape[1], lam.shape[0]
        views.append(lam.t().reshape(shape))  # (r_k, h) in memory order → (…, r_k, …, h, 1)
    return views


def _scale(eigenvalues: Sequence[torch.Tensor], axes: Sequence[int], ndim: int) -> torch.Tensor:
    """``Π_k λ_k[h, ρ_k]`` broadcast over a core of ``ndim`` dims: (1, …, r_k at ``axes[k]``, …, h,
    1)."""
    return functools.reduce(operator.mul, _broadcast_eigenvalues(eigenvalues, axes, ndim))


def _outer(eigenvalues: Sequence[torch.Tensor]) -> torch.Tensor:
    """``Π_k λ_k`` over the given axes as a column per head: (h, Π r_k, 1), ρ_1 slowest."""
    head_count = eigenvalues[0].shape[0]
    outer = eigenvalues[0]  # (h, r_1)
    for lam in eigenvalues[1:]:
        outer = (outer[:, :, None] * lam[:, None, :]).reshape(head_count, -1)  # (h, R · r_k)
    return outer[:, :, None]


def _eigenvalue_grads(
    summed: torch.Tensor, eigenvalues: Sequence[torch.Tensor], needs: Sequence[bool]
) -> list[torch.Tensor | None]:
    """Per axis ``k`` where ``needs[k]``, ``∂λ_k[h, ρ_k] = Σ summed[h, ρ_1, …, ρ_d] Π_{j≠k}
    λ_j[h, ρ_j]`` (h, r_k), contiguous (its parameter's layout); ``summed`` is (h, r_1, …, r_d),
    contiguous. The axes after ``k`` go in one batched GEMM against their outer product, those
    before it in a second: at most two GEMMs and ``d − 2`` small products per axis."""
    head_count, ranks = summed.shape[0], [lam.shape[1] for lam in eigenvalues]
    grads: list[torch.Tensor | None] = []
    for k, need in enumerate(needs):
        if not need:
            grads.append(None)
            continue
        before, after = math.prod(ranks[:k]), math.prod(ranks[k + 1 :])
        g = summed.reshape(head_count, before * ranks[k], after)  # (h, R_before · r_k, R_after)
        if k + 1 < len(ranks):
            g = torch.bmm(g, _outer(eigenvalues[k + 1 :]))  # (h, R_before · r_k, 1)
        g = g.reshape(head_count, before, ranks[k])  # (h, R_before, r_k)
        if k > 0:
            g = torch.bmm(g.mT, _outer(eigenvalues[:k]))  # (h, r_k, 1)
        grads.append(g.reshape(head_count, ranks[k]))  # (h, r_k)
    return grads


class _Tucker(torch.autograd.Function):
    """``x ×_{a_1} U_1ᵀ ⋯ ×_{a_d} U_dᵀ`` (project), ``· Π_k λ_k`` (scale), ``×_{a_d} U_d ⋯ ×_{a_1}
    U_1`` (expand).

    Any of the three stages can be off; ``tensors`` is ``(U_1, …, U_d, λ_1, …, λ_d)`` with the λ
    only when scaling. The backward walks the stages in reverse: per expanded axis the basis
    gradient ``Σ grad ⊗ x`` and the input gradient ``U_kᵀ grad``; the eigenvalue gradients from one
    product ``grad · core`` reduced to (h, r_1, …, r_d) (:func:`_eigenvalue_grads`); per projected
    axis ``Σ x ⊗ grad`` and ``U_k grad``.
    """

    @staticmethod
    def forward(
        ctx,
        x: torch.Tensor,
        axes: tuple[int, ...],
        project: bool,
        expand: bool,
        *tensors: torch.Tensor,
    ):
        d = len(axes)
        bases, eigenvalues = tensors[:d], tensors[d:]
        project_inputs, expand_inputs = [], [None] * d
        if project:
            for axis, basis in zip(axes, bases):
                project_inputs.append(x)
                x = _mode_gemm(x, basis.t(), axis)  # n_k -> r_k
        core, scale = x, None
        if eigenvalues:
            scale = _scale(eigenvalues, axes, core.dim())  # (1, …, r_k, …, h, 1)
            x = core * scale  # (B, *core, h, c)
        if expand:
            for k in reversed(range(d)):
                expand_inputs[k] = x
                x = _mode_gemm(x, bases[k], axes[k])  # r_k -> n_k
        ctx.axes, ctx.project, ctx.expand, ctx.scaled = axes, project, expand, bool(eigenvalues)
        ctx.save_for_backward(
            *project_inputs,
            *(expand_inputs if expand else ()),
            *((core, scale) if eigenvalues else ()),
            *bases,
            *eigenvalues,
        )
        return x

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        # torch.compile traces backwards under the caller's autocast; this one must stay in the
        # forward's dtype
        with torch.autocast(grad.device.type, enabled=False):
            return _Tucker._backward(ctx, grad)

    @staticmethod
    def _backward(ctx, grad: torch.Tensor):
        axes, d = ctx.axes, len(ctx.axes)
        saved = list(ctx.saved_tensors)
        project_inputs = [saved.pop(0) for _ in range(d)] if ctx.project else []
        expand_inputs = [saved.pop(0) for _ in range(d)] if ctx.expand else []
        core, scale = (saved.pop(0), saved.pop(0)) if ctx.scaled else (None, None)
        bases, eigenvalues = saved[:d], saved[d:]
        # per basis, its (P, r, n) products (_basis_products), summed over P at the end
        products: list[torch.Tensor | None] = [None] * d
        needs_basis = ctx.needs_input_grad[4 : 4 + d]
        needs_input = ctx.needs_input_grad[0]
        if ctx.expand:
            # the expansion ran axes[d-1] … axes[0]; its backward runs axes[0] … axes[d-1]
            for k in range(d):
                if needs_basis[k]:
                    # out = U x: ∂U = Σ grad ⊗ x
                    products[k] = _basis_products(grad, expand_inputs[k], axes[k])
                grad = _mode_gemm(grad, bases[k].t(), axes[k])
        eigenvalue_grads: list[torch.Tensor | None] = []
        if ctx.scaled:
            needs_eigenvalues = ctx.needs_input_grad[4 + d :]
            eigenvalue_grads = [None] * d
            if any(needs_eigenvalues):
                # Σ over batch, dense axes and channels of grad · core, heads first: (h, r_1, …,
                # r_d) in the order of ``axes`` (a sum writes the dimensions it keeps in order)
                heads = core.dim() - 2
                rest = [i for i in range(core.dim()) if i not in (heads, *axes)]
                product = (grad * core).permute(heads, *axes, *rest)  # (h, r_1, …, r_d, …)
                summed = product.sum(dim=list(range(d + 1, core.dim())))  # (h, r_1, …, r_d)
                eigenvalue_grads = _eigenvalue_grads(summed, eigenvalues, needs_eigenvalues)
            grad = grad * scale
        if ctx.project:
            for k in reversed(range(d)):
                if needs_basis[k]:
                    # out = Uᵀ x: ∂U = Σ x ⊗ grad
                    products[k] = _basis_products(project_inputs[k], grad, axes[k], products[k])
                if k > 0 or needs_input:
                    grad = _mode_gemm(grad, bases[k], axes[k])
        basis_grads = [None if g is None else g.sum(0).t() for g in products]  # (n_k, r_k)
        return (grad if needs_input else None), None, None, None, *basis_grads, *eigenvalue_grads


def tucker(
    x: torch.Tensor,
    bases: Sequence[torch.Tensor],
    axes: Sequence[int],
    *,
    eigenvalues: Sequence[torch.Tensor] | None = None,
    project: bool = True,
    expand: bool = True,
) -> torch.Tensor:
    """``x`` (…, h, c) projected onto ``bases[k]`` (n_k, r_k) along ``axes[k]`` in turn, scaled,
    expanded back.

    ``project``: each axis n_k → r_k, in the order given. ``eigenvalues[k]`` (h, r_k): multiply the
    core by ``Π_k λ_k[h, ρ_k]`` (per head, broadcast over channels). ``expand``: each axis r_k →
    n_k, in the reverse order. With ``project=False`` the input is the core; with ``expand=False``
    the output is.
    """
    if not (project or expand or eigenvalues):
        raise ValueError("tucker needs at least one of project, eigenvalues or expand")
    if project and expand and eigenvalues and native_applies(x, bases, axes):
        # the fused C kernel (gridmix.mixers.concentration.ops.tucker_native), same function;
        # autograd carries ∂scale on to the λ
        # (R, h), ρ in grid-axis order
        scale = _scale(eigenvalues, axes, x.dim()).reshape(-1, x.shape[-2])
        order = innermost_first_among_ties(
            axes, [x.shape[a] for a in axes], [u.shape[1] for u in bases]
        )
        return tucker_chain(x, [bases[k] for k in order], scale, [axes[k] for k in order])[0]
    return _Tucker.apply(x.contiguous(), tuple(axes), project, expand, *bases, *(eigenvalues or ()))
