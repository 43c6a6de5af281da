"""The token-mixing MLP of MLP-Mixer as a token mixer on a grid.

Follows Tolstikhin et al. 2021, "MLP-Mixer: An all-MLP Architecture for Vision": every channel's
column of N grid tokens goes through one MLP shared by the channels, ``Linear(N → hidden) · GELU ·
Linear(hidden → N)`` with ``hidden = int(N · token_ratio)``. The weights hold the grid's token
count, so the mixer sees every token (not causal) and cannot change resolution; its N·hidden weights
grow as N², so it is built for at most :data:`MAX_TOKENS` tokens. The weights are initialised as
timm's MLP-Mixer (``xavier_uniform_``, biases ``N(0, 1e-6)``).

Prefix tokens (class / register tokens) are not on the grid: they pass through unchanged.

Shape legend:
    B: batch, P: prefix tokens, N: grid tokens (n_1·…·n_d), C: channels,
    H: hidden tokens (int(N · token_ratio))
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from gridmix.core.grid import GridLike
from gridmix.mixers.contract import check_mixer_input, refuse_causal, taken
from gridmix.mixers.grids import GridTokenMixer, factory_kwargs

MAX_TOKENS = 4096  # above this the N × hidden weights (N² · token_ratio) do not scale


class TokenMLPMixer(GridTokenMixer):
    """MLP-Mixer's token-mixing MLP on ``grid`` (module docstring); timm's ``attn_layer`` contract
    through :class:`~gridmix.mixers.grids.GridTokenMixer`.

    Args:
        dim: channels ``C``.
        grid: the grid, e.g. ``"14x14"``; at most :data:`MAX_TOKENS` tokens.
        token_ratio: hidden tokens per grid token, ``hidden = int(N · token_ratio)``.
        grid_kwargs: :class:`~gridmix.mixers.grids.GridTokenMixer`'s: ``num_prefix_tokens``
            (passed through unchanged), ``device`` and ``dtype`` (of the weights).
    """

    def __init__(
        self, dim: int, grid: GridLike, *, token_ratio: float = 0.5, **grid_kwargs
    ) -> None:
        super().__init__(dim, grid, {}, **grid_kwargs)
        N = self.grid.numel
        if N > MAX_TOKENS:
            raise ValueError(
                f"the token MLP's weights grow as N²: got {N} tokens on {self.grid}; expected at "
                f"most {MAX_TOKENS}"
            )
        if (
            isinstance(token_ratio, bool)
            or not isinstance(token_ratio, (int, float))
            or int(N * token_ratio) < 1
        ):
            raise ValueError(
                f"token_ratio={token_ratio!r} gives int({N} * token_ratio) hidden tokens on "
                f"{self.grid}; expected a number with at least 1 hidden token"
            )
        self.token_ratio, self.hidden = token_ratio, int(N * token_ratio)
        factory = factory_kwargs(grid_kwargs)
        self.fc1 = nn.Linear(N, self.hidden, **factory)  # (H, N) weight
        self.act = nn.GELU()
        self.fc2 = nn.Linear(self.hidden, N, **factory)  # (N, H) weight
        for layer in (self.fc1, self.fc2):  # timm's MLP-Mixer init (_init_weights, an "mlp" Linear)
            nn.init.xavier_uniform_(layer.weight)  # (H, N) or (N, H)
            nn.init.normal_(layer.bias, std=1e-6)  # (H,) or (N,)

    def forward(
        self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool = False
    ) -> torch.Tensor:
        """``x``: (B, P + N, C) with P prefix tokens first, then the grid in row-major order;
        returns its shape."""
        check_mixer_input(self, x, attn_mask, is_causal)
        P = self.num_prefix_tokens
        columns = x[:, P:].transpose(1, 2)  # (B, C, N): one column of grid tokens per channel
        y = self.fc2(self.act(self.fc1(columns)))  # (B, C, N)
        y = y.transpose(1, 2)  # (B, N, C)
        if P:
            y = torch.cat([x[:, :P], y], dim=1)  # (B, P + N, C): prefix tokens unchanged
        return y

    def repr_parts(self) -> tuple[str, ...]:
        return (f"hidden={self.hidden} (token_ratio={self.token_ratio})",)


def build_token_mlp(
    dim: int,
    grid: GridLike,
    *,
    num_heads: int,
    causal_axes: Sequence[int] = (),
    **kwargs,
) -> TokenMLPMixer:
    """The registry's builder (:mod:`gridmix.mixers.contract`): a :class:`TokenMLPMixer`.

    ``num_heads`` is accepted and unused; ``num_prefix_tokens``, ``token_ratio``, ``device`` and
    ``dtype`` pass on; timm's other keyword arguments (``qkv_bias``, ``attn_drop``, ``norm_layer``
    …) are accepted and ignored. ``causal_axes`` must be empty: the MLP mixes the whole grid.
    """
    refuse_causal(causal_axes, "the token MLP", "a dense MLP over the grid")
    return TokenMLPMixer(dim, grid, **taken(kwargs, TokenMLPMixer.keywords()))
