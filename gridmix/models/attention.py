"""Causal attention for the autoregressive baselines: timm's ``Attention`` with its mask fixed to causal."""

from __future__ import annotations

import torch
from timm.models.vision_transformer import Attention


class CausalAttention(Attention):
    """timm's ``Attention`` (same constructor), always causal: a block never lets a position see a later one."""

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool = False) -> torch.Tensor:
        return super().forward(x, attn_mask=attn_mask, is_causal=True)
