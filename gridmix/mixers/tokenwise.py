"""The no-mixing control: ``y = W_o · W_v · x`` per token, with the concentration mixer's
constructor.

A track's control arm is its idea model with :class:`TokenwiseMixer` in place of the concentration
mixer: the same backbone, the same value and output projections, no token mixing at all. If the idea
does not beat it, the idea's token mixing is not what its results rest on (docs/analysis.md,
"Mechanism").

Shape legend:
    B: batch, T: tokens (prefix tokens, then the grid), C: channels
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from gridmix.core.grid import Grid
from gridmix.mixers.concentration.layer import (
    ConcentrationMixer,
    add_value_projections,
    check_heads_and_prefix,
)


class TokenwiseMixer(nn.Module):
    """``y = W_o · W_v · x`` on every token alone; takes (and ignores) the mixing arguments of
    :class:`~gridmix.ConcentrationMixer` (``rank``, ``modes``, ``causal_axes``, ``prefix_mode``,
    ``spectrum``, ``start``, timm's ``attn_drop`` …) so that the two are interchangeable, e.g. as
    timm's ``attn_layer``."""

    def __init__(
        self,
        dim: int,
        grid: Grid | str | int | Sequence[int],
        *,
        num_heads: int = 8,
        num_prefix_tokens: int = 0,
        qkv_bias: bool = False,
        proj_bias: bool = True,
        proj_drop: float = 0.0,
        rank=None,
        modes=None,
        causal_axes: Sequence[int] = (),
        prefix_mode: str = "mean",
        spectrum: str = "capped",
        start="lowpass",
        device=None,
        dtype=None,
        **timm_kwargs,
    ) -> None:
        super().__init__()
        self.grid = Grid.parse(grid)
        check_heads_and_prefix(dim, num_heads, num_prefix_tokens)
        ConcentrationMixer._warn_ignored(timm_kwargs)
        self.dim, self.num_prefix_tokens = dim, num_prefix_tokens
        add_value_projections(self, dim, qkv_bias, proj_bias, proj_drop, device, dtype)

    def forward(
        self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool = False
    ) -> torch.Tensor:
        """``x``: (B, P + N, C) → (B, P + N, C); every token on its own, so it is causal on any
        axis."""
        if attn_mask is not None:
            raise ValueError("TokenwiseMixer cannot apply attn_mask: it mixes no tokens")
        B, T, C = x.shape
        expected = self.num_prefix_tokens + self.grid.numel
        if T != expected or C != self.dim:
            raise ValueError(f"expected (B, {expected} tokens, {self.dim}); got {tuple(x.shape)}")
        return self.proj_drop(self.proj(self.v(x)))  # (B, T, C)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, grid={self.grid}, prefix={self.num_prefix_tokens}, no token mixing"
