"""The fused semiseparable recurrence as torch custom ops: the op, its fake kernel, its autograd and
its FLOP formula.

:func:`gridmix.mixers.concentration.ops.semiseparable.semiseparable_mode_product` in torch ops moves
the axis last and the heads first (two full copies each way), and its chunked GEMMs spend ``2b``
multiply-adds per value on the chunk's dense Toeplitz block. The C kernel
(``semiseparable_native.c``, built and loaded by
:mod:`gridmix.mixers.concentration.ops.native_build` with the Tucker kernel) runs the recurrence
``s_q[i] = λ_q s_q[i−1] + x[i]``, ``y[i] = Σ_q w_q s_q[i]`` on the tensor as it lies, one vector of
adjacent channels at a time (the build's lanes, 1 to 16) with their ``r`` states in registers:
``2r`` multiply-adds per value, and one read and one write of the tensor. It is exactly causal
(``y[i]`` never reads a later ``x``), and its backward is the adjoint recurrence run right to left,
so a later input gets exactly zero gradient: one pass that reads ``x`` and the gradient once and
writes ``∂x`` once (the C source's header says how the sums over states become sums over ``x``). The
tests compare it with the dense Toeplitz reference in float64, values and gradients.

Importing this module defines the ops ``gridmix::semiseparable_scan`` and
``gridmix::semiseparable_scan_backward``: fake (shape-only) implementations, so FLOP counting,
memory estimates and ``torch.compile`` see them; the autograd formula (a backward with
``create_graph=True`` runs the torch-op form instead, so it can be differentiated again); and their
FLOP counts, registered with ``torch.utils.flop_counter``.

Shape legend:
    h: heads, c: channels per head, C = h·c, r: terms per head, n: the causal axis, P: the
    dimensions before it, Q: those after it (C last)
"""

from __future__ import annotations

import math

import torch
from torch.utils.flop_counter import register_flop_formula

from gridmix.mixers.concentration.ops.native_build import (
    native_available,
    native_lanes,
    native_library,
    pointer,
    run_parallel,
)
from gridmix.mixers.concentration.ops.semiseparable_chunked import torch_mode_product

CHANNEL_MULTIPLE = (
    16  # h·c must be a multiple: of every build's lanes (1, 4, 8 or 16), so the verdict is portable
)
MAX_TERMS = 64  # MAX_TERMS in the C source
TILES_TOGETHER = (
    8  # TILES_TOGETHER in the C source: tiles that walk the axis together (sizes the scratch)
)
# work items per call at least (when the shape allows): enough for 16 threads, fixed by the shape
MIN_ITEMS = 16


def native_applies(x: torch.Tensor, terms: int) -> bool:
    """Whether the fused kernel covers ``x`` (…, h, c): float32 on the CPU, ``h·c`` a multiple of
    16, ≤ 64 terms."""
    return (
        x.device.type == "cpu"
        and x.dtype == torch.float32
        and (x.shape[-2] * x.shape[-1]) % CHANNEL_MULTIPLE == 0
        and 0 < terms <= MAX_TERMS
        and native_available()
    )


