"""The fused native Tucker kernel as torch custom ops: the op, its fake kernel, its autograd and its
FLOP formula.

:func:`gridmix.mixers.concentration.ops.tucker.tucker` with library GEMMs runs each mode product
over the whole batch, so every stage streams the full tensor through memory and pays the GEMM's
packing of its large operand. The C kernel (``tucker_native.c``, built and loaded by
:mod:`gridmix.mixers.concentration.ops.native_build`) runs the whole chain (project, scale, expand;
and the backward) on one batch element at a time while it is in cache, vectorised along the
contiguous heads·channels dimension, threading over the batch (``torch.get_num_threads()`` threads:
OpenMP, or :func:`gridmix.mixers.concentration.ops.native_build.run_parallel` without it). It
computes the same function; the tests compare it with the library-GEMM path and with float64, values
and gradients, in every build the host can run.

Importing this module defines everything about the ops ``gridmix::tucker_chain`` and
``gridmix::tucker_chain_backward``: fake (shape-only) implementations, so FLOP counting, memory
estimates and ``torch.compile`` see them; the autograd formula; and their FLOP counts, registered
with ``torch.utils.flop_counter`` so any ``FlopCounterMode`` counts them.

Shape legend:
    B: batch, n_k: axis length, r_k: rank, R: Π r_k (core size), h: heads, c: channels per head,
    S0 = h·c: the contiguous trailing dimension of one batch element
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence

import torch
from torch.utils.flop_counter import register_flop_formula

from gridmix.mixers.concentration.ops.native_build import (
    MAX_AXES,
    native_available,
    native_library,
    pointer,
    run_parallel,
)

# tied axes at least this long run innermost first in the kernel (innermost_first_among_ties)
INNER_FIRST_LENGTH = 64


def innermost_first_among_ties(
    axes: Sequence[int], lengths: Sequence[int], ranks: Sequence[int], min_length: int | None = None
) -> list[int]:
    """Positions into ``axes``: their order, except that each run of neighbours with equal length
    and rank, at least ``min_length`` long (default :data:`INNER_FIRST_LENGTH`), goes innermost
    (highest axis) first.

    Such neighbours cost the same FLOPs in either order. In the fused kernel, taking the innermost
    first makes its passes over the whole tensor read and write contiguous slices, which measured
    faster from 64x64 on; the library-GEMM path measured slower that way at most grids
    (docs/benchmarks.md, "Projection order among tied axes"), so only the kernel's call reorders.
    """
    min_length = INNER_FIRST_LENGTH if min_length is None else min_length
    positions, start = list(range(len(axes))), 0
    while start < len(axes):
        end = start + 1
        while end < len(axes) and (lengths[end], ranks[end]) == (lengths[start], ranks[start]):
            end += 1
        if lengths[start] >= min_length:
            positions[start:end] = sorted(positions[start:end], key=lambda k: -axes[k])
        start = end
    return positions


def native_applies(x: torch.Tensor, bases: Sequence[torch.Tensor], axes: Sequence[int]) -> bool:
    """Whether the fused kernel covers this call: float32 on the CPU, and every grid axis is a
    Tucker axis."""
    d = len(axes)
    return (
        all(t.device.type == "cpu" and t.dtype == torch.float32 for t in (x, *bases))
        and 0 < d <= MAX_AXES
        and x.dim() == d + 3
        and sorted(axes) == list(range(1, d + 1))
        and native_available()
    )


def _pointers(tensors: Sequence[torch.Tensor]):
    return (ctypes.c_void_p * max(len(tensors), 1))(*(pointer(t).value for t in tensors))


def _int64s(values: Sequence[int]):
    return (ctypes.c_int64 * len(values))(*values)


def _kernel_dims(x: torch.Tensor, bases: Sequence[torch.Tensor], axes: Sequence[int]):
    """The Tucker axes' lengths ``n`` and ranks ``r``, and the kernel's leading arguments: the
    0-based grid axes, ``n`` and ``r`` (C int64 arrays), ``S0`` and ``h``."""
    n, r = [x.shape[a] for a in axes], [u.shape[1] for u in bases]
    heads = x.shape[-2]
    return (
        n,
        r,
        (_int64s([a - 1 for a in axes]), _int64s(n), _int64s(r), heads * x.shape[-1], heads),
    )


def _chain_pointers(x, bases, scale, proj, core, scaled, expd) -> tuple:
    """The arguments both kernels take after the dimensions: the chain's input, bases, scale and
    intermediates (``gm_tucker_forward`` in the C source)."""
    return (
        pointer(x),
        _pointers(bases),
        pointer(scale),
        _pointers(proj),
        pointer(core),
        pointer(scaled),
        _pointers(expd),
    )


def _chain_shapes(x_shape: Sequence[int], axes: Sequence[int], ranks: Sequence[int]):
    """Shapes of the forward's intermediates (``gm_tucker_forward`` in the C source): proj, core,
    expd."""
    d, shape = len(axes), list(x_shape)
    proj = []
    for t in range(d):
        if t:
            proj.append(tuple(shape))  # before step t's projection
        shape[axes[t]] = ranks[t]
    core = tuple(shape)
    expd = []
    for t in range(d - 1, 0, -1):
        shape[axes[t]] = x_shape[axes[t]]
        expd.append(tuple(shape))  # before step t-1's expansion
    return proj, core, expd[::-1]


@torch.library.custom_op("gridmix::tucker_chain", mutates_args=())
def tucker_chain(
    x: torch.Tensor, bases: list[torch.Tensor], scale: torch.Tensor, axes: list[int]
) -> list[torch.Tensor]:
    """Project ``x`` onto ``bases[t]`` along ``axes[t]`` in turn, scale the core by ``scale`` (R,
    h), expand back.

    Returns ``[y, core, scaled core, *projection inputs after the first, *expansion inputs but the
    last]``; all but ``y`` are kept for the backward (and count in memory estimates, as they are
    allocated).
    """
    x, bases, scale = x.contiguous(), [u.contiguous() for u in bases], scale.contiguous()
    _, r, dims = _kernel_dims(x, bases, axes)
    proj_shapes, core_shape, expd_shapes = _chain_shapes(x.shape, axes, r)
    proj, expd = [x.new_empty(s) for s in proj_shapes], [x.new_empty(s) for s in expd_shapes]
    core, scaled, y = x.new_empty(core_shape), x.new_empty(core_shape), x.new_empty(x.shape)
    library, chain = native_library(), _chain_pointers(x, bases, scale, proj, core, scaled, expd)
    run_parallel(
        lambda first, last, slot, threads: library.gm_tucker_forward(
            len(axes), first, last, *dims, *chain, pointer(y), threads
        ),
        x.shape[0],
        torch.get_num_threads(),
    )
    return [y, core, scaled, *proj, *expd]


@tucker_chain.register_fake
def _(x, bases, scale, axes):
    proj_shapes, core_shape, expd_shapes = _chain_shapes(x.shape, axes, [u.shape[1] for u in bases])
    return [
        x.new_empty(x.shape),
        x.new_empty(core_shape),
        x.new_empty(core_shape),  # contiguous, as the kernel's
        *(x.new_empty(s) for s in [*proj_shapes, *expd_shapes]),
    ]


@torch.library.custom_op("gridmix::tucker_chain_backward", mutates_args=())
def tucker_chain_backward(
    grad: torch.Tensor,
    x: torch.Tensor,
    bases: list[torch.Tensor],
    scale: torch.Tensor,
    axes: list[int],
    intermediates: list[torch.Tensor],
) -> list[torch.Tensor]:
    """``[∂x, *∂bases, ∂scale]`` of :func:`tucker_chain` from its intermediates."""
    grad, x, bases, scale = (
        grad.contiguous(),
        x.contiguous(),
        [u.contiguous() for u in bases],
        scale.contiguous(),
    )
    n, r, dims = _kernel_dims(x, bases, axes)
    B = x.shape[0]
    core, scaled, *rest = intermediates
    proj, expd = rest[: len(axes) - 1], rest[len(axes) - 1 :]
    # of one element
    proj_shapes, core_shape, expd_shapes = _chain_shapes((1, *x.shape[1:]), axes, r)
    # the largest intermediate
    work_size = max(math.prod(s) for s in [*proj_shapes, core_shape, *expd_shapes])
    threads = torch.get_num_threads()
    work = x.new_empty(2 * threads * work_size)  # two ping-pong buffers per thread
    gx = x.new_empty(x.shape)
    # per batch element: summed in a fixed order
    basis_parts = [x.new_empty(B, nt, rt) for nt, rt in zip(n, r)]
    scale_part = x.new_empty(B, *scale.shape)
    library, chain = native_library(), _chain_pointers(x, bases, scale, proj, core, scaled, expd)
    run_parallel(
        lambda first, last, slot, threads: library.gm_tucker_backward(
            len(axes),
            first,
            last,
            *dims,
            pointer(grad),
            *chain,
            pointer(gx),
            _pointers(basis_parts),
            pointer(scale_part),
            pointer(work, 2 * slot * work_size),
            work_size,
            threads,
        ),
        B,
        threads,
    )
    return [gx, *(part.sum(0) for part in basis_parts), scale_part.sum(0)]


@tucker_chain_backward.register_fake
def _(grad, x, bases, scale, axes, intermediates):
    return [
        x.new_empty(x.shape),
        *(u.new_empty(u.shape) for u in bases),
        scale.new_empty(scale.shape),
    ]


def _chain_setup_context(ctx, inputs, output):
    x, bases, scale, axes = inputs
    ctx.axes = axes
    ctx.save_for_backward(x, scale, *bases, *output[1:])
    ctx.mark_non_differentiable(*output[1:])  # intermediates for the backward only
    ctx.set_materialize_grads(False)  # so no zero-filled gradients are made for them


def _chain_backward(ctx, grads):
    x, scale, *rest = ctx.saved_tensors
    d = len(ctx.axes)
    bases, intermediates = rest[:d], rest[d:]
    if torch.is_grad_enabled():  # create_graph=True: a backward autograd can differentiate again
        return (*_differentiable_chain_grads(grads[0], x, bases, scale, ctx.axes), None)
    gx, *basis_grads, scale_grad = tucker_chain_backward(
        grads[0], x, bases, scale, ctx.axes, intermediates
    )
    return gx, basis_grads, scale_grad, None


def _differentiable_chain_grads(grad, x, bases, scale, axes):
    """The chain's gradients through plain torch ops as a graph (for double backward, e.g.
    Jacobian-vector products)."""
    y = reference_chain(x, bases, scale, axes)
    inputs = [x, *bases, scale]
    wanted = [t for t in inputs if t.requires_grad]
    got = iter(torch.autograd.grad(y, wanted, grad, create_graph=True, allow_unused=True))
    grads = [next(got) if t.requires_grad else None for t in inputs]
    return grads[0], grads[1:-1], grads[-1]


def reference_chain(
    x: torch.Tensor, bases: Sequence[torch.Tensor], scale: torch.Tensor, axes: Sequence[int]
) -> torch.Tensor:
    """:func:`tucker_chain`'s ``y`` in plain differentiable torch ops (for the double backward)."""
    for axis, basis in zip(axes, bases):
        x = torch.movedim(torch.tensordot(x, basis, dims=([axis], [0])), -1, axis)  # n_k -> r_k
    x = x * scale.reshape(1, *x.shape[1:-1], 1)  # (B, r…, h, c), the r in grid-axis order
    for axis, basis in zip(reversed(axes), reversed(bases)):
        x = torch.movedim(torch.tensordot(x, basis, dims=([axis], [1])), -1, axis)  # r_k -> n_k
    return x


