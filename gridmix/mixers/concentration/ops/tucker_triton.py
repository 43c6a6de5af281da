"""A Triton kernel for the mixer's Tucker chain on 2-d grids: project, scale and expand in one
launch.

On a GPU the library-GEMM chain (:mod:`gridmix.mixers.concentration.ops.tucker`) is launch-bound: a
handful of small GEMMs, reshapes and scalings per step, each a kernel. This kernel runs the whole
forward chain of one (batch element, channel) slice ``X`` (n1, n2) in one program: ``Y = U1 (S ⊙
(U1ᵀ X U2)) U2ᵀ`` with the core scale ``S`` (r1, r2) of that channel's head, in float32
(``input_precision="ieee"``: no TF32). The backward: the operator is symmetric per head, so ``∂x``
is the same kernel applied to the incoming gradient; the basis and scale gradients come from the
plain-torch chain (:func:`gridmix.mixers.concentration.ops.tucker_native.reference_chain`),
recomputed under autograd (correct, not yet fused).

Opt-in and experimental: used only on CUDA, for float32 2-d all-Tucker chains with padded
``n1·n2 ≤ 16384``, when :func:`gridmix.set_triton` (or ``GRIDMIX_TRITON=1``) switches it on; not yet
measured on a GPU (``benchmarks/bench_gpu.py`` has a case for it). Under ``TRITON_INTERPRET=1`` (set
before this module is imported) Triton runs the kernel on the CPU, which is how the tests check it.

Shape legend:
    B: batch, n1, n2: grid axes, r1, r2: ranks, h: heads, c: channels per head, S0 = h·c
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from gridmix.mixers.concentration.ops.tucker_native import reference_chain

MAX_TILE = 16384  # padded n1·n2 of one program's slice


def _padded(n: int) -> int:
    """The tile length for ``n``: a power of two, at least 16 (``tl.dot``'s smallest operand)."""
    return max(16, triton.next_power_of_2(n))


def triton_fits(x: torch.Tensor, bases, axes) -> bool:
    """Whether the kernel covers this call's shapes: a 2-d grid, both axes in Tucker form, a tile
    that fits."""
    return (
        x.dim() == 5
        and sorted(axes) == [1, 2]
        and x.dtype == torch.float32
        and _padded(x.shape[1]) * _padded(x.shape[2]) <= MAX_TILE
        and all(u.shape[1] <= 64 for u in bases)
    )


@triton.jit
def _chain_2d(
    x_ptr,
    u1_ptr,
    u2_ptr,
    s_ptr,
    y_ptr,
    n1,
    n2,
    r1,
    r2,
    S0,
    c,
    heads,
    N1: tl.constexpr,
    N2: tl.constexpr,
    R1: tl.constexpr,
    R2: tl.constexpr,
):
    b = tl.program_id(0)
    j = tl.program_id(1)  # the channel: head j // c
    i1, i2 = tl.arange(0, N1), tl.arange(0, N2)
    p1, p2 = tl.arange(0, R1), tl.arange(0, R2)
    grid_mask = (i1[:, None] < n1) & (i2[None, :] < n2)
    offsets = b * n1 * n2 * S0 + (i1[:, None] * n2 + i2[None, :]) * S0 + j  # (N1, N2)
    x = tl.load(x_ptr + offsets, mask=grid_mask, other=0.0)
    u1 = tl.load(
        u1_ptr + i1[:, None] * r1 + p1[None, :],
        mask=(i1[:, None] < n1) & (p1[None, :] < r1),
        other=0.0,
    )
    u2 = tl.load(
        u2_ptr + i2[:, None] * r2 + p2[None, :],
        mask=(i2[:, None] < n2) & (p2[None, :] < r2),
        other=0.0,
    )
    scale = tl.load(
        s_ptr + (p1[:, None] * r2 + p2[None, :]) * heads + j // c,
        mask=(p1[:, None] < r1) & (p2[None, :] < r2),
        other=0.0,
    )  # (R1, R2)
    half = tl.dot(tl.trans(u1), x, input_precision="ieee")  # (R1, N2)
    core = tl.dot(half, u2, input_precision="ieee") * scale  # (R1, R2)
    half = tl.dot(u1, core, input_precision="ieee")  # (N1, R2)
    y = tl.dot(half, tl.trans(u2), input_precision="ieee")  # (N1, N2)
    tl.store(y_ptr + offsets, y, mask=grid_mask)


def _launch(
    x: torch.Tensor, u1: torch.Tensor, u2: torch.Tensor, scale: torch.Tensor
) -> torch.Tensor:
    """The chain on ``x`` (B, n1, n2, h, c) with ``scale`` (r1, r2, h): (B, n1, n2, h, c)."""
    x, u1, u2, scale = x.contiguous(), u1.contiguous(), u2.contiguous(), scale.contiguous()
    B, n1, n2, heads, c = x.shape
    y = torch.empty_like(x)
    _chain_2d[(B, heads * c)](
        x,
        u1,
        u2,
        scale,
        y,
        n1,
        n2,
        u1.shape[1],
        u2.shape[1],
        heads * c,
        c,
        heads,
        N1=_padded(n1),
        N2=_padded(n2),
        R1=_padded(u1.shape[1]),
        R2=_padded(u2.shape[1]),
    )
    return y


class _TritonChain(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx, x: torch.Tensor, u1: torch.Tensor, u2: torch.Tensor, scale: torch.Tensor
    ) -> torch.Tensor:
        ctx.save_for_backward(x, u1, u2, scale)
        return _launch(x, u1, u2, scale)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, u1, u2, scale = ctx.saved_tensors
        gx = (
            _launch(grad, u1, u2, scale) if ctx.needs_input_grad[0] else None
        )  # the operator is symmetric
        wanted = [t for t, need in zip((u1, u2, scale), ctx.needs_input_grad[1:]) if need]
        if not wanted:
            return gx, None, None, None
        with torch.enable_grad():
            leaves = [
                t.detach().requires_grad_(need)
                for t, need in zip((u1, u2, scale), ctx.needs_input_grad[1:])
            ]
            flat_scale = leaves[2].reshape(-1, scale.shape[-1])  # (R, h), ρ in grid-axis order
            y = reference_chain(x.detach(), leaves[:2], flat_scale, [1, 2])
            got = iter(torch.autograd.grad(y, [t for t in leaves if t.requires_grad], grad))
        return gx, *(next(got) if need else None for need in ctx.needs_input_grad[1:])


def triton_chain(x: torch.Tensor, bases, scale: torch.Tensor, axes) -> torch.Tensor:
    """Project, scale by ``scale`` (1, r1, r2, h, 1) and expand ``x`` (B, n1, n2, h, c) along grid
    axes 1, 2."""
    by_axis = dict(zip(axes, bases))
    return _TritonChain.apply(x, by_axis[1], by_axis[2], scale.reshape(*scale.shape[1:-1]))
