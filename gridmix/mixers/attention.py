"""Attention as a registered mixer: timm's ``Attention`` (fused ``scaled_dot_product_attention``)
over every token, and :class:`CausalAttention`, the same layer always causal, for causal axes.

A causal mask over the row-major token order is exactly causal along the first grid axis (a token
never sees a later frame or step) and stricter within it, so attention declares ``causal="first"``.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import torch
from timm.models.vision_transformer import Attention
from torch import nn

from gridmix.core.grid import Grid

_ATTENTION_KWARGS = frozenset(inspect.signature(Attention.__init__).parameters) - {
    "self",
    "dim",
    "num_heads",
}


class CausalAttention(Attention):
    """timm's ``Attention`` (same constructor), always causal: a block never lets a position see a
    later one."""

    def forward(
        self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool = False
    ) -> torch.Tensor:
        return super().forward(x, attn_mask=attn_mask, is_causal=True)


def build_attention(
    dim: int,
    grid: Grid,
    *,
    num_heads: int,
    causal_axes: Sequence[int] = (),
    num_prefix_tokens: int = 0,
    **timm_kwargs,
) -> nn.Module:
    """timm's multi-head attention over all P + N tokens (causal in token order with
    ``causal_axes=(0,)``); the keyword arguments timm's ``Attention`` takes (``qkv_bias``,
    ``attn_drop``, ``device``, …) pass through."""
    if tuple(causal_axes) not in ((), (0,)):
        raise ValueError(
            "attention is causal along the first grid axis only; got "
            f"causal_axes={tuple(causal_axes)}"
        )
    layer = CausalAttention if causal_axes else Attention
    return layer(
        dim, num_heads=num_heads, **{k: v for k, v in timm_kwargs.items() if k in _ATTENTION_KWARGS}
    )
