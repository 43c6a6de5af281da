"""Neighbourhood attention on an N-d grid, as timm's ``attn_layer``: each grid token attends to a
window around it.

Follows Hassani et al. 2023, "Neighborhood Attention Transformer" (NATTEN): on every grid axis a
token at position ``i`` of an axis of length ``n`` attends to the ``k`` positions ``start … start +
k - 1`` with ``start = clamp(i - k // 2, 0, n - k)``: the window is centred where it fits and
shifted inward at the borders, so every token sees exactly ``k`` positions per axis (not a truncated
window). ``k`` is the ``kernel_size`` argument (odd; one for all axes or one per axis), clipped to
the axis length. The window of a token is the product of its axis windows; any grid rank. On a
causal axis the window is the ``k`` positions ending at the token, ``max(i - k + 1, 0) … i``, so the
mixer is exactly causal along any set of axes (causal ``"any"``).

Multi-head attention with the parameters of timm's ``Attention`` (``qkv``, ``q_norm``, ``k_norm``,
``norm``, ``proj``; the same state dict), so with ``kernel_size`` at least every axis length and no
causal axes it *is* timm's global attention.

**Prefix tokens** (class / register tokens) pass through ``qkv`` and ``proj`` like grid tokens.
Every grid token attends to all prefix tokens besides its window. Without causal axes a prefix token
attends to every token; with causal axes it attends to the prefix tokens only (a prefix token that
saw the grid would carry later tokens into the next layer), so the mixer stays exactly causal on the
grid.

**Cost.** The window is applied as a dense boolean ``(P + N, P + N)`` mask to fused
``scaled_dot_product_attention``: ``(P + N)²`` bytes of memory for the mask (16 MiB at N = 4096, 256
MiB at N = 16384) and O(N² C) compute, not NATTEN's O(N kᵈ C) kernels. It is meant for the grids it
is compared on.

Shape legend:
    B: batch, P: prefix tokens, N: grid tokens (n_1·…·n_d), T = P + N, C: channels, h: heads,
    c = C / h
    grid axes are in row-major order (the last fastest), as timm's token order
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from gridmix.core.grid import Grid, GridLike
from gridmix.mixers.contract import taken
from gridmix.mixers.grids import causal_set, same_rank_copy
from gridmix.mixers.projections import GridAttention, check_probability


def _kernel_sizes(kernel_size: int | Sequence[int], grid: Grid) -> tuple[int, ...]:
    """``kernel_size`` once per axis of ``grid`` (an int for all axes, or one per axis), each odd
    and positive."""
    sizes = (kernel_size,) * grid.ndim if isinstance(kernel_size, int) else tuple(kernel_size)
    if len(sizes) != grid.ndim:
        raise ValueError(
            f"kernel_size={kernel_size!r} has {len(sizes)} entries; expected one per axis of grid "
            f"{grid}"
        )
    for k in sizes:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1 or k % 2 == 0:
            raise ValueError(
                f"kernel_size={kernel_size!r}; expected an odd positive integer (or one per axis)"
            )
    return sizes


def _axis_window(n: int, k: int, causal: bool) -> torch.Tensor:
    """(n, n) boolean: position ``i`` of an axis of length ``n`` may attend to position ``j``
    (module docstring)."""
    k = min(k, n)
    i = torch.arange(n).unsqueeze(1)  # (n, 1) query positions
    j = torch.arange(n).unsqueeze(0)  # (1, n) key positions
    if causal:
        return (j <= i) & (j > i - k)  # (n, n)
    start = (i - k // 2).clamp(0, n - k)  # (n, 1)
    return (j >= start) & (j < start + k)  # (n, n)


def neighbourhood_mask(
    grid: GridLike, kernel_size: int | Sequence[int], causal_axes: Sequence[int] = ()
) -> torch.Tensor:
    """The (N, N) boolean window mask of the grid tokens in row-major order (True: may attend).

    Entry ``[I, J]`` is True when on every axis ``a`` the position ``J_a`` lies in the window of
    ``I_a`` (NATTEN's inward-shifted window of ``k_a`` positions, or the ``k_a`` positions ending at
    ``I_a`` on a causal axis).
    """
    grid = Grid.parse(grid)
    sizes, causal = _kernel_sizes(kernel_size, grid), causal_set(causal_axes, grid)
    mask = torch.ones(1, 1, dtype=torch.bool)  # (M, M) over the axes done so far
    for axis, (n, k) in enumerate(zip(grid, sizes)):
        window = _axis_window(n, k, axis in causal)  # (n, n)
        m = mask.shape[0]
        # (M·n, M·n)
        mask = (mask[:, None, :, None] & window[None, :, None, :]).reshape(m * n, m * n)
    return mask


class NeighbourhoodAttention(GridAttention):
    """Multi-head neighbourhood attention over ``P`` prefix tokens and the tokens of ``grid``
    (module docstring).

    Args:
        dim: channels ``C``, divisible by ``num_heads``.
        grid: the token grid.
        kernel_size: window length per axis (odd; an int for all axes or one per axis), clipped to
            the axis length.
        causal_axes: grid axes on which no token sees a later one (negative indices allowed).
        attn_drop: as timm's ``Attention``.
        attention: :class:`~gridmix.mixers.projections.GridAttention`'s: ``num_heads`` (``h``),
            ``num_prefix_tokens`` (``P``) and timm's ``Attention`` projections (``qkv_bias``,
            ``qk_norm``, ``scale_norm``, ``proj_bias``, ``proj_drop``, ``norm_layer``, ``device``,
            ``dtype``).
    """

    def __init__(
        self,
        dim: int,
        grid: GridLike,
        *,
        kernel_size: int | Sequence[int] = 7,
        causal_axes: Sequence[int] = (),
        attn_drop: float = 0.0,
        **attention,
    ) -> None:
        super().__init__(dim, grid, **attention)
        check_probability("attn_drop", attn_drop)
        self.kernel_size = _kernel_sizes(kernel_size, self.grid)
        self.causal_axes = causal_set(causal_axes, self.grid)
        self.attn_drop = attn_drop
        mask = self._token_mask()  # (T, T)
        # every token sees every token: plain attention, no mask to apply
        self.full = bool(mask.all())
        self.register_buffer("mask", mask.to(attention.get("device")), persistent=False)  # (T, T)

    def _token_mask(self) -> torch.Tensor:
        """(T, T) boolean over prefix and grid tokens: the window mask and the prefix rules (module
        docstring)."""
        P, N = self.num_prefix_tokens, self.grid.numel
        mask = torch.ones(P + N, P + N, dtype=torch.bool)  # (T, T)
        mask[P:, P:] = neighbourhood_mask(self.grid, self.kernel_size, self.causal_axes)  # (N, N)
        if self.causal_axes:
            mask[:P, P:] = False  # prefix tokens see no grid token
        return mask

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Softmax attention of the heads (B, h, T, c) within the window mask: (B, h, T, c)."""
        return F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=None if self.full else self.mask,
            dropout_p=self.attn_drop if self.training else 0.0,
        )  # (B, h, T, c)

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, grid={self.grid}, heads={self.num_heads}, "
            f"kernel_size={self.kernel_size}, "
            f"causal_axes={self.causal_axes}, prefix={self.num_prefix_tokens}"
        )


