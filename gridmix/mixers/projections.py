"""What the attention-family mixers share: timm's ``Attention`` projections (``qkv``, ``q_norm``,
``k_norm``, ``norm``, ``proj``, ``proj_drop``, with timm's parameter names, so a state dict moves
between them), the split into heads and the merge back, the checks of their arguments, and
:class:`GridAttention`, those projections over the prefix tokens and the tokens of a grid.

Shape legend:
    B: batch (or independent lines), T: tokens, C: channels, h: heads, c = C / h
"""

from __future__ import annotations

import abc
import inspect

import torch
from torch import nn

from gridmix.core.grid import Grid, GridLike
from gridmix.mixers.contract import check_mixer_input, check_prefix_tokens, keywords_of


def check_heads(dim: int, num_heads: int) -> None:
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"num_heads={num_heads!r}; expected a positive integer")
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1 or dim % num_heads:
        raise ValueError(f"dim={dim!r}; expected a positive multiple of num_heads={num_heads}")


def check_probability(name: str, p: float) -> None:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{name}={p!r}; expected a probability in [0, 1)")


class AttentionProjections(nn.Module):
    """timm's ``Attention`` projections on ``dim`` channels in ``num_heads`` heads (timm's default
    8); subclasses attend in between."""

    def __init__(
        self,
        dim: int,
        *,
        num_heads: int = 8,
        qkv_bias: bool = True,
        qk_norm: bool = False,
        scale_norm: bool = False,
        proj_bias: bool = True,
        proj_drop: float = 0.0,
        norm_layer: type[nn.Module] | None = None,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        check_heads(dim, num_heads)
        check_probability("proj_drop", proj_drop)
        self.dim, self.num_heads, self.head_dim = dim, num_heads, dim // num_heads
        dd = dict(device=device, dtype=dtype)
        norm_layer = norm_layer or nn.LayerNorm
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias, **dd)
        self.q_norm = norm_layer(self.head_dim, **dd) if qk_norm else nn.Identity()
        self.k_norm = norm_layer(self.head_dim, **dd) if qk_norm else nn.Identity()
        self.norm = norm_layer(dim, **dd) if scale_norm else nn.Identity()
        self.proj = nn.Linear(dim, dim, bias=proj_bias, **dd)
        self.proj_drop = nn.Dropout(proj_drop)

    def heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``x`` (B, T, C) → ``q, k, v``, each (B, h, T, c), with ``q`` and ``k`` normalised."""
        B, T, _ = x.shape
        q, k, v = (
            self.qkv(x)
            .reshape(B, T, 3, self.num_heads, self.head_dim)
            .permute(2, 0, 3, 1, 4)
            .unbind(0)
        )
        return self.q_norm(q), self.k_norm(k), v  # (B, h, T, c) each

    def merge(self, out: torch.Tensor) -> torch.Tensor:
        """The heads' outputs (B, h, T, c) → (B, T, C) through ``norm``, ``proj`` and its
        dropout."""
        B, _, T, _ = out.shape
        # (B, T, C)
        return self.proj_drop(self.proj(self.norm(out.transpose(1, 2).reshape(B, T, self.dim))))


PROJECTION_KWARGS = frozenset(inspect.signature(AttentionProjections.__init__).parameters) - {
    "self",
    "dim",
    "num_heads",
}  # qkv_bias, qk_norm, scale_norm, proj_bias, proj_drop, norm_layer, device, dtype


class GridAttention(AttentionProjections, metaclass=abc.ABCMeta):
    """:class:`AttentionProjections` (``num_heads`` and timm's ``projections``) over
    ``num_prefix_tokens`` prefix tokens (an integer >= 0) and the tokens of ``grid`` (kept as a
    :class:`~gridmix.core.grid.Grid`), as timm's ``attn_layer``: ``forward`` checks its input
    (:func:`~gridmix.mixers.contract.check_mixer_input`) and splits it into heads, the subclass
    attends (:meth:`attend`), and the heads are merged back."""

    def __init__(
        self, dim: int, grid: GridLike, *, num_prefix_tokens: int = 0, **projections
    ) -> None:
        super().__init__(dim, **projections)
        self.grid = Grid.parse(grid)
        check_prefix_tokens(num_prefix_tokens)
        self.num_prefix_tokens = num_prefix_tokens

    @abc.abstractmethod
    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """The heads' outputs from ``q, k, v``: (B, h, T, c) each → (B, h, T, c)."""

    def forward(
        self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool = False
    ) -> torch.Tensor:
        """``x``: (B, P + N, C) → (B, P + N, C); causality is the built ``causal_axes``, whatever
        ``is_causal`` says."""
        check_mixer_input(self, x, attn_mask, is_causal)
        return self.merge(self.attend(*self.heads(x)))  # (B, T, C)

    @classmethod
    def keywords(cls) -> frozenset[str]:
        """The keyword arguments ``cls`` takes, its own, :class:`GridAttention`'s and timm's
        projections: what its builder passes on (:func:`~gridmix.mixers.contract.taken`)."""
        return keywords_of(cls) | keywords_of(GridAttention) | PROJECTION_KWARGS
