"""A semiseparable causal factor: a sum of decaying exponentials applied as an exactly causal scan.

The kernel, a sum of ``r`` decaying exponentials per head, and the Toeplitz matrix ``T`` it makes
are described in :mod:`gridmix.mixers.concentration.ops.semiseparable_chunked`; this module
applies ``T`` to a tensor.

:func:`semiseparable_mode_product` is the one dispatch site: the fused recurrence of
:mod:`gridmix.mixers.concentration.ops.semiseparable_native` where it applies (float32 on the CPU,
the native switch on), else the chunked scan in torch ops of
:mod:`gridmix.mixers.concentration.ops.semiseparable_chunked` (both exactly causal; their docstrings
say how). :func:`semiseparable_kernel` materialises ``κ`` (h, n); ``causal_mode_product_dense`` of
it is the O(n²) reference the tests compare against in float64. Everything here runs in at least
float32 with autocast off inside and returns the input's dtype, as
:func:`gridmix.mixers.concentration.ops.causal.causal_mode_product`.

Shape legend:
    h: heads, c: channels per head, n: axis length, r: terms per head
"""

from __future__ import annotations

import torch

from gridmix.mixers.concentration.ops.causal import check_causal_axis
from gridmix.mixers.concentration.ops.semiseparable_chunked import (
    CHUNK,
    GROUP,
    PIECE,
    ScanShape,
    semiseparable_kernel,
    torch_mode_product,
)
from gridmix.mixers.concentration.ops.semiseparable_native import native_applies, semiseparable_scan

__all__ = ["semiseparable_kernel", "semiseparable_mode_product", "torch_mode_product"]


def semiseparable_mode_product(
    x: torch.Tensor,
    log_decays: torch.Tensor,
    weights: torch.Tensor,
    axis: int,
    *,
    chunk: int = CHUNK,
    group: int = GROUP,
    piece: int = PIECE,
) -> torch.Tensor:
    """``causal_mode_product_dense(x, semiseparable_kernel(log_decays, weights, n), axis)`` in
    O(n·r).

    ``x``: (…, n at ``axis``, …, h, c); ``log_decays`` (``log λ``, negative) and ``weights``
    (``w``): (h, r). Returns ``x``'s shape and dtype. Where
    :func:`gridmix.mixers.concentration.ops.semiseparable_native.native_applies` (float32 on the
    CPU, the native switch on) the fused recurrence runs; otherwise the chunked scan in torch ops
    (:func:`torch_mode_product`), whose parameters are ``chunk`` (positions per chunk), ``group``
    (chunks per group of the carry, ≥ 2) and ``piece`` (about how many values of the padded (h, R,
    L) tensor go through the scan at a time: whole rows, at least one). Both are exactly causal
    (module docstrings).
    """
    if log_decays.dim() != 2 or log_decays.shape != weights.shape:
        raise ValueError(
            f"log_decays {tuple(log_decays.shape)} and weights {tuple(weights.shape)} must both be "
            f"(h={x.shape[-2]}, r)"
        )
    check_causal_axis(x, log_decays[:, :1], axis)
    scan = ScanShape(chunk, group, piece)
    work = torch.promote_types(x.dtype, torch.float32)
    with torch.autocast(x.device.type, enabled=False):
        x_work, log_decays, weights = x.to(work), log_decays.to(work), weights.to(work)
        if native_applies(x_work, log_decays.shape[1]):
            return semiseparable_scan(x_work, torch.exp(log_decays), weights, axis).to(x.dtype)
        return torch_mode_product(x_work, log_decays, weights, axis, scan).to(x.dtype)
