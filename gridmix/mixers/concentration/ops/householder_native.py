"""The symmetric factors' orthonormal bases in one native call each way: the Householder map, the
DCT and its gradient.

:class:`gridmix.mixers.concentration.factors._OrthogonalColumns` computes ``U = D Q`` from the
Householder weights in torch ops, in the compact-WY form (batched GEMMs, a triangular solve, masks:
7 ops forward and 11 backward, the path a GPU runs); before it took that form, LAPACK's ``orgqr``
forward and about sixty small ops backward cost about 0.4 ms per step for a 64x64 grid's two bases
on a 2-core CPU, most of it the per-op cost. The C kernel (``householder_native.c``, built
with the other kernels by :mod:`gridmix.mixers.concentration.ops.native_build`) applies the ``r``
reflectors and the DCT in one call, and its backward walks the reflectors once (the C source's
header gives the formulas), in a few tens of microseconds. The tests compare it with torch's map in
float64, values and gradients, in every build the host can run.

It is an ``autograd.Function`` around two ctypes calls, not a custom op: a custom op's dispatch
costs more than the kernel. So it runs only where nothing traces or watches the ops
(:func:`native_applies`): under ``torch.compile``, a FLOP counter, fake tensors or any other
dispatch mode, the torch-op form runs instead and is what they see.

Shape legend:
    k: bases computed together (equal shapes), m: DCT modes, r: rank,
    n: axis length (rows of the DCT)
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable
from torch.utils._python_dispatch import is_in_torch_dispatch_mode

from gridmix.mixers.concentration.ops.native_build import native_available, native_library, pointer

# m·r at most (64 KiB per basis): the kernel measured faster than the torch-op form up to it at
# every (m, r) tried, from (16, 16) to (1024, 16) and (512, 32), and slower beyond it at (1024, 32),
# (512, 64) and (16384, 16), where torch's blocked orgqr and the WY form's GEMMs stream the basis
# fewer times (docs/benchmarks.md, "A native Householder basis")
MAX_BASIS_FLOATS = 16384


def native_applies(dct: torch.Tensor | None, weights: tuple[torch.Tensor, ...]) -> bool:
    """Whether the kernel computes these bases: float32 on the CPU, at most :data:`MAX_BASIS_FLOATS`
    per basis, the kernels on, and no tracing or dispatch mode."""
    return (
        all(
            t.device.type == "cpu" and t.dtype == torch.float32
            for t in (*weights, *([] if dct is None else [dct]))
        )
        and weights[0].numel() <= MAX_BASIS_FLOATS
        and not torch.compiler.is_compiling()
        and not is_in_torch_dispatch_mode()
        and native_available()
    )


def _optional_pointer(tensor: torch.Tensor | None):
    return None if tensor is None else pointer(tensor)


class NativeOrthogonalColumns(torch.autograd.Function):
    """``_OrthogonalColumns`` in the C kernel: k weights (m, r) to their bases ``Q`` (m, r), or ``D
    Q`` (n, r)."""

    @staticmethod
    def forward(ctx, dct: torch.Tensor | None, *weights: torch.Tensor) -> tuple[torch.Tensor, ...]:
        w = torch.stack(weights)  # (k, m, r)
        k, m, r = w.shape
        n = dct.shape[0] if dct is not None else m
        dct = None if dct is None else dct.contiguous()  # (n, m)
        out = w.new_empty(k, n, r)
        work = w.new_empty(2 * m * r + m)
        native_library().gm_householder_forward(
            k, m, r, n, pointer(w), _optional_pointer(dct), pointer(out), pointer(work)
        )
        ctx.save_for_backward(w, dct)
        return out.unbind()  # (n, r) each

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads: torch.Tensor):
        w, dct = ctx.saved_tensors
        k, m, r = w.shape
        n = dct.shape[0] if dct is not None else m
        grad = torch.stack(grads)  # (k, n, r)
        grad_w = torch.empty_like(w)  # (k, m, r)
        work = w.new_empty(3 * m * r + 2 * m + 4 * r)
        native_library().gm_householder_backward(
            k,
            m,
            r,
            n,
            pointer(w),
            _optional_pointer(dct),
            pointer(grad),
            pointer(grad_w),
            pointer(work),
        )
        return None, *grad_w.unbind()
