"""Axial and divided space-time attention on an N-d grid, each as timm's ``attn_layer``.

**Axial attention** follows Ho et al. 2019, "Axial Attention in Multidimensional Transformers": full
attention along one grid axis at a time, axis 0, then axis 1, …, each axis with its own multi-head
``qkv`` and output projection (:class:`LineAttention`, timm's ``Attention`` on lines), ``y =
A_{d-1}(… A_1(A_0(x)))`` with no norm or residual between them (the block's residual wraps the
whole). Any grid rank; on a causal axis the attention along it is causal, and attention along
another axis never moves information between positions of that axis, so the mixer is exactly causal
along any set of axes (causal ``"any"``).

**Divided attention** follows Bertasius et al. 2021, "Is Space-Time Attention All You Need for Video
Understanding?" (TimeSformer's divided space-time attention) as one ``attn_layer``: attention along
the first axis (time) at each location, then attention over all the other axes jointly (space)
within each frame, each with its own projections, ``y = A_space(A_time(x))``. Grid rank >= 2;
exactly causal along the first axis only (causal ``"first"``).
:class:`gridmix.models.grid_transformer.DividedSpaceTimeBlock` is the block-level form (a norm and a
residual around each of the two).

Both refuse prefix tokens (``num_prefix_tokens > 0`` is a ``ValueError``): a class token is on no
axis.

Shape legend:
    B: batch, N: grid tokens (n_0·…·n_{d-1}), C: channels, h: heads, c = C / h
    M: independent lines (batch × the other axes), L: a line's length
    T: first grid axis (time), S: tokens per frame (n_1·…·n_{d-1})
    grid axes are in row-major order (the last fastest), as timm's token order
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from gridmix.core.grid import Grid, GridLike
from gridmix.mixers.contract import check_mixer_input, keywords_of, taken
from gridmix.mixers.grids import causal_set, same_rank_copy
from gridmix.mixers.projections import (
    PROJECTION_KWARGS,
    AttentionProjections,
    check_heads,
    check_probability,
)


def _check(
    dim: int,
    grid: GridLike,
    num_heads: int,
    causal_axes: Sequence[int],
    num_prefix_tokens: int,
    what: str,
) -> tuple[Grid, tuple[int, ...]]:
    """The grid and the sorted non-negative causal axes; ``ValueError`` for a bad argument."""
    grid = Grid.parse(grid)
    check_heads(dim, num_heads)
    if num_prefix_tokens != 0:
        raise ValueError(
            f"num_prefix_tokens={num_prefix_tokens!r}; expected 0 ({what} takes no prefix tokens)"
        )
    return grid, causal_set(causal_axes, grid)


class LineAttention(AttentionProjections):
    """Multi-head softmax attention within each of M independent lines, with the parameters of
    timm's ``Attention`` (``qkv``, ``q_norm``, ``k_norm``, ``norm``, ``proj``); ``causal`` makes it
    causal along the line."""

    def __init__(self, dim: int, *, num_heads: int, attn_drop: float = 0.0, **projections) -> None:
        super().__init__(dim, num_heads=num_heads, **projections)
        check_probability("attn_drop", attn_drop)
        self.attn_drop = attn_drop

    def forward(self, x: torch.Tensor, causal: bool = False) -> torch.Tensor:
        """``x``: (M, L, C) → (M, L, C)."""
        q, k, v = self.heads(x)  # (M, h, L, c) each
        out = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.attn_drop if self.training else 0.0, is_causal=causal
        )  # (M, h, L, c)
        return self.merge(out)  # (M, L, C)


class _LinesMixer(nn.Module, metaclass=abc.ABCMeta):
    """What axial and divided attention share: the checked arguments (:func:`_check`, then
    :meth:`_check_grid`), the :class:`LineAttention` modules (:meth:`_build`) and the repr."""

    what = ""  # the mixer's name in errors

    def __init__(
        self,
        dim: int,
        grid: GridLike,
        *,
        num_heads: int = 8,
        causal_axes: Sequence[int] = (),
        num_prefix_tokens: int = 0,
        **line_kwargs,
    ) -> None:
        super().__init__()
        self.grid, self.causal_axes = _check(
            dim, grid, num_heads, causal_axes, num_prefix_tokens, self.what
        )
        self._check_grid(causal_axes)
        self.dim, self.num_heads = dim, num_heads
        self._build(lambda: LineAttention(dim, num_heads=num_heads, **line_kwargs))

    def _check_grid(self, causal_axes: Sequence[int]) -> None:
        """``ValueError`` for a grid or causal axes this mixer cannot serve (any, here)."""

    @abc.abstractmethod
    def _build(self, line: Callable[[], LineAttention]) -> None:
        """Make the mixer's :class:`LineAttention` modules, each by a call of ``line``."""

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, grid={self.grid}, heads={self.num_heads}, "
            f"causal_axes={self.causal_axes}"
        )


