"""The built-in ``match`` track: are two small patterns, a rung's distance apart, the same? On a
grid of any dimension, a ladder over the distance.

Each sample is a grid of two channels: values, a fair ±1 in every cell, and a mask, 1 on the cells
of two patterns and 0 elsewhere. The patterns are blocks of ``2`` cells along every axis (``2x2`` on
a 2-d grid, ``2x2x2`` on a 3-d one, ``k = 2^d`` cells). The first pattern ``A`` is uniform over
``{±1}^k``; the second ``B`` is a copy of ``A`` (label 1) or ``A`` with exactly ``flips`` of its
cells negated, at random (label 0; the ``flips`` setting, default 2, at most ``k``). A differing
pattern is never a fresh one: a fresh ``2x2`` pattern equals ``A`` one time in 16, and the input
would no longer determine the label.

The rung sets the distance between the patterns: the Chebyshev distance (the largest distance along
one axis) between their first corners, ``d`` cells exactly. The offset from ``A`` to ``B`` is drawn
uniformly among the offsets of Chebyshev length ``d`` that fit the grid, then ``A``'s corner
uniformly among the places where both patterns fit. Both patterns are ``2`` cells wide and
``d >= 2``, so they never overlap (on ``dist-2`` they may touch).

Why random values off the patterns, and a mask to mark them: with filler 0 off the patterns (the
first version), the inputs of a small grid repeat their placements often enough for 1-NN to find
near-copies, whose patterns agree as the query's do: 1-NN labelled 0.583 of 2048 test samples on
``8x8`` ``dist-2`` and 0.544 on ``16x16`` ``dist-8`` right (1024 training samples; standard error
0.011). Random values in the other cells add to every distance between two samples a term that
varies far more than the patterns' part of it, once the grid has enough cells: with them (1024
training, 4096 test samples, two seeds each; standard error 0.008) 1-NN scored 0.504 and 0.500 on
``8x8`` ``dist-2``, 0.495 and 0.515 on ``8x8`` ``dist-4``, 0.505 and 0.510 on ``16x16``
``dist-14``, 0.496 and 0.520 on ``6x6x6`` ``dist-4``, 0.498 and 0.495 on ``256`` ``dist-14``, but
0.629 on ``4x4`` ``dist-2`` (2048 test samples): a grid of fewer than 64 cells is refused.

Labels: exactly balanced before the label noise (a random half of each split is positive; an odd
split has one more negative); then 10 % of the labels are flipped, the same number in each class,
so they stay balanced. The metric is the test cross-entropy (lower is better), as the ``image`` and
``video`` tracks': its chance level is a bound that no model without token mixing can beat (below),
where accuracy's is not, and the label noise keeps a model's spread off zero, where a continuous
metric would lose it.

The task needs token mixing, by construction: the places are drawn without the label, and every cell
of ``B``, like every cell of ``A`` and every other cell, is a fair ±1 under both labels; so every
token (its value and its mask) has the same distribution under both labels, and the label noise,
independent of the input, keeps it so. A model whose logit ``z`` is a sum of per-token terms (the
no-mixing control: a per-token embedding with its position, blocks without token mixing, a per-token
norm, mean pooling, a linear head; the logistic probe, linear in the pixels) therefore has ``E[z | y
= 1] = E[z | y = 0]``; with balanced labels ``E[(1/2 − y)·z] = 0``, and the expected cross-entropy
``E[softplus(z) − y·z] = E[ln(2·cosh(z/2))] + E[(1/2 − y)·z]`` is at least ln 2, whatever the
training. In accuracy such a sum can read a little above 1/2: the patterns' values summed spread
wider when the patterns agree (on ``2x2`` with 2 flips, "label 1 when the values summed over the
mask are at least 4" scores 17/32 ≈ 0.53), so accuracy's 1/2 bounds nothing here. The 1-NN reference
is not a sum of per-token terms, so the argument does not cover it; tests/test_match_track.py
measures it, with the logistic probe and the control, at chance.

Chance and ceiling, derived: chance ln 2 ≈ 0.693 nats (balanced labels; the bound above); the clean
label is a function of the input (the two blocks are found in the mask: the first corner in
row-major order is its lowest marked cell, the other pattern is the rest; compare their values), so
the least expected test cross-entropy is that of the label noise alone, H(0.1) ≈ 0.325 nats (the
track's ``ceiling``; one test set can read a little lower).

The difficulty ladder (the ``difficulty`` setting, rungs in order; the distance in cells):

===========  ========  ==============================================================
rung         distance  smallest grid of equal sides, 2-d and 3-d (64 cells at least)
===========  ========  ==============================================================
``dist-2``   2         ``8x8``, ``4x4x4``
``dist-4``   4         ``8x8``, ``6x6x6``
``dist-8``   8         ``10x10``, ``10x10x10``
``dist-14``  14        ``16x16`` (the default: opposite edges), ``16x16x16``
===========  ========  ==============================================================

A grid holds a rung when an axis has the distance + 2 cells (every axis at least 2, 64 cells in
all); one that does not is refused in one line that names the smallest grid of equal sides. The
default grid has about 256 tokens in ``dims`` axes of one length (the ``dims`` setting, default 2:
``16x16``; ``--set dims=3`` gives ``6x6x6``; ``dims=1`` gives ``256``), each axis at least the
rung's distance + 2 long (``--set dims=3 --set difficulty=dist-8`` gives ``10x10x10``). A farther
rung asks the mixer to carry a pattern across more cells: local mixers (a window, a short
convolution) reach a fixed distance per block; attention and global filters reach every cell at
once. ``flips`` is the ladder's second knob (1: the patterns differ in one cell only).

Models: a pre-norm transformer over the grid's cells (``GridTransformer``: a per-cell embedding,
learned positions, timm ``Block``s, a per-token norm, mean pooling, a linear head; dim 32, depth 2,
2 heads, MLP x2): ``transformer`` (dense attention, the matched baseline),
``transformer-concentration`` (the idea), ``transformer-concentration-uncapped`` (ablation),
``transformer-tokenwise`` (control); every registered mixer through the backbone
(``--baselines transformer-global-filter``, …).

Budgets: the global ones. Which rung attention solves and which a mixer fails at the default budget
is not measured yet (docs/tracks.md).

Shape legend:
    S: samples, *grid: the grid (D axes, N cells), k = 2^D: cells of a pattern; inputs (S, 2,
    *grid) float32 (channel 0 the values in {−1, 1}, channel 1 the mask in {0, 1}), targets (S,)
    int64 in {0, 1}
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from gridmix import hookimpl
from gridmix.core.grid import Grid
from gridmix.models import BackboneConfig, GridTransformer, MixerConfig
from gridmix.tracks import Backbone, DataSizes, ModelSpec, Split, Track, TrackData
from gridmix_tracks.arms import attention_arm, idea_arms, mixer_backbone, network_size
from gridmix_tracks.common import binary_entropy, cross_entropy, generated_data, mean_cross_entropy

SIDE = 2  # a pattern's side along every axis
MIN_CELLS = 64  # fewer: 1-NN is above chance (module docstring)
# rung → distance in cells, in order
LADDER = {"dist-2": 2, "dist-4": 4, "dist-8": 8, "dist-14": 14}


@dataclass(frozen=True)
class Pairs:
    """Generated samples before the label noise: the inputs, both patterns' first corners and the
    clean labels."""

    inputs: np.ndarray  # (S, 2, *grid) float32: values in {-1, 1}, the mask in {0, 1}
    corners: np.ndarray  # (S, 2, D) int64: A's corner, B's corner
    labels: np.ndarray  # (S,) int64: 1 when B is a copy of A


@dataclass(frozen=True)
class MatchTask:
    """Settings of the match task: the ladder's rung (the distance), how many cells a differing
    pattern flips, and the fraction of labels flipped."""

    difficulty: str = "dist-2"
    flips: int = 2
    label_noise: float = 0.1  # test cross-entropy cannot go below H(0.1) ≈ 0.325

    def __post_init__(self) -> None:
        if self.difficulty not in LADDER:
            raise ValueError(f"difficulty={self.difficulty!r}; expected one of {', '.join(LADDER)}")
        if self.flips < 1:
            raise ValueError(f"flips={self.flips}; expected at least 1 (a differing cell)")
        if not 0 <= self.label_noise < 0.5:
            raise ValueError(f"label_noise={self.label_noise}; expected a fraction in [0, 0.5)")

    @property
    def distance(self) -> int:
        return LADDER[self.difficulty]

    def unsupported(self, grid: Grid) -> str | None:
        """Why ``grid`` cannot hold two patterns the rung's distance apart or the flips; or None."""
        cells = SIDE**grid.ndim
        if grid.numel < MIN_CELLS:
            return (
                f"needs at least {MIN_CELLS} cells (on fewer, 1-NN finds near-copies of a sample "
                f"among the training samples); got {grid} ({grid.numel})"
            )
        if self.flips > cells:
            return f"flips={self.flips}; a pattern on a {grid.ndim}-d grid has only {cells} cells"
        if min(grid) < SIDE:
            return f"every axis needs at least {SIDE} cells (a pattern's side); got {grid}"
        if max(grid) < self.distance + SIDE:
            return (
                f"{self.difficulty} puts the patterns {self.distance} cells apart: it needs an "
                f"axis of {self.distance + SIDE} cells (the smallest grid of equal sides is "
                f"{self.smallest(grid.ndim)}); got {grid}"
            )
        return None

    def smallest(self, dims: int) -> Grid:
        """The smallest ``dims``-d grid of equal sides that holds the rung."""
        side = max(self.distance + SIDE, math.ceil(MIN_CELLS ** (1 / dims) - 1e-9))
        return Grid((side,) * dims)

    def offsets(self, grid: Grid) -> np.ndarray:
        """Every offset (M, D) of Chebyshev length ``distance`` between two patterns that fit."""
        reach = [min(self.distance, n - SIDE) for n in grid]
        axes = [np.arange(-r, r + 1) for r in reach]
        offsets = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, grid.ndim)
        return offsets[np.abs(offsets).max(axis=1) == self.distance]

    def draw(self, rng: np.random.Generator, n: int, grid: Grid) -> Pairs:
        """``n`` samples without label noise, exactly balanced (odd ``n``: one more negative)."""
        problem = self.unsupported(grid)
        if problem is not None:
            raise ValueError(problem)
        D, k = grid.ndim, SIDE**grid.ndim
        labels = rng.permutation(n) % 2  # (n,)
        offsets = self.offsets(grid)
        offset = offsets[rng.integers(0, len(offsets), n)]  # (n, D)
        low = np.maximum(0, -offset)  # (n, D): A's corner keeps both patterns on the grid
        high = np.array(grid.shape) - SIDE - np.maximum(0, offset)  # (n, D), inclusive
        first = low + np.floor(rng.random((n, D)) * (high - low + 1)).astype(np.int64)  # (n, D)
        corners = np.stack([first, first + offset], axis=1)  # (n, 2, D)
        a = rng.choice([-1.0, 1.0], size=(n, k))  # (n, k)
        flipped = np.argsort(rng.random((n, k)), axis=1) < self.flips  # (n, k): `flips` cells
        b = np.where(flipped & (labels[:, None] == 0), -a, a)  # (n, k)
        cells = np.array(list(itertools.product(range(SIDE), repeat=D)))  # (k, D), row-major
        inputs = np.zeros((n, 2, *grid.shape), dtype=np.float32)  # (n, 2, *grid)
        inputs[:, 0] = rng.choice([-1.0, 1.0], size=(n, *grid.shape))  # every cell's value
        row = np.arange(n)[:, None]
        for pattern, values in ((0, a), (1, b)):
            at = tuple(np.moveaxis(corners[:, pattern, None, :] + cells, -1, 0))  # D × (n, k)
            inputs[(row, 0, *at)], inputs[(row, 1, *at)] = values, 1.0
        return Pairs(inputs=inputs, corners=corners, labels=labels.astype(np.int64))

    def noisy(self, rng: np.random.Generator, labels: np.ndarray) -> np.ndarray:
        """``labels`` with the same number of each class flipped (``label_noise`` of a half)."""
        count = round(self.label_noise * (len(labels) // 2))
        flip = np.zeros(len(labels), dtype=bool)
        for value in (0, 1):
            flip[rng.permutation(np.flatnonzero(labels == value))[:count]] = True
        return np.where(flip, 1 - labels, labels)

    def generate(self, rng: np.random.Generator, n: int, grid: Grid) -> Split:
        pairs = self.draw(rng, n, grid)
        return Split(
            inputs=torch.from_numpy(pairs.inputs),  # (n, 2, *grid)
            targets=torch.from_numpy(self.noisy(rng, pairs.labels)),
        )


@dataclass(frozen=True)
class MatchModels:
    """The grid transformers of the track; ``specs()`` gives their ModelSpecs."""

    backbone: BackboneConfig = BackboneConfig(embed_dim=32, depth=2, num_heads=2, mlp_ratio=2.0)
    mixer: MixerConfig = field(default_factory=lambda: MixerConfig(start="global"))

    def with_mixer(
        self, grid: Grid, attn_layer: type[nn.Module], *, mlp_ratio: float | None = None
    ) -> GridTransformer:
        """This network with a registered mixer's ``attn_layer`` (the track's :class:`Backbone`)."""
        backbone = (
            self.backbone
            if mlp_ratio is None
            else dataclasses.replace(self.backbone, mlp_ratio=mlp_ratio)
        )
        return GridTransformer(
            Grid.parse(grid),
            in_chans=2,
            num_outputs=2,
            backbone=backbone,
            attn_layer=attn_layer,
            readout="mean",
        )

    def backbone_spec(self) -> Backbone:
        """How the track builds ``transformer-<mixer>`` around every registered mixer."""
        return mixer_backbone(self.with_mixer, self.mixer, prefix="transformer")

    def specs(self) -> tuple[ModelSpec, ...]:
        """The track's four arms, each built around a registered mixer (``Backbone.model``)."""
        backbone = self.backbone_spec()
        size = network_size(self.backbone, "mean-pool head")
        network = f"grid transformer, dense attention ({size})"
        return attention_arm(backbone, "transformer", network), *idea_arms(backbone, "transformer")


def default_grid(dims: int, distance: int) -> Grid:
    """About 256 cells in ``dims`` axes of one length (``256``, ``16x16``, ``6x6x6``), each axis at
    least ``distance`` + 2 long so that the rung fits (``10x10x10`` for ``dist-8`` in 3-d)."""
    if dims < 1:
        raise ValueError(f"dims={dims}; expected a grid dimension >= 1")
    return Grid((max(distance + SIDE, round(256 ** (1 / dims))),) * dims)


def make_track(
    task: MatchTask = MatchTask(),
    backbone: BackboneConfig = MatchModels.backbone,
    dims: int = 2,
) -> Track:
    """The ``match`` track at one rung on ``dims``-d grids; its settings (``--set``, ``gridmix sweep
    --over``) are ``difficulty`` (the rung), ``flips``, ``dims`` (the grid's dimension: with ``--set
    dims=3`` a grid like ``6x6x6``) and the models' ``embed_dim`` and ``depth``."""

    def make_data(grid: Grid, seed: int, sizes: DataSizes) -> TrackData:
        return generated_data(
            lambda rng, n: task.generate(rng, n, grid), seed=seed, sizes=sizes, task="match"
        )

    def rebuild(*, difficulty: str, flips: int, dims: int, embed_dim: int, depth: int) -> Track:
        return make_track(
            dataclasses.replace(task, difficulty=difficulty, flips=flips),
            dataclasses.replace(backbone, embed_dim=embed_dim, depth=depth),
            dims,
        )

    models = MatchModels(backbone=backbone)
    return Track(
        name="match",
        description=f"are the two {'x'.join(['2'] * dims)} patterns {task.distance} cells apart "
        f"(Chebyshev) the same? (a differing one has {task.flips} cells flipped; "
        f"{task.label_noise * 100:g} % labels flipped); ladder: {' < '.join(LADDER)}",
        ndim=dims,
        default_grid=default_grid(dims, task.distance),
        make_data=make_data,
        loss=cross_entropy,
        metric=mean_cross_entropy,
        metric_name="test cross-entropy",
        direction="lower",
        models=models.specs(),
        backbone=models.backbone_spec(),
        matched_baseline="transformer",
        chance=math.log(2),  # balanced labels; no sum of per-token terms does better in expectation
        ceiling=binary_entropy(task.label_noise),  # the clean label is a function of the input
        supports=task.unsupported,
        fixed_grid=None,
        settings=dict(
            difficulty=task.difficulty,
            flips=task.flips,
            dims=dims,
            embed_dim=backbone.embed_dim,
            depth=backbone.depth,
        ),
        rebuild=rebuild,
        ladder=tuple(LADDER),
    )


@hookimpl
def gridmix_tracks() -> list[Track]:
    """The synthetic ``match`` track."""
    return [make_track()]
