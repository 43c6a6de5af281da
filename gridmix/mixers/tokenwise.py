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

import inspect

import torch
from torch import nn

from gridmix.core.grid import Grid, GridLike
from gridmix.mixers.concentration.layer import (
    ConcentrationMixer,
    add_value_projections,
    check_heads_and_prefix,
)
from gridmix.mixers.contract import keywords_of, taken

# what W_v and W_o are built from (add_value_projections's arguments: qkv_bias, proj_bias,
# proj_drop, device, dtype), with the concentration mixer's defaults
VALUE_DEFAULTS = {
    p.name: p.default
    for p in inspect.signature(ConcentrationMixer).parameters.values()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
    and p.name in inspect.signature(add_value_projections).parameters
}


class TokenwiseMixer(nn.Module):
    """``y = W_o · W_v · x`` on every token alone; takes the arguments of
    :class:`~gridmix.ConcentrationMixer` so that the two are interchangeable, e.g. as timm's
    ``attn_layer``: ``num_heads`` and ``num_prefix_tokens`` checked alike; those of ``W_v`` and
    ``W_o`` (:data:`VALUE_DEFAULTS`) used, with its defaults; its mixing arguments (``rank``,
    ``modes``, ``causal_axes``, ``causal_form`` …) ignored; timm's others (``attn_drop`` …) warned
    of or refused as it does."""

    def __init__(
        self, dim: int, grid: GridLike, *, num_heads: int = 8, num_prefix_tokens: int = 0, **kwargs
    ) -> None:
        super().__init__()
        self.grid = Grid.parse(grid)
        check_heads_and_prefix(dim, num_heads, num_prefix_tokens)
        concentration = keywords_of(ConcentrationMixer)
        ConcentrationMixer._warn_ignored(
            {name: value for name, value in kwargs.items() if name not in concentration}
        )
        self.dim, self.num_prefix_tokens = dim, num_prefix_tokens
        add_value_projections(self, dim, **(VALUE_DEFAULTS | taken(kwargs, VALUE_DEFAULTS)))

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