def regrid_neighbourhood_attention(
    module: NeighbourhoodAttention, grid: GridLike
) -> NeighbourhoodAttention:
    """The same neighbourhood attention on another grid of the same rank: a copy with the same
    parameters and window sizes (a window longer than an axis is clipped to it, as at build) whose
    mask is rebuilt for ``grid``; on its own grid the copy gives bit-identical outputs."""
    other = same_rank_copy(
        module,
        grid,
        NeighbourhoodAttention,
        caller="regrid_neighbourhood_attention",
        expected="a NeighbourhoodAttention",
        described="neighbourhood attention on the {d}-d grid {grid}",
    )
    mask = other._token_mask()  # (T', T')
    other.full = bool(mask.all())
    other.mask = mask.to(module.mask.device)  # (T', T'), the registered (non-persistent) buffer
    return other


def build_neighbourhood_attention(
    dim: int, grid: GridLike, *, num_heads: int, **kwargs
) -> NeighbourhoodAttention:
    """The mixer builder (:mod:`gridmix.mixers.contract`): :class:`NeighbourhoodAttention` with the
    keyword arguments it takes (``causal_axes``, ``num_prefix_tokens``, ``kernel_size``,
    ``attn_drop`` and :data:`~gridmix.mixers.projections.PROJECTION_KWARGS`); timm's other keyword
    arguments (``depth`` …) are ignored."""
    return NeighbourhoodAttention(
        dim, grid, num_heads=num_heads, **taken(kwargs, NeighbourhoodAttention.keywords())
    )
