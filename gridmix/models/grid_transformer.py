"""A pre-norm transformer over the tokens of any ``d``-dimensional grid, with any registered token
mixer.

Used where timm has no ready-made model: 1-D sequences and 3-D videos. Every input position is one
token (a per-token linear embedding, i.e. patch size 1), plus learned positional parameters of shape
(N, C); then ``depth`` timm ``Block`` modules whose token mixer is ``attn_layer`` (a registered
mixer's, :meth:`gridmix.mixers.contract.MixerSpec.layer`, through a track's
:meth:`~gridmix.tracks.contract.Backbone.around`), a final norm and a read-out. Everything but the
token mixer (embedding, positions, depth, width, MLP, norms, read-out) is the same for every mixer.

Shape legend:
    B: batch, C_in: input channels, N: grid tokens (n_1·…·n_d), C: embed dim, K: outputs
"""

from __future__ import annotations

import torch
from timm.layers import trunc_normal_
from timm.models.vision_transformer import Block
from torch import nn

from gridmix.core.grid import Grid
from gridmix.models.mixer_config import BackboneConfig

READOUTS = ("mean", "flatten", "tokens")


class GridTransformer(nn.Module):
    """(B, C_in, *grid) → (B, K), or (B, N, K) per token: per-token embedding, learned positions,
    blocks, norm, read-out.

    Args:
        grid: the token grid; inputs must have exactly this spatial shape.
        in_chans: input channels per grid position.
        num_outputs: K.
        backbone: width, depth, heads, MLP ratio.
        attn_layer: every block's token mixer (timm's ``attn_layer``, a registered mixer's).
        readout: ``"mean"`` pools the tokens then applies a linear head; ``"flatten"`` applies a
            linear head to all N·C features (forecasting heads, where each output needs
            positions); ``"tokens"`` applies the head to every token after the per-token norm, an
            output (B, N, K) in row-major grid order (per-cell targets).
    """

    def __init__(
        self,
        grid: Grid,
        *,
        in_chans: int,
        num_outputs: int,
        backbone: BackboneConfig,
        attn_layer: type[nn.Module],
        readout: str = "mean",
    ) -> None:
        super().__init__()
        self.grid = Grid.parse(grid)
        if readout not in READOUTS:
            raise ValueError(f"readout={readout!r}; expected one of {READOUTS}")
        dim, N = backbone.embed_dim, self.grid.numel
        self.in_chans, self.readout = in_chans, readout
        self.embed = nn.Linear(in_chans, dim)
        self.pos_embed = nn.Parameter(torch.zeros(1, N, dim))
        blocks = [
            Block(
                dim,
                num_heads=backbone.num_heads,
                mlp_ratio=backbone.mlp_ratio,
                qkv_bias=True,
                attn_layer=attn_layer,
            )
            for _ in range(backbone.depth)
        ]
        self.blocks = nn.Sequential(*blocks)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim * N if readout == "flatten" else dim, num_outputs)
        trunc_normal_(self.pos_embed, std=0.02)
        self.apply(_init_linear)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: (B, C_in, *grid) → (B, K); (B, N, K) with ``readout="tokens"``."""
        if tuple(x.shape[1:]) != (self.in_chans, *self.grid.shape):
            raise ValueError(
                f"expected input (B, {self.in_chans}, {', '.join(map(str, self.grid))}); "
                f"got {tuple(x.shape)}"
            )
        tokens = x.flatten(2).transpose(1, 2)  # (B, N, C_in), row-major grid order
        tokens = self.norm(self.blocks(self.embed(tokens) + self.pos_embed))  # (B, N, C)
        if self.readout == "tokens":
            return self.head(tokens)  # (B, N, K)
        pooled = tokens.flatten(1) if self.readout == "flatten" else tokens.mean(dim=1)  # (B, ·)
        return self.head(pooled)  # (B, K)


def _init_linear(module: nn.Module) -> None:
    """timm's ViT initialisation of linear layers (truncated normal, zero bias), for both mixers
    alike."""
    if isinstance(module, nn.Linear):
        trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