class AxialAttention(_LinesMixer):
    """Attention along each grid axis in turn, one :class:`LineAttention` per axis (module
    docstring).

    Args:
        dim: channels ``C``, divisible by ``num_heads``.
        grid: the token grid (any rank).
        num_heads: heads ``h`` of every axis.
        causal_axes: grid axes on which no token sees a later one (negative indices allowed).
        num_prefix_tokens: must be 0.
        line_kwargs: :class:`LineAttention`'s (timm's) arguments, ``qkv_bias``, ``device``,
            ``dtype`` …
    """

    what = "axial attention"

    def _build(self, line: Callable[[], LineAttention]) -> None:
        self.axes = nn.ModuleList(line() for _ in self.grid)

    def forward(
        self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool = False
    ) -> torch.Tensor:
        """``x``: (B, N, C) → (B, N, C); causality is the built ``causal_axes``, whatever
        ``is_causal`` says."""
        check_mixer_input(self, x, attn_mask, is_causal)
        B, N, C = x.shape
        y = x.reshape(B, *self.grid, C)  # (B, n_0, …, n_{d-1}, C)
        for axis, (n, attention) in enumerate(zip(self.grid, self.axes)):
            lines = y.movedim(axis + 1, -2)  # (B, …, n_axis, C): the other axes first
            # (M, n_axis, C)
            mixed = attention(lines.reshape(-1, n, C), causal=axis in self.causal_axes)
            y = mixed.reshape(lines.shape).movedim(-2, axis + 1)  # (B, n_0, …, n_{d-1}, C)
        return y.reshape(B, N, C)  # (B, N, C)


class DividedAttention(_LinesMixer):
    """Attention along the first axis (time) at each location, then over the other axes (space)
    within each frame (module docstring); arguments as :class:`AxialAttention`'s, the grid of rank
    >= 2, ``causal_axes`` () or (0,)."""

    what = "divided attention"

    def _check_grid(self, causal_axes: Sequence[int]) -> None:
        if self.grid.ndim < 2:
            raise ValueError(
                f"the {self.grid.ndim}-d grid {self.grid}; expected a grid of rank >= 2 (time, "
                "then space) for divided attention"
            )
        if self.causal_axes not in ((), (0,)):
            raise ValueError(
                f"causal_axes={tuple(causal_axes)!r}; expected () or (0,) (divided attention is "
                "causal along the first grid axis only)"
            )

    def _build(self, line: Callable[[], LineAttention]) -> None:
        self.time, self.space = line(), line()

    def forward(
        self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool = False
    ) -> torch.Tensor:
        """``x``: (B, N, C) in row-major (T, space) order → (B, N, C)."""
        check_mixer_input(self, x, attn_mask, is_causal)
        B, N, C = x.shape
        T = self.grid[0]
        S = N // T
        # (B·S, T, C): each location's time line
        t = x.reshape(B, T, S, C).transpose(1, 2).reshape(B * S, T, C)
        t = self.time(t, causal=bool(self.causal_axes))  # (B·S, T, C)
        s = t.reshape(B, S, T, C).transpose(1, 2).reshape(B * T, S, C)  # (B·T, S, C): each frame
        return self.space(s).reshape(B, N, C)  # (B, N, C)


def regrid_lines(
    module: AxialAttention | DividedAttention, grid: GridLike
) -> AxialAttention | DividedAttention:
    """Axial or divided attention on another grid of the same rank: a copy with the same parameters
    (they attend along lines of any length; the grid only says how the tokens form lines),
    bit-identical on its own grid."""
    return same_rank_copy(
        module,
        grid,
        (AxialAttention, DividedAttention),
        caller="regrid_lines",
        expected="AxialAttention or DividedAttention",
        described="{name} on the {d}-d grid {grid}",
    )


# the builders pass on: causal_axes, num_prefix_tokens, attn_drop, timm's projections
_BUILD_KWARGS = PROJECTION_KWARGS | keywords_of(_LinesMixer) | keywords_of(LineAttention)


def build_line_attention(
    kind: type[AxialAttention] | type[DividedAttention],
    dim: int,
    grid: GridLike,
    *,
    num_heads: int,
    **kwargs,
) -> AxialAttention | DividedAttention:
    """``kind`` (:class:`AxialAttention` or :class:`DividedAttention`) from timm's ``attn_layer``
    arguments: ``causal_axes``, ``num_prefix_tokens``, ``attn_drop`` and
    :data:`~gridmix.mixers.projections.PROJECTION_KWARGS` pass on; timm's other keyword arguments
    (``depth`` …) are ignored."""
    return kind(dim, grid, num_heads=num_heads, **taken(kwargs, _BUILD_KWARGS))


def build_axial_attention(dim: int, grid: GridLike, **kwargs) -> AxialAttention:
    """The mixer builder (:mod:`gridmix.mixers.contract`): :class:`AxialAttention`
    (:func:`build_line_attention`)."""
    return build_line_attention(AxialAttention, dim, grid, **kwargs)


def build_divided_attention(dim: int, grid: GridLike, **kwargs) -> DividedAttention:
    """The mixer builder (:mod:`gridmix.mixers.contract`): :class:`DividedAttention`
    (:func:`build_line_attention`)."""
    return build_line_attention(DividedAttention, dim, grid, **kwargs)
