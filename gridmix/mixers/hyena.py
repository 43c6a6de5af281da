"""The Hyena mixer: Hyena's gated long convolution with an implicit filter as a token mixer on an
N-d grid.

Follows Poli et al. 2023, "Hyena Hierarchy: Towards Larger Convolutional Language Models", the
operator of order 2 (its ``HyenaOperator`` with ``order=2``): an input projection to three streams
``x_0, x_1, v``, a short depthwise convolution on each, then

    y = W_o · ( x_0 ⊙ ( h ∗ (x_1 ⊙ v) + β ⊙ (x_1 ⊙ v) ) ),

with ``h`` a long convolution filter per channel and ``β`` a per-channel skip (the ``bias`` of
Hyena's ``fftconv``). The filter is implicit, as Hyena's ``HyenaFilter``: a small MLP of three
layers with sine activations (each with its learned frequency, 1 at the start) maps positional
features of a lag to one value per channel, multiplied by an exponential decay window whose rates
are spread per channel as Hyena's ``ExponentialModulation`` (from ``|ln 0.01| / 1.5`` to ``|ln
0.01| / 0.3`` over the filter's extent, not trained).

**On an N-d grid** the lag is a vector: along axis ``k`` the lag ``l_k`` runs over ``−(n_k − 1) …
n_k − 1`` (``0 … n_k − 1`` on a causal axis), and its position ``t_k = l_k / n_k`` in (−1, 1). The
features are ``t_k, cos(π f t_k), sin(π f t_k)`` for ``f = 1 … bands`` on every axis, concatenated
over the axes; the window is ``exp(−δ_c Σ_k |t_k|)``, a product of one decay per axis. The
convolution is linear (zero-padded) over every axis at once: the real FFT of each axis padded to
``2 n_k`` (:mod:`gridmix.mixers.fft_conv`, which skips the padding's zeros), the filter laid out
with lag ``l`` at index ``l`` and ``−l`` at ``2 n_k − l``. On a causal axis the filter is exactly
zero at negative lags, so the convolution is causal up to the FFT's rounding (about 1e-16 of the
output in float64, below the leak check's threshold). What differs from the paper, and why:

- Hyena is 1-d and causal; a symmetric axis here has a two-sided filter (lags of both signs), the
  way S4ND and GFNet see a whole image;
- the positional features are Hyena's ``t`` and sine-cosine bands on each axis, with the
  frequencies ``π f`` on ``t`` in (−1, 1) (Hyena: ``2π f t / L`` on the rescaled position);
- the short filter is :class:`~gridmix.mixers.short_conv.ShortConv` (three taps per axis,
  causal on causal axes) instead of a causal ``Conv1d`` of three taps; no dropout.

Prefix tokens (class / register tokens) are not on the grid: they pass through unchanged.
Resolution change (:func:`regrid_hyena`): no parameter depends on the grid's lengths; on another
grid the MLP is evaluated at the new grid's positions, so the filter spans the same continuous
extent of each axis. The same grid gives the same mixer bit for bit.

Shape legend:
    B: batch, P: prefix tokens, N: grid tokens, C: channels, W: the filter MLP's width,
    Φ: positional features (d · (1 + 2 bands)), S: the padded grid (2 n_1, …, 2 n_d),
    F: its half-spectrum
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from gridmix.core.grid import Grid, GridLike
from gridmix.mixers.contract import taken
from gridmix.mixers.fft_conv import cropped_inverse, padded_spectrum
from gridmix.mixers.grids import GridMixer, factory_kwargs, linear
from gridmix.mixers.short_conv import ShortConv

DECAY_TARGET, FAST_DECAY, SLOW_DECAY = 1e-2, 0.3, 1.5  # Hyena's ExponentialModulation defaults


def lag_layout(n: int, causal: bool, dtype: torch.dtype, device=None) -> torch.Tensor:
    """The lag at each of an axis's ``2 n`` padded indices: ``l`` at ``l``, ``−l`` at ``2n − l``,
    NaN where the filter is zero (index ``n``, and the negative lags of a causal axis): (2n,)."""
    index = torch.arange(2 * n, device=device, dtype=dtype)  # (2n,)
    lag = torch.where(index < n, index, index - 2 * n)  # (2n,)
    unused = index == n  # (2n,)
    if causal:
        unused = unused | (index > n)  # (2n,)
    return lag.masked_fill(unused, math.nan)  # (2n,)


class Sin(nn.Module):
    """``sin(ω ⊙ x)`` with a learned frequency per unit, 1 at the start (Hyena's ``Sin``)."""

    def __init__(self, width: int, *, device=None, dtype=None) -> None:
        super().__init__()
        self.freq = nn.Parameter(torch.ones(width, device=device, dtype=dtype))  # (W,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sin(self.freq.to(x.dtype) * x)  # same shape as x


class HyenaFilter(nn.Module):
    """The implicit long filter (module docstring): positional features → MLP → decay window."""

    def __init__(
        self, channels: int, rank: int, *, bands: int, width: int, device=None, dtype=None
    ) -> None:
        super().__init__()
        factory = dict(device=device, dtype=dtype)
        self.bands = bands
        self.mlp = nn.Sequential(
            nn.Linear(rank * (1 + 2 * bands), width, **factory),
            Sin(width, **factory),
            nn.Linear(width, width, **factory),
            Sin(width, **factory),
            nn.Linear(width, channels, bias=False, **factory),
        )
        low, high = (abs(math.log(DECAY_TARGET)) / pct for pct in (SLOW_DECAY, FAST_DECAY))
        self.register_buffer("decay", torch.linspace(low, high, channels, **factory))  # (C,)

    def features(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` (…,) positions in (−1, 1) → (…, 1 + 2 bands): ``t, cos(π f t), sin(π f t)``."""
        f = torch.arange(1, self.bands + 1, device=t.device, dtype=t.dtype)  # (bands,)
        angle = math.pi * f * t[..., None]  # (…, bands)
        return torch.cat([t[..., None], angle.cos(), angle.sin()], dim=-1)  # (…, 1 + 2 bands)

    def forward(self, grid: Grid, causal_axes: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        """The filter laid out for the zero-padded FFT (module docstring): (*S, C) in ``dtype``."""
        device = self.decay.device
        # (2 n_k,) each: t_k, NaN where unused
        axes = [lag_layout(n, k in causal_axes, dtype, device) / n for k, n in enumerate(grid)]
        positions = torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1)  # (*S, d)
        used = ~positions.isnan().any(-1)  # (*S,)
        t = positions.nan_to_num(0.0)  # (*S, d)
        features = self.features(t).flatten(-2)  # (*S, Φ)
        h = features
        for layer in self.mlp:
            h = linear(layer, h) if isinstance(layer, nn.Linear) else layer(h)  # (*S, W), (*S, C)
        window = torch.exp(-t.abs().sum(-1, keepdim=True) * self.decay.to(dtype))  # (*S, C)
        return h * window * used[..., None]  # (*S, C): exactly zero where unused


class HyenaMixer(GridMixer):
    """Hyena of order 2 on ``grid`` (module docstring); timm's ``attn_layer`` contract through
    :class:`~gridmix.mixers.grids.GridMixer`.

    Args:
        dim: channels ``C``.
        grid: the grid, e.g. ``"8x16x16"``.
        bands: sine-cosine frequencies per axis in the filter's positional features.
        filter_width: the width ``W`` of the filter's MLP.
        proj_bias: the bias of the projections.
        grid_kwargs: :class:`~gridmix.mixers.grids.GridMixer`'s: ``causal_axes`` (axes on which no
            token sees a later one), ``num_prefix_tokens`` (passed through unchanged), ``device``
            and ``dtype`` (of the parameters).
    """

    expected, described = "a HyenaMixer", "the {d}-d Hyena mixer on {grid}"

    def __init__(
        self,
        dim: int,
        grid: GridLike,
        *,
        bands: int = 8,
        filter_width: int = 64,
        proj_bias: bool = True,
        **grid_kwargs,
    ) -> None:
        super().__init__(dim, grid, dict(bands=bands, filter_width=filter_width), **grid_kwargs)
        factory = factory_kwargs(grid_kwargs)
        self.in_proj = nn.Linear(dim, 3 * dim, bias=proj_bias, **factory)  # x_0, x_1, v
        self.conv = ShortConv(3 * dim, self.grid.ndim, self.causal_axes, **factory)
        self.filter = HyenaFilter(dim, self.grid.ndim, bands=bands, width=filter_width, **factory)
        self.skip = nn.Parameter(torch.randn(dim, **factory))  # (C,): β, randn as Hyena's bias
        self.out_proj = nn.Linear(dim, dim, bias=proj_bias, **factory)

    def long_conv(self, w: torch.Tensor) -> torch.Tensor:
        """``h ∗ w`` for ``w`` (B, *grid, C), linear over every axis: (B, *grid, C) in ``w``'s
        dtype."""
        dims = list(range(-self.grid.ndim, 0))
        kernel = self.filter(self.grid, self.causal_axes, w.dtype).movedim(-1, 0)  # (C, *S)
        # channels first, so that the FFTs run over the contiguous last axes
        spectrum = padded_spectrum(w.movedim(-1, 1), dims) * torch.fft.rfftn(
            kernel, dim=dims
        )  # (B, C, *F)
        y = cropped_inverse(spectrum, dims, self.grid)  # (B, C, *grid): the linear convolution
        return y.movedim(1, -1)  # (B, *grid, C)

    def mix(self, u: torch.Tensor) -> torch.Tensor:
        """The whole mixer on the grid tokens: (B, *grid, C) → (B, *grid, C), in ``u``'s dtype."""
        streams = self.conv(linear(self.in_proj, u))  # (B, *grid, 3C)
        x0, x1, v = streams.chunk(3, dim=-1)  # (B, *grid, C) each
        w = x1 * v  # (B, *grid, C)
        y = x0 * (self.long_conv(w) + w * self.skip.to(u.dtype))  # (B, *grid, C)
        return linear(self.out_proj, y)  # (B, *grid, C)

    def repr_parts(self) -> tuple[str, ...]:
        return (f"causal_axes={self.causal_axes}",)


def regrid_hyena(module: HyenaMixer, grid: GridLike) -> HyenaMixer:
    """The same Hyena mixer on another grid of the same rank (module docstring, "Resolution
    change"): a copy with the same parameters, its filter evaluated at the new grid's positions."""
    return HyenaMixer.copy_onto(module, grid, caller="regrid_hyena")


def build_hyena(dim: int, grid: GridLike, *, num_heads: int, **kwargs) -> HyenaMixer:
    """The registry's builder (:mod:`gridmix.mixers.contract`): a :class:`HyenaMixer`.

    ``num_heads`` is accepted and unused (the filter is per channel); the keyword arguments
    :class:`HyenaMixer` takes pass on; timm's others (``qkv_bias``, ``attn_drop``, ``norm_layer`` …)
    are accepted and ignored.
    """
    return HyenaMixer(dim, grid, **taken(kwargs, HyenaMixer.keywords()))
