"""The built-in ``video`` track: how many of the three squares move?

The grid is time × height × width (one pixel per token, one channel). Three identical squares sit in
the clip; each one either stays put or moves one pixel per frame in one of 8 directions, wrapping around
the frame edges. The label is how many of them move (0 to 3, uniformly), and every pixel carries
Gaussian noise. Any single frame shows three identical squares whatever the label: a model has to relate
the frames of the clip (a pixel that stays lit through time belongs to a static square) and count.

Classifying a whole clip involves no future, so the mixer's time axis is symmetric, not causal. The mixer
starts as a running mean over time at each place (``start=("global", "lowpass", "lowpass")``), which shows
at step 0 which pixels stay lit: started as a spatio-temporal blur (the lowpass start) it stayed at chance
at the default budget. Dense attention starts blind (its uniform start gives every token the clip's mean,
which does not depend on the label) and stayed at chance too (docs/plugins.md, "Budgets").

Models (same embedding, learned positions, depth, width, MLP, norms and head; they differ in the token
mixer only): dense spatio-temporal attention over all T·H·W tokens (the matched baseline), factorised
(divided) space-time attention as TimeSformer's, and the concentration mixer.

Shape legend:
    S: samples, T, H, W: the grid; inputs (S, 1, T, H, W) float32, targets (S,) int64 in 0..3
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import torch

from gridmix import hookimpl
from gridmix.grid import Grid
from gridmix.models import BackboneConfig, GridTransformer, MixerConfig
from gridmix.tracks import DataSizes, ModelSpec, Split, Track, TrackData
from gridmix_tracks.common import accuracy, cross_entropy, generated_data

# (dy, dx) per direction of motion: E, NE, N, NW, W, SW, S, SE
DIRECTIONS = np.array([(0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1), (1, 0), (1, 1)])
SQUARES = 3
MIN_FRAMES, MIN_SIDE = 3, 4
# Dense attention over 512 tokens is the expensive model: 384 steps of 16 clips keep a full default
# comparison of the three models near 9 minutes on 2 CPU cores (docs/plugins.md, "Budgets of the built-in tracks").
BUDGET_OVERRIDES = {"default": {"n_train": 1024, "n_val": 128, "epochs": 6, "batch_size": 16, "sweep_seeds": 1}}


@dataclass(frozen=True)
class MotionTask:
    """Knobs of the synthetic motion task (the defaults are calibrated)."""

    noise: float = 0.5  # per-pixel Gaussian noise

    def generate(self, rng: np.random.Generator, n: int, grid: Grid) -> Split:
        T, H, W = grid.shape
        side = max(1, min(H, W) // 4)
        labels = rng.integers(0, SQUARES + 1, size=n)  # how many squares move
        moving = rng.random((n, SQUARES)).argsort(axis=1) < labels[:, None]  # (n, 3): a random subset
        velocity = DIRECTIONS[rng.integers(0, len(DIRECTIONS), size=(n, SQUARES))] * moving[..., None]
        videos = rng.normal(0.0, self.noise, size=(n, T, H, W))
        for k in range(SQUARES):
            start = np.stack([rng.integers(0, H, n), rng.integers(0, W, n)], axis=1)  # (n, 2)
            _paint(videos, start[:, None, :] + np.arange(T)[None, :, None] * velocity[:, None, k], side)
        inputs = torch.from_numpy(videos[:, None].astype(np.float32))
        return Split(inputs=inputs, targets=torch.from_numpy(labels))


def _paint(videos: np.ndarray, corners: np.ndarray, side: int) -> None:
    """Add a side × side square of intensity 1 at ``corners`` (n, T, 2) in every frame, wrapping around."""
    n, T, H, W = videos.shape
    sample, frame = np.meshgrid(np.arange(n), np.arange(T), indexing="ij")
    for dy in range(side):
        for dx in range(side):
            videos[sample, frame, (corners[..., 0] + dy) % H, (corners[..., 1] + dx) % W] += 1.0


@dataclass(frozen=True)
class VideoModels:
    """The video models; ``specs()`` gives their ModelSpecs."""

    num_classes: int = SQUARES + 1
    backbone: BackboneConfig = BackboneConfig(embed_dim=32, depth=2, num_heads=2, mlp_ratio=2.0)
    # A running mean over time at each place, a blur in space: where a lit pixel stays lit (a static square) shows
    # at step 0, as in divided attention's uniform time attention (docs/mixer.md, "Where the mixer starts").
    mixer: MixerConfig = field(default_factory=lambda: MixerConfig(start=("global", "lowpass", "lowpass")))

    def build(self, grid: Grid, *, token_mixer: str, mlp_ratio: float | None = None,
              kind: str = "concentration") -> GridTransformer:
        backbone = self.backbone if mlp_ratio is None else dataclasses.replace(self.backbone, mlp_ratio=mlp_ratio)
        return GridTransformer(Grid.parse(grid), in_chans=1, num_outputs=self.num_classes, backbone=backbone,
                               token_mixer=token_mixer, mixer=dataclasses.replace(self.mixer, kind=kind),
                               readout="mean")

    def dense_attention(self, grid: Grid, *, mlp_ratio: float | None = None) -> GridTransformer:
        return self.build(grid, token_mixer="attention", mlp_ratio=mlp_ratio)

    def divided_attention(self, grid: Grid, *, mlp_ratio: float | None = None) -> GridTransformer:
        return self.build(grid, token_mixer="divided", mlp_ratio=mlp_ratio)

    def concentration(self, grid: Grid, *, mlp_ratio: float | None = None) -> GridTransformer:
        return self.build(grid, token_mixer="mixer", mlp_ratio=mlp_ratio)

    def uncapped(self, grid: Grid, *, mlp_ratio: float | None = None) -> GridTransformer:
        return self.build(grid, token_mixer="mixer", mlp_ratio=mlp_ratio, kind="uncapped")

    def nomix(self, grid: Grid, *, mlp_ratio: float | None = None) -> GridTransformer:
        return self.build(grid, token_mixer="mixer", mlp_ratio=mlp_ratio, kind="tokenwise")

    def specs(self) -> tuple[ModelSpec, ...]:
        b = self.backbone
        size = f"dim {b.embed_dim}, depth {b.depth}, {b.num_heads} heads, MLP x{b.mlp_ratio:g}, mean-pool head"
        return (
            ModelSpec("dense-attention", self.dense_attention,
                      description=f"joint space-time attention over all T·H·W tokens ({size})"),
            ModelSpec("divided-attention", self.divided_attention,
                      description="TimeSformer-style divided attention: over time per location, then over space"),
            ModelSpec("concentration", self.concentration, role="idea", width_knob="mlp_ratio",
                      description=f"the same network with ConcentrationMixer (rank {self.mixer.rank}, "
                                  f"time axis symmetric) as token mixer"),
            ModelSpec("concentration-uncapped", self.uncapped, role="ablation",
                      description="the idea without its eigenvalue cap (softplus eigenvalues), same everything else"),
            ModelSpec("nomix", self.nomix, role="control",
                      description="the same network with no token mixing (TokenwiseMixer: W_o W_v per token)"),
        )


def grid_supported(grid: Grid) -> str | None:
    """Motion needs a few frames, and frames large enough for squares to move among distractors."""
    T, H, W = grid.shape
    if T < MIN_FRAMES or min(H, W) < MIN_SIDE:
        return f"needs at least {MIN_FRAMES} frames of at least {MIN_SIDE}x{MIN_SIDE}; got {grid}"
    return None


def make_track(task: MotionTask = MotionTask()) -> Track:
    """The ``video`` track with the given task knobs."""

    def make_data(grid: Grid, seed: int, sizes: DataSizes) -> TrackData:
        return generated_data(lambda rng, n: task.generate(rng, n, grid), seed=seed, sizes=sizes, task="video")

    return Track(
        name="video",
        description="how many of the three squares move? (identical squares, noise)",
        ndim=3,
        default_grid=Grid((8, 8, 8)),
        make_data=make_data,
        loss=cross_entropy,
        metric=accuracy,
        metric_name="accuracy",
        direction="higher",
        models=VideoModels().specs(),
        matched_baseline="dense-attention",
        budget_overrides=BUDGET_OVERRIDES,
        chance=1 / (SQUARES + 1),
        ceiling=1.0,
        supports=grid_supported,
    )


@hookimpl
def gridmix_tracks() -> list[Track]:
    """The synthetic ``video`` track."""
    return [make_track()]
