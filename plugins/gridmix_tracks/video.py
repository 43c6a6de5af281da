"""The built-in ``video`` track: in which of 8 directions does the moving square go?

The grid is time × height × width (one pixel per token, one channel). A square moves one pixel per
frame in one of 8 directions (the label), wrapping around the frame edges, among static squares that
look exactly like it in any single frame and a square that jumps to a random place every frame; every
pixel carries Gaussian noise. One frame says nothing about the label: a model must relate frames
across time to find the one square whose position changes steadily.

Models (same embedding, learned positions, depth, width, MLP, norms and head; they differ in the token
mixer only): dense spatio-temporal attention over all T·H·W tokens (the matched baseline), factorised
(divided) space-time attention as TimeSformer's, and the concentration mixer. The task classifies a
whole clip rather than predicting the future, so the mixer's time axis is symmetric, not causal.

Shape legend:
    S: samples, T, H, W: the grid; inputs (S, 1, T, H, W) float32, targets (S,) int64 in 0..7
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

# (dy, dx) per class: E, NE, N, NW, W, SW, S, SE
DIRECTIONS = np.array([(0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1), (1, 0), (1, 1)])
MIN_FRAMES, MIN_SIDE = 3, 4


@dataclass(frozen=True)
class MotionTask:
    """Knobs of the synthetic motion task (the defaults are calibrated)."""

    static_distractors: int = 2  # squares that stay put
    jumping_distractors: int = 1  # squares that appear at a random place every frame
    noise: float = 0.5

    def generate(self, rng: np.random.Generator, n: int, grid: Grid) -> Split:
        T, H, W = grid.shape
        side = max(1, min(H, W) // 4)
        labels = rng.integers(0, len(DIRECTIONS), size=n)
        videos = rng.normal(0.0, self.noise, size=(n, T, H, W))
        start = np.stack([rng.integers(0, H, n), rng.integers(0, W, n)], axis=1)  # (n, 2)
        steps = np.arange(T)[None, :, None] * DIRECTIONS[labels][:, None, :]  # (n, T, 2)
        _paint(videos, start[:, None, :] + steps, side)
        for _ in range(self.static_distractors):
            still = np.stack([rng.integers(0, H, n), rng.integers(0, W, n)], axis=1)
            _paint(videos, np.repeat(still[:, None, :], T, axis=1), side)
        for _ in range(self.jumping_distractors):
            _paint(videos, np.stack([rng.integers(0, H, (n, T)), rng.integers(0, W, (n, T))], axis=2), side)
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

    num_classes: int = len(DIRECTIONS)
    backbone: BackboneConfig = BackboneConfig(embed_dim=32, depth=2, num_heads=2, mlp_ratio=2.0)
    mixer: MixerConfig = field(default_factory=MixerConfig)

    def build(self, grid: Grid, *, token_mixer: str, mlp_ratio: float | None = None) -> GridTransformer:
        backbone = self.backbone if mlp_ratio is None else dataclasses.replace(self.backbone, mlp_ratio=mlp_ratio)
        return GridTransformer(Grid.parse(grid), in_chans=1, num_outputs=self.num_classes, backbone=backbone,
                               token_mixer=token_mixer, mixer=self.mixer, readout="mean")

    def dense_attention(self, grid: Grid, *, mlp_ratio: float | None = None) -> GridTransformer:
        return self.build(grid, token_mixer="attention", mlp_ratio=mlp_ratio)

    def divided_attention(self, grid: Grid, *, mlp_ratio: float | None = None) -> GridTransformer:
        return self.build(grid, token_mixer="divided", mlp_ratio=mlp_ratio)

    def concentration(self, grid: Grid, *, mlp_ratio: float | None = None) -> GridTransformer:
        return self.build(grid, token_mixer="mixer", mlp_ratio=mlp_ratio)

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
        description="which of 8 directions does the moving square go? (static look-alikes, a jumping square, noise)",
        ndim=3,
        default_grid=Grid((8, 8, 8)),
        make_data=make_data,
        loss=cross_entropy,
        metric=accuracy,
        metric_name="accuracy",
        direction="higher",
        models=VideoModels().specs(),
        matched_baseline="dense-attention",
        budget_overrides={},
        supports=grid_supported,
    )


@hookimpl
def gridmix_tracks() -> list[Track]:
    """The synthetic ``video`` track."""
    return [make_track()]
