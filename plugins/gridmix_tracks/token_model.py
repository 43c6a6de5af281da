"""The token-id transformer of the built-in recall tracks (``mqar`` on a line, ``recall`` on any
grid): embedding, learned positions, timm blocks around a token mixer, norm, a logit head per
token."""

from __future__ import annotations

import torch
from timm.layers import trunc_normal_
from timm.models.vision_transformer import Block
from torch import nn

from gridmix.core.grid import Grid
from gridmix.models import BackboneConfig


class TokenTransformer(nn.Module):
    """(B, *grid) token ids → (B, N, vocab) logits, N tokens in row-major grid order; ``causal``
    tells every block's mixer to be causal (``is_causal``), as a language model's are."""

    def __init__(
        self,
        grid: Grid,
        *,
        vocab: int,
        backbone: BackboneConfig,
        attn_layer: type[nn.Module],
        causal: bool = False,
    ) -> None:
        super().__init__()
        self.grid, self.causal, dim = Grid.parse(grid), causal, backbone.embed_dim
        self.embed = nn.Embedding(vocab, dim)
        self.pos_embed = nn.Parameter(torch.zeros(1, self.grid.numel, dim))
        self.blocks = nn.ModuleList(
            Block(
                dim,
                num_heads=backbone.num_heads,
                mlp_ratio=backbone.mlp_ratio,
                qkv_bias=True,
                attn_layer=attn_layer,
            )
            for _ in range(backbone.depth)
        )
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)
        trunc_normal_(self.pos_embed, std=0.02)
        trunc_normal_(self.embed.weight, std=0.02)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                trunc_normal_(module.weight, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tuple(tokens.shape[1:]) != self.grid.shape:
            raise ValueError(
                f"expected token ids (B, {', '.join(map(str, self.grid))}); "
                f"got {tuple(tokens.shape)}"
            )
        x = self.embed(tokens.flatten(1)) + self.pos_embed  # (B, N, C), row-major grid order
        for block in self.blocks:
            x = block(x, is_causal=self.causal)  # (B, N, C)
        return self.head(self.norm(x))  # (B, N, vocab)
