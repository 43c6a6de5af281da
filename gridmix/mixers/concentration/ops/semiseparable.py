"""A semiseparable causal factor: a sum of decaying exponentials applied as an exactly causal scan.

The kernel is ``κ_h[k] = Σ_q w_hq λ_hq^k`` for ``0 ≤ k < n`` (``r`` terms per head, ``0 < λ < 1``):
the lower-triangular Toeplitz matrix ``T[i, j] = κ_h[i − j]`` of
:mod:`gridmix.mixers.concentration.ops.causal`, but with ``2r`` numbers per head instead of ``n``
(S4D / Mamba-2's semiseparable form).
:class:`gridmix.mixers.concentration.factors.SemiseparableFactor` sets ``w`` so that ``‖κ_h‖₁``
equals its gain exactly (the certificate); this module applies ``T`` to a tensor.

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
    if chunk < 1 or group < 2 or piece < 1:
        raise ValueError(
            f"chunk={chunk}, group={group}, piece={piece}; expected chunk >= 1, group >= 2, piece "
            ">= 1"
        )
    work = torch.promote_types(x.dtype, torch.float32)
    with torch.autocast(x.device.type, enabled=False):
        x_work, log_decays, weights = x.to(work), log_decays.to(work), weights.to(work)
        if native_applies(x_work, log_decays.shape[1]):
            return semiseparable_scan(x_work, torch.exp(log_decays), weights, axis).to(x.dtype)
        return torch_mode_product(
            x_work, log_decays, weights, axis, chunk=chunk, group=group, piece=piece
        ).to(x.dtype)
