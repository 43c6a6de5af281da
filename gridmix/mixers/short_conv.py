"""A short depthwise convolution over the tokens of an N-d grid: three taps per axis and channel,
centred on a symmetric axis (lags -1, 0, 1) and looking back on a causal axis (lags 0, 1, 2), so a
later token along a causal axis never enters, exactly.

It is the short filter that Hyena (Poli et al. 2023) and Mamba-2 (Dao & Gu 2024) put before their
long mixing (a depthwise ``Conv1d`` with causal padding there), and the depthwise 3x3 convolution
VMamba (Liu et al. 2024) puts before its 2-d scans, written for any grid rank. On grids of rank 1
to 3 it is PyTorch's depthwise ``conv1d``/``conv2d``/``conv3d`` (``groups = C``) on the zero-padded
grid; above rank 3, where PyTorch has no convolution, the ``3^d`` taps of the kernel are summed as
shifted copies of the zero-padded grid (:func:`shifted_sum`, the same sum in another order). One
dispatch site, :meth:`ShortConv.forward`, chooses.

Shape legend:
    B: batch, C: channels, d: grid rank, n_k: an axis length
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

TAPS = 3  # per axis
CONVOLUTIONS = (F.conv1d, F.conv2d, F.conv3d)  # PyTorch's depthwise convolution of ranks 1, 2, 3


def shifted_sum(padded: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """The depthwise convolution of any rank ``d`` as a sum of shifted copies: ``padded`` (B, …,
    n_k + 2, …, C), ``weight`` (C, 3, …, 3), ``bias`` (C,) → (B, *grid, C)."""
    d = padded.dim() - 2
    shape = [n - (TAPS - 1) for n in padded.shape[1:-1]]  # the grid
    out = bias.expand(padded.shape[0], *shape, -1)  # (B, *grid, C)
    for taps in itertools.product(range(TAPS), repeat=d):
        window = padded[(slice(None), *(slice(i, i + n) for i, n in zip(taps, shape)))]
        out = out + window * weight[(slice(None), *taps)]  # (B, *grid, C)
    return out


class ShortConv(nn.Module):
    """Depthwise convolution with ``3^d`` taps per channel on a grid of rank ``d`` (module
    docstring), causal along ``causal_axes``.

    Parameters: ``weight`` (C, 3, …, 3), one axis of three taps per grid axis, initialised as
    PyTorch's ``Conv1d`` (uniform in ±1/sqrt(fan_in), fan_in = 3^d), and ``bias`` (C,).
    ``weight[c, i_1, …, i_d]`` multiplies the input at offset ``i_k - 1`` along a symmetric axis
    ``k`` and ``i_k - 2`` along a causal one.
    """

    def __init__(
        self,
        channels: int,
        d: int,
        causal_axes: Sequence[int],
        *,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        self.causal_axes = tuple(causal_axes)
        bound = 1 / math.sqrt(TAPS**d)
        factory = dict(device=device, dtype=dtype)
        self.weight = nn.Parameter(
            torch.empty(channels, *[TAPS] * d, **factory).uniform_(-bound, bound)
        )  # (C, 3, …, 3)
        self.bias = nn.Parameter(torch.empty(channels, **factory).uniform_(-bound, bound))  # (C,)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        """``u`` (B, *grid, C) → (B, *grid, C), in ``u``'s dtype."""
        d = u.dim() - 2
        pad = []  # F.pad's order: the last axis first, (before, after) per axis
        for k in reversed(range(d)):
            pad += [2, 0] if k in self.causal_axes else [1, 1]
        padded = F.pad(u.movedim(-1, 1), pad)  # (B, C, …, n_k + 2, …)
        weight, bias = self.weight.to(u.dtype), self.bias.to(u.dtype)  # (C, 3, …, 3), (C,)
        if d > len(CONVOLUTIONS):
            return shifted_sum(padded.movedim(1, -1), weight, bias)  # (B, *grid, C)
        out = CONVOLUTIONS[d - 1](padded, weight.unsqueeze(1), bias, groups=u.shape[-1])
        return out.movedim(1, -1)  # (B, *grid, C)

    def extra_repr(self) -> str:
        rank = self.weight.dim() - 1
        return f"channels={self.weight.shape[0]}, rank={rank}, causal_axes={self.causal_axes}"
