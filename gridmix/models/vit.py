"""timm image models on a token grid: ``VisionTransformer`` (attention or any drop-in mixer) and
``MlpMixer``.

Grids are given in tokens and images are exactly grid-sized with ``patch_size=1``, so a ``32x32``
grid is 1024 tokens. The ViT has no class token and average-pools its tokens (with a class token the
concentration mixer would hand that token only the grid mean, a weaker read-out than pooling).

Shape legend:
    B: batch, C_in: input channels, H, W: the grid, K: outputs
"""

from __future__ import annotations

import dataclasses

import torch
from timm.layers import PatchEmbed
from timm.models.mlp_mixer import MlpMixer
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from gridmix.core.grid import Grid
from gridmix.models.mixer_config import BackboneConfig

MLP_MIXER_MAX_TOKENS = 4096  # its token MLP holds two dense N × N/2 matrices per block


class ContiguousPatchEmbed(PatchEmbed):
    """timm's ``PatchEmbed`` with its tokens (B, N, C) laid out contiguously.

    timm's flattens the convolution's (B, C, H, W) output and transposes it: a view whose channels
    lie N apart. Element-wise ops follow their input's layout, so the whole residual stream would
    keep it, and every LayerNorm would copy its input back, forward and backward (ten copies a step
    on a 2-block ViT; docs/benchmarks.md, "Freed memory kept for reuse, and the ViT's residual
    stream"). One copy here spares them; the values are the same bit for bit.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x).contiguous()  # (B, N, C)


def _token_grid(grid: Grid, in_chans: int, num_outputs: int) -> dict:
    """timm's keyword arguments for a model with one token a grid cell (grid-sized images,
    ``patch_size=1``), ``in_chans`` channels in and ``num_outputs`` out."""
    return dict(img_size=grid.shape, patch_size=1, in_chans=in_chans, num_classes=num_outputs)


def build_vit(
    grid: Grid,
    *,
    in_chans: int,
    num_outputs: int,
    backbone: BackboneConfig,
    attn_layer: type[nn.Module] | None = None,
    global_pool: str = "avg",
    fc_norm: bool | None = None,
) -> VisionTransformer:
    """timm's ViT mapping (B, C_in, H, W) → (B, K); ``attn_layer`` replaces attention (``None``:
    timm's).

    ``global_pool=""`` keeps every token: (B, H·W, K), for per-token outputs. ``fc_norm`` is timm's:
    ``None`` puts a LayerNorm after average pooling; ``False`` normalises every token before pooling
    instead, so a model without token mixing has a logit that is a sum of per-token terms (no
    interaction between tokens).
    """
    grid = Grid.parse(grid)
    if grid.ndim != 2:
        raise ValueError(
            f"build_vit takes a 2-d grid (height x width); got the {grid.ndim}-d grid {grid}"
        )
    extra = {} if attn_layer is None else {"attn_layer": attn_layer}
    return VisionTransformer(
        **_token_grid(grid, in_chans, num_outputs),
        **dataclasses.asdict(backbone),  # embed_dim, depth, num_heads, mlp_ratio: timm's names
        qkv_bias=True,
        class_token=False,
        embed_layer=ContiguousPatchEmbed,
        global_pool=global_pool,
        fc_norm=fc_norm,
        **extra,
    )


def mlp_mixer_supports(grid: Grid) -> str | None:
    """``None`` when MLP-Mixer's dense token MLP fits the grid, else why not."""
    if grid.numel > MLP_MIXER_MAX_TOKENS:
        return (
            f"MLP-Mixer's token MLP is dense in N = {grid.numel} tokens "
            f"(> {MLP_MIXER_MAX_TOKENS}); its N² parameters do not scale to this grid"
        )
    return None


def build_mlp_mixer(
    grid: Grid,
    *,
    in_chans: int,
    num_outputs: int,
    backbone: BackboneConfig,
    global_pool: str = "avg",
) -> MlpMixer:
    """timm's MLP-Mixer (B, C_in, H, W) → (B, K) with the backbone's width and depth (``num_heads``
    unused); ``global_pool=""`` keeps every token: (B, H·W, K)."""
    grid = Grid.parse(grid)
    reason = mlp_mixer_supports(grid)
    if reason is not None:
        raise ValueError(reason)
    return MlpMixer(
        **_token_grid(grid, in_chans, num_outputs),
        num_blocks=backbone.depth,
        embed_dim=backbone.embed_dim,
        mlp_ratio=(0.5, backbone.mlp_ratio),
        global_pool=global_pool,
    )
