"""A pre-norm transformer over the tokens of any ``d``-dimensional grid, with a choice of token mixer.

Used where timm has no ready-made model: 1-D sequences and 3-D videos. Every input position is one
token (a per-token linear embedding, i.e. patch size 1), plus learned positional parameters of shape
(N, C); then ``depth`` blocks, a final norm and a read-out. The token mixers:

- ``"attention"``: timm ``Block`` with dense attention over all N tokens;
- ``"mixer"``: the same timm ``Block`` with :class:`gridmix.ConcentrationMixer` as ``attn_layer``;
- ``"divided"``: :class:`DividedSpaceTimeBlock`, attention over the first axis (time) at each location,
  then over the other axes (space) within each frame, as TimeSformer's divided space-time attention;
- or any ``attn_layer`` (a registered mixer's, :meth:`gridmix.mixers.registry.MixerSpec.layer`) in the same
  timm ``Block``.

Everything else (embedding, positions, depth, width, MLP, norms, read-out) is the same for all of them.

Shape legend:
    B: batch, C_in: input channels, N: grid tokens (n_1·…·n_d), C: embed dim, K: outputs
    T: first grid axis (time), S: tokens per frame (n_2·…·n_d)
"""

from __future__ import annotations

import torch
from timm.layers import Mlp, trunc_normal_
from timm.models.vision_transformer import Attention, Block
from torch import nn

from gridmix.grid import Grid
from gridmix.models.config import BackboneConfig, MixerConfig

TOKEN_MIXERS = ("attention", "mixer", "divided")
READOUTS = ("mean", "flatten")
DEFAULT_MIXER = MixerConfig()


class DividedSpaceTimeBlock(nn.Module):
    """Pre-norm block: attention along time per location, then along space per frame, then the MLP."""

    def __init__(self, dim: int, grid: Grid, *, num_heads: int, mlp_ratio: float, qkv_bias: bool = True) -> None:
        super().__init__()
        if grid.ndim < 2:
            raise ValueError(f"divided space-time attention needs a grid with time and space axes; got {grid}")
        self.frames, self.frame_tokens = grid[0], grid.numel // grid[0]
        self.norm_time = nn.LayerNorm(dim)
        self.attn_time = Attention(dim, num_heads=num_heads, qkv_bias=qkv_bias)
        self.norm_space = nn.LayerNorm(dim)
        self.attn_space = Attention(dim, num_heads=num_heads, qkv_bias=qkv_bias)
        self.norm_mlp = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, hidden_features=int(dim * mlp_ratio))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: (B, N, C) in row-major (T, space) order."""
        B, N, C = x.shape
        T, S = self.frames, self.frame_tokens
        t = x.reshape(B, T, S, C).transpose(1, 2).reshape(B * S, T, C)  # each location's time line
        t = t + self.attn_time(self.norm_time(t))
        s = t.reshape(B, S, T, C).transpose(1, 2).reshape(B * T, S, C)  # each frame
        s = s + self.attn_space(self.norm_space(s))
        x = s.reshape(B, N, C)
        return x + self.mlp(self.norm_mlp(x))


class GridTransformer(nn.Module):
    """(B, C_in, *grid) → (B, K): per-token embedding, learned positions, blocks, norm, read-out.

    Args:
        grid: the token grid; inputs must have exactly this spatial shape.
        in_chans: input channels per grid position.
        num_outputs: K.
        backbone: width, depth, heads, MLP ratio.
        token_mixer: one of ``TOKEN_MIXERS`` (see the module docstring).
        mixer: the concentration mixer's settings (used when ``token_mixer="mixer"``).
        attn_layer: when given, every block's token mixer (timm's ``attn_layer``), whatever ``token_mixer`` says.
        readout: ``"mean"`` pools the tokens then applies a linear head; ``"flatten"`` applies a linear
            head to all N·C features (forecasting heads, where each output needs positions).
    """

    def __init__(self, grid: Grid, *, in_chans: int, num_outputs: int, backbone: BackboneConfig,
                 token_mixer: str = "attention", mixer: MixerConfig = DEFAULT_MIXER, readout: str = "mean",
                 attn_layer: type[nn.Module] | None = None) -> None:
        super().__init__()
        self.grid = Grid.parse(grid)
        if token_mixer not in TOKEN_MIXERS:
            raise ValueError(f"token_mixer={token_mixer!r}; expected one of {TOKEN_MIXERS}")
        if readout not in READOUTS:
            raise ValueError(f"readout={readout!r}; expected one of {READOUTS}")
        dim, N = backbone.embed_dim, self.grid.numel
        self.in_chans, self.readout = in_chans, readout
        self.embed = nn.Linear(in_chans, dim)
        self.pos_embed = nn.Parameter(torch.zeros(1, N, dim))
        if token_mixer == "divided" and attn_layer is None:
            blocks = [DividedSpaceTimeBlock(dim, self.grid, num_heads=backbone.num_heads,
                                            mlp_ratio=backbone.mlp_ratio) for _ in range(backbone.depth)]
        else:
            if attn_layer is None:
                attn_layer = mixer.attn_layer(self.grid) if token_mixer == "mixer" else Attention
            blocks = [Block(dim, num_heads=backbone.num_heads, mlp_ratio=backbone.mlp_ratio, qkv_bias=True,
                            attn_layer=attn_layer) for _ in range(backbone.depth)]
        self.blocks = nn.Sequential(*blocks)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim * N if readout == "flatten" else dim, num_outputs)
        trunc_normal_(self.pos_embed, std=0.02)
        self.apply(_init_linear)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: (B, C_in, *grid) → (B, K)."""
        if tuple(x.shape[1:]) != (self.in_chans, *self.grid.shape):
            raise ValueError(f"expected input (B, {self.in_chans}, {', '.join(map(str, self.grid))}); "
                             f"got {tuple(x.shape)}")
        tokens = x.flatten(2).transpose(1, 2)  # (B, N, C_in), row-major grid order
        tokens = self.norm(self.blocks(self.embed(tokens) + self.pos_embed))  # (B, N, C)
        pooled = tokens.flatten(1) if self.readout == "flatten" else tokens.mean(dim=1)
        return self.head(pooled)


def _init_linear(module: nn.Module) -> None:
    """timm's ViT initialisation of linear layers (truncated normal, zero bias), for both mixers alike."""
    if isinstance(module, nn.Linear):
        trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
