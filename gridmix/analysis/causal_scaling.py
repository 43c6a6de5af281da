"""Operator tracks for ``gridmix scale``: one token-mixing layer along a causal first axis, against
causal SDPA.

``gridmix scale --track gridmix.analysis.causal_scaling:sequence --grids 1024,2048,4096,8192,16384``
(1-D) and ``--track gridmix.analysis.causal_scaling:video --grids 8x16x16,16x32x32`` (time causal,
space symmetric) time three single layers on random tokens, forward+backward with a mean-squared
loss:

- ``mixer-causal`` (the idea): :class:`gridmix.ConcentrationMixer` with axis 0 causal (its exactly
  causal Toeplitz factor, :mod:`gridmix.mixers.concentration.ops.causal`), the other axes symmetric;
- ``mixer-causal-ss``: the same with the semiseparable causal factor
  (``causal_form="semiseparable"``,
  :mod:`gridmix.mixers.concentration.ops.semiseparable`);
- ``sdpa-causal`` (the matched baseline): :class:`gridmix.mixers.attention.CausalAttention` (timm's
  ``Attention``: query, key, value and output projections around
  ``F.scaled_dot_product_attention(is_causal=True)``) over the flattened grid (row-major, so the
  first axis is the slowest: causal in the flattened order is causal in time, and stricter within a
  frame);
- ``mixer`` (a baseline): the all-symmetric mixer, the speed a causal axis is compared with.

Not registered plugins (nothing to train: the data is noise and the metric only reports the loss);
the scaling study and its memory subprocesses find them by ``module:attribute``
(:func:`gridmix.analysis.scaling.resolve_track`). The bare-operator figures of the same question are
``benchmarks/bench_mixer.py --causal``.

Shape legend:
    S: samples, B: batch, C: channels (``DIM``), N: tokens on the grid, h: heads,
    c: channels per head
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gridmix.core.grid import Grid
from gridmix.mixers.attention import CausalAttention
from gridmix.mixers.concentration.layer import ConcentrationMixer
from gridmix.tracks import DataSizes, ModelSpec, Split, Track, TrackData

DIM, HEADS, RANK = 64, 4, 16  # the mixer benchmark's operator (benchmarks/bench_mixer.py)


class MixingLayer(nn.Module):
    """(B, C, *grid) → (B, C, *grid): one token mixer over the grid's tokens."""

    def __init__(self, grid: Grid, mixer: nn.Module) -> None:
        super().__init__()
        self.grid, self.mixer = grid, mixer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = x.flatten(2).mT  # (B, N, C), row-major over the grid
        return self.mixer(tokens).mT.reshape(x.shape)


def _mixer(grid: Grid, *, causal: bool, causal_form: str = "toeplitz") -> nn.Module:
    return MixingLayer(
        grid,
        ConcentrationMixer(
            DIM,
            grid,
            num_heads=HEADS,
            rank=RANK,
            causal_axes=(0,) if causal else (),
            causal_form=causal_form,
        ),
    )


def _noise(grid: Grid, seed: int, sizes: DataSizes) -> TrackData:
    """Standard normal inputs and targets (S, C, *grid), one generator per split."""

    def split(offset: int, count: int) -> Split:
        generator = torch.Generator().manual_seed(1000 * seed + offset)
        # (S, C, *grid) each
        inputs, targets = torch.randn(2, count, DIM, *grid, generator=generator)
        return Split(inputs=inputs, targets=targets)

    return TrackData(
        train=split(0, sizes.n_train), val=split(1, sizes.n_val), test=split(2, sizes.n_test)
    )


def _track(name: str, ndim: int, default_grid: str) -> Track:
    models = (
        ModelSpec(
            "mixer-causal",
            lambda grid: _mixer(grid, causal=True),
            role="idea",
            description=f"concentration mixer, rank {RANK}, axis 0 causal",
        ),
        ModelSpec(
            "mixer-causal-ss",
            lambda grid: _mixer(grid, causal=True, causal_form="semiseparable"),
            description="the same with its causal axis semiseparable (causal_form='semiseparable')",
        ),
        ModelSpec(
            "sdpa-causal",
            lambda grid: MixingLayer(grid, CausalAttention(DIM, HEADS, qkv_bias=True)),
            description="causal scaled-dot-product attention over the flattened grid",
        ),
        ModelSpec(
            "mixer",
            lambda grid: _mixer(grid, causal=False),
            description=f"concentration mixer, rank {RANK}, every axis symmetric",
        ),
    )
    return Track(
        name=name,
        description=f"one token-mixing layer on noise, {ndim}-d grid, axis 0 causal (scaling only)",
        ndim=ndim,
        default_grid=Grid.parse(default_grid),
        make_data=_noise,
        loss=F.mse_loss,
        metric=lambda predictions, targets: F.mse_loss(predictions, targets).item(),
        metric_name="MSE to noise",
        direction="lower",
        models=models,
        matched_baseline="sdpa-causal",
    )


def sequence() -> Track:
    """The 1-D operator track ``causal-sequence`` (a causal sequence axis)."""
    return _track("causal-sequence", 1, "4096")


def video() -> Track:
    """The 3-D operator track ``causal-video`` (time causal, height and width symmetric)."""
    return _track("causal-video", 3, "16x32x32")
