"""The global filter mixer: GFNet's learned frequency-domain filter as a token mixer on an N-d grid.

Follows Rao et al. 2021, "Global Filter Networks for Image Classification" (GFNet): the grid tokens
are taken to the frequency domain by a real FFT over the grid axes (``norm="ortho"``), multiplied
elementwise by a learned complex filter (one value per channel and frequency, initialised ``0.02 ·
randn`` as GFNet's ``complex_weight``) and taken back by the inverse real FFT. The map is a circular
convolution of every channel with a learned real kernel over the whole grid, so it sees every token
(not causal), in O(N log N). Any grid rank: the filter has the shape of the half-spectrum ``(n_1, …,
n_{d-1}, n_d // 2 + 1)`` per channel.

Prefix tokens (class / register tokens) are not on the grid: they pass through unchanged. There are
no value or output projections, as in GFNet, where the filter layer sits between a norm and the
channel MLP.

Resolution change (:func:`regrid_global_filter`): the filter is resampled to the new half-spectrum
by N-d linear interpolation of its real and imaginary parts with ``align_corners=True``, in the
FFT's own index order, as GFNet interpolates its filter for other resolutions (bilinearly for
images); an axis whose spectrum length does not change is copied as it is, so the same grid gives
the same mixer bit for bit.

Shape legend:
    B: batch, P: prefix tokens, N: grid tokens (n_1·…·n_d), C: channels,
    F: the half-spectrum ``(n_1, …, n_{d-1}, n_d // 2 + 1)``
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from gridmix.core.grid import Grid, GridLike
from gridmix.mixers.contract import refuse_causal, taken
from gridmix.mixers.grids import GridMixer

INIT_SCALE = 0.02  # GFNet: complex_weight = randn(...) * 0.02


def half_spectrum(grid: Grid) -> tuple[int, ...]:
    """The shape of ``rfftn`` over all of ``grid``'s axes: the last axis halved, ``n_d // 2 +
    1``."""
    return (*grid.shape[:-1], grid.shape[-1] // 2 + 1)


class GlobalFilterMixer(GridMixer):
    """GFNet's global filter on ``grid`` (module docstring); timm's ``attn_layer`` contract through
    :class:`~gridmix.mixers.grids.GridMixer`, its FFTs in at least float32 (cuFFT's half precision
    takes only powers of two).

    Args:
        dim: channels ``C``.
        grid: the grid, e.g. ``"14x14"``.
        num_prefix_tokens: tokens before the grid tokens; they pass through unchanged.
        device, dtype: where and in which dtype the filter is built.
    """

    expected, described = "a GlobalFilterMixer", "the {d}-d global filter on {grid}"

    def __init__(
        self, dim: int, grid: GridLike, *, num_prefix_tokens: int = 0, device=None, dtype=None
    ) -> None:
        super().__init__(dim, grid, {}, num_prefix_tokens=num_prefix_tokens, dtype=dtype)
        # (*F, C, 2)
        weight = torch.randn(*half_spectrum(self.grid), dim, 2, device=device, dtype=dtype)
        # (*F, C, 2): real and imaginary parts
        self.complex_weight = nn.Parameter(INIT_SCALE * weight)

    def filter(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """The complex filter (*F, C), from the real parameter in ``dtype`` (default: the
        parameter's)."""
        # (*F, C, 2)
        weight = self.complex_weight if dtype is None else self.complex_weight.to(dtype)
        return torch.view_as_complex(weight.contiguous())  # (*F, C)

    def mix(self, g: torch.Tensor) -> torch.Tensor:
        """``g`` (B, *grid, C) → (B, *grid, C): multiplied by the filter in the frequency domain, in
        ``g``'s dtype."""
        dims = tuple(range(1, self.grid.ndim + 1))
        spectrum = torch.fft.rfftn(g, dim=dims, norm="ortho")  # (B, *F, C)
        spectrum = spectrum * self.filter(g.dtype)  # (B, *F, C)
        # (B, *grid, C)
        return torch.fft.irfftn(spectrum, s=self.grid.shape, dim=dims, norm="ortho")

    def fit_grid(self, source: GridMixer) -> None:
        """The filter resampled to the new half-spectrum (module docstring, "Resolution change")."""
        with torch.no_grad():
            # (*F', C, 2)
            weight = interpolate_linear(source.complex_weight.detach(), half_spectrum(self.grid))
            trainable = source.complex_weight.requires_grad
            self.complex_weight = nn.Parameter(
                weight.clone(), requires_grad=trainable
            )  # (*F', C, 2)


def interpolate_linear(values: torch.Tensor, size: Sequence[int]) -> torch.Tensor:
    """N-d linear interpolation with ``align_corners=True`` of ``values`` (*S, …) to (*size, …) over
    its leading ``len(size)`` axes, one axis after another (``torch.nn.functional.interpolate``'s
    linear, bilinear and trilinear modes for 1 to 3 axes, any number here). An axis whose length
    does not change is left as it is."""
    for axis, new in enumerate(size):
        old = values.shape[axis]
        if new == old:
            continue
        if old == 1:
            # (…, new, …)
            values = values.expand(*values.shape[:axis], new, *values.shape[axis + 1 :])
            continue
        # (new,)
        position = torch.linspace(0, old - 1, new, device=values.device, dtype=torch.float64)
        low = position.floor().long().clamp(max=old - 2)  # (new,)
        # (new, 1, …)
        frac = (position - low).to(values.dtype).view(-1, *([1] * (values.dim() - axis - 1)))
        a, b = values.index_select(axis, low), values.index_select(axis, low + 1)  # (…, new, …)
        values = a + (b - a) * frac  # (…, new, …)
    return values.contiguous()  # (*size, …)


def regrid_global_filter(module: GlobalFilterMixer, grid: GridLike) -> GlobalFilterMixer:
    """The same global filter on another grid of the same rank (module docstring, "Resolution
    change").

    Returns a new module; its filter is the old one resampled to the new half-spectrum (copied
    exactly where an axis's spectrum length is unchanged, so the same grid gives bit-identical
    outputs).
    """
    return GlobalFilterMixer.copy_onto(module, grid, caller="regrid_global_filter")


def build_global_filter(
    dim: int,
    grid: GridLike,
    *,
    num_heads: int,
    causal_axes: Sequence[int] = (),
    **kwargs,
) -> GlobalFilterMixer:
    """The registry's builder (:mod:`gridmix.mixers.contract`): a :class:`GlobalFilterMixer`.

    ``num_heads`` is accepted and unused (the filter is per channel); ``num_prefix_tokens``,
    ``device`` and ``dtype`` pass on; timm's other keyword arguments (``qkv_bias``, ``attn_drop``,
    ``norm_layer`` …) are accepted and ignored. ``causal_axes`` must be empty: the filter is a
    circular convolution over the whole grid.
    """
    refuse_causal(causal_axes, "the global filter", "a circular convolution over the grid")
    return GlobalFilterMixer(dim, grid, **taken(kwargs, ("num_prefix_tokens", "device", "dtype")))