def _layout(shape: torch.Size, axis: int, lanes: int) -> tuple[int, int, int, int, int, int]:
    """``(P, n, Q, C, groups, parts)`` of ``x`` (…, n at ``axis``, …, h, c) viewed as (P, n, Q).

    The work items (C source): ``groups`` ranges of p times ``parts`` ranges of Q's tiles of
    ``lanes`` floats, from the shape and the build only (so the gradient sums never depend on the
    thread count), at least ``MIN_ITEMS`` where the shape allows and at most ``MIN_ITEMS`` groups
    (so the (items, r, C) gradient partials stay small whatever P).
    """
    P, n, Q = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])
    groups = min(P, MIN_ITEMS)
    parts = max(1, min(Q // lanes, -(-MIN_ITEMS // P)))
    return P, n, Q, shape[-2] * shape[-1], groups, parts


def _per_channel(values: torch.Tensor, head_dim: int) -> torch.Tensor:
    """(h, r) → (r, C): each head's values repeated over its ``head_dim`` channels, as the kernel
    reads them."""
    heads, terms = values.shape
    return (
        values.T[:, :, None]
        .expand(terms, heads, head_dim)
        .reshape(terms, heads * head_dim)
        .contiguous()
    )


@torch.library.custom_op("gridmix::semiseparable_scan", mutates_args=())
def semiseparable_scan(
    x: torch.Tensor, decays: torch.Tensor, weights: torch.Tensor, axis: int
) -> torch.Tensor:
    """``y[i] = Σ_{j ≤ i} Σ_q w_hq λ_hq^(i−j) x[j]`` along ``axis`` of ``x`` (…, h, c); λ, w: (h, r)
    each."""
    x = x.contiguous()
    layout = _layout(x.shape, axis, native_lanes())  # P, n, Q, C, groups, parts
    lam, w = _per_channel(decays, x.shape[-1]), _per_channel(weights, x.shape[-1])  # (r, C) each
    y = x.new_empty(x.shape)
    library, terms = native_library(), decays.shape[1]
    run_parallel(
        lambda first, last, slot, threads: library.gm_semiseparable_forward(
            *layout[:4],
            terms,
            *layout[4:],
            first,
            last,
            pointer(x),
            pointer(lam),
            pointer(w),
            pointer(y),
            threads,
        ),
        layout[4] * layout[5],
        torch.get_num_threads(),
    )
    return y


@semiseparable_scan.register_fake
def _(x, decays, weights, axis):
    return x.new_empty(x.shape)  # contiguous, as the kernel's


@torch.library.custom_op("gridmix::semiseparable_scan_backward", mutates_args=())
def semiseparable_scan_backward(
    grad: torch.Tensor, x: torch.Tensor, decays: torch.Tensor, weights: torch.Tensor, axis: int
) -> list[torch.Tensor]:
    """``[∂x, ∂decays, ∂weights]`` of :func:`semiseparable_scan` given the output's gradient
    ``grad``."""
    grad, x = grad.contiguous(), x.contiguous()
    lanes = native_lanes()
    P, n, Q, C, groups, parts = _layout(x.shape, axis, lanes)
    heads, terms = decays.shape
    lam, w = _per_channel(decays, x.shape[-1]), _per_channel(weights, x.shape[-1])  # (r, C) each
    scratch_vectors = 4 * TILES_TOGETHER * terms  # the C entry point's comment
    threads = torch.get_num_threads()
    scratch = x.new_empty(threads * scratch_vectors * lanes)
    gx = x.new_empty(x.shape)
    # per work item
    decay_part, weight_part = (x.new_zeros(groups * parts, terms, C) for _ in range(2))
    library = native_library()
    run_parallel(
        lambda first, last, slot, threads: library.gm_semiseparable_backward(
            P,
            n,
            Q,
            C,
            terms,
            groups,
            parts,
            first,
            last,
            pointer(x),
            pointer(grad),
            pointer(lam),
            pointer(w),
            pointer(gx),
            pointer(decay_part),
            pointer(weight_part),
            pointer(scratch, slot * scratch_vectors * lanes),
            scratch_vectors,
            threads,
        ),
        groups * parts,
        threads,
    )
    per_head = (terms, heads, x.shape[-1])
    # (h, r): ∂λ = w Σ x u (= w Σ p s_prev)
    decay_grad = (decay_part.sum(0) * w).view(per_head).sum(-1).T
    weight_grad = weight_part.sum(0).view(per_head).sum(-1).T  # (h, r): ∂w = Σ x p (= Σ g s)
    return [gx, decay_grad.contiguous(), weight_grad.contiguous()]


@semiseparable_scan_backward.register_fake
def _(grad, x, decays, weights, axis):
    return [x.new_empty(x.shape), decays.new_empty(decays.shape), weights.new_empty(weights.shape)]


def _setup_context(ctx, inputs, output):
    x, decays, weights, axis = inputs
    ctx.axis = axis
    ctx.save_for_backward(x, decays, weights)


def _backward(ctx, grad):
    x, decays, weights = ctx.saved_tensors
    # create_graph=True: the torch-op form, as a graph autograd can differentiate again
    if torch.is_grad_enabled():
        inputs = [x, decays, weights]
        y = torch_mode_product(x, torch.log(decays), weights, ctx.axis)
        wanted = [t for t in inputs if t.requires_grad]
        got = iter(torch.autograd.grad(y, wanted, grad, create_graph=True, allow_unused=True))
        return (*(next(got) if t.requires_grad else None for t in inputs), None)
    gx, decay_grad, weight_grad = semiseparable_scan_backward(grad, x, decays, weights, ctx.axis)
    return gx, decay_grad, weight_grad, None


semiseparable_scan.register_autograd(_backward, setup_context=_setup_context)


def scan_flops(x_shape, terms: int) -> int:
    """The forward's FLOPs: per value and term, the state update and the read-out (two
    multiply-adds)."""
    return 4 * math.prod(x_shape) * terms


@register_flop_formula(torch.ops.gridmix.semiseparable_scan)
def _scan_flops(x, decays, *args, out_shape=None, **kwargs) -> int:
    return scan_flops(x, decays[1])


@register_flop_formula(torch.ops.gridmix.semiseparable_scan_backward)
def _scan_backward_flops(grad, x, decays, *args, out_shape=None, **kwargs) -> int:
    """2.5 times the forward: per value and term, the two adjoints, their two sums (∂λ, ∂w) and ∂x's
    read-out."""
    return 5 * scan_flops(x, decays[1]) // 2