tucker_chain.register_autograd(_chain_backward, setup_context=_chain_setup_context)


def chain_flops(x_shape: Sequence[int], axes: Sequence[int], ranks: Sequence[int]) -> int:
    """Multiply-add FLOPs (×2) of the Tucker chain on ``x_shape``: each of ``axes`` down in turn,
    then back up.

    The fused kernel's forward runs exactly these (:func:`tucker_chain`);
    :func:`gridmix.tucker_flops` is this count in the cheapest projection order, per batch element.
    """
    flops, shape = 0, list(x_shape)
    for axis, rank in zip(axes, ranks):
        flops += 2 * math.prod(shape) * rank  # (Π shape / n) · n · r multiply-adds
        shape[axis] = rank
    return 2 * flops


@register_flop_formula(torch.ops.gridmix.tucker_chain)
def _tucker_chain_flops(x, bases, scale, axes, *args, out_shape=None, **kwargs) -> int:
    """The forward: every step down and back up (the kernel runs exactly these GEMM-like loops)."""
    return chain_flops(x, axes, [basis[-1] for basis in bases])


@register_flop_formula(torch.ops.gridmix.tucker_chain_backward)
def _tucker_chain_backward_flops(
    grad, x, bases, scale, axes, *args, out_shape=None, **kwargs
) -> int:
    """The backward: a basis gradient and an input gradient per step, twice the forward."""
    return 2 * chain_flops(x, axes, [basis[-1] for basis in bases])
