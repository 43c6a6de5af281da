"""A depthwise-convolution token mixer, and the ``vit-dwconv`` baseline built from a track's own
ViT.

The baseline takes the track's matched baseline (a timm ``VisionTransformer``), and swaps each
block's attention for :class:`DepthwiseConvMixer`: everything but the token mixer stays the track's
own, so the comparison is as fair as the idea's.

Shape legend:
    B: batch, N = H·W grid tokens, C: channels
"""

from __future__ import annotations

from collections.abc import Callable

from timm.models.vision_transformer import VisionTransformer
from torch import Tensor, nn

from gridmix import Grid, ModelSpec, Track

KERNEL_SIZE = 5


class DepthwiseConvMixer(nn.Module):
    """``y = W_o · dwconv(W_v · x)`` on the grid: a local, input-independent token mixer."""

    def __init__(self, dim: int, grid: Grid, *, kernel_size: int = KERNEL_SIZE) -> None:
        super().__init__()
        self.grid = Grid.parse(grid)
        self.v = nn.Linear(dim, dim)
        self.conv = nn.Conv2d(dim, dim, kernel_size, padding=kernel_size // 2, groups=dim)
        self.proj = nn.Linear(dim, dim)

    def forward(
        self, x: Tensor, attn_mask: Tensor | None = None, is_causal: bool = False
    ) -> Tensor:
        """``x``: (B, N, C) in row-major grid order → (B, N, C); timm's Block passes the two unused
        arguments."""
        if attn_mask is not None or is_causal:
            raise ValueError(
                "DepthwiseConvMixer has no attention to mask; it is always symmetric and local"
            )
        B, N, C = x.shape
        H, W = self.grid.shape
        v = self.v(x).transpose(1, 2).reshape(B, C, H, W)
        return self.proj(self.conv(v).reshape(B, C, N).transpose(1, 2))


def with_conv_mixer(build: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
    """A builder: the model ``build`` makes, with every ViT block's attention replaced by the conv
    mixer."""

    def build_conv(grid: Grid, **model_kwargs) -> nn.Module:
        model = build(grid, **model_kwargs)
        vits = [module for module in model.modules() if isinstance(module, VisionTransformer)]
        if not vits:
            raise ValueError(
                f"vit-dwconv needs a timm VisionTransformer inside the matched baseline; "
                f"got {type(model).__name__}"
            )
        for block in vits[0].blocks:
            block.attn = DepthwiseConvMixer(vits[0].embed_dim, grid)
        return model

    return build_conv


def conv_baseline(track: Track) -> ModelSpec:
    """``vit-dwconv`` for ``track``: its matched ViT baseline with a depthwise 5x5 convolution as
    mixer."""
    return ModelSpec(
        "vit-dwconv",
        with_conv_mixer(track.model(track.matched_baseline).build),
        description=f"the track's ViT with a depthwise {KERNEL_SIZE}x{KERNEL_SIZE} convolution "
        f"as token mixer (local baseline)",
    )
