"""The built-in ``recall`` track: associative recall on a grid of any dimension, a ladder over the
number of key–value pairs.

Each sample is a grid of tokens. The grid is cut into dominoes: pairs of cells adjacent along the
last axis (on ``8x8``, 32 dominoes). ``P`` random dominoes hold a key–value pair, the key in the
first cell and its value in the second; ``P`` other random dominoes hold a query in one of their two
cells (a fair coin), the other cell filler. Every cell no pair or query holds is filler (token 0).
With a vocabulary of ``V`` (the ``vocab`` setting): keys are tokens ``1..V``, values ``V+1..2V``,
queries ``2V+1..3V`` (the query of key ``k`` is token ``2V + k``). The keys of a sample are
distinct; values are drawn uniformly and independently (two keys may share a value); every key is
asked once, at a random query domino.

The target at each query cell is the value of its key (as a token id, ``V+1..2V``); every other cell
is ``IGNORE``, so loss and metric count only the query cells (per-token classification, like
``mqar``, but non-causal and off the line). Answering means finding the cell that holds the query's
key, anywhere on the grid, and reading its neighbour: content-based lookup over the whole grid.

Chance and ceiling, derived: the value is uniform over ``V`` tokens and independent of everything a
query cell holds (its own token and its place), so a model without token mixing reaches at most
``1/V`` answer accuracy in expectation (the track's ``chance``); the input determines every answer
(keys are distinct within a sample, and the value sits next to its key), so the ceiling is 1. No
label noise. The references (majority class, logistic probe, 1-NN) fit only whole-sample
classification with floating-point inputs; this track has per-token targets over token ids, so none
runs on it (``kind: none`` in the report) and the no-mixing control is the check that the task
needs mixing.

The difficulty ladder (the ``difficulty`` setting, rungs in order):

============  =====  ==============================================
rung          pairs  smallest grid (dominoes: 2 per pair)
============  =====  ==============================================
``pairs-1``   1      2 dominoes (e.g. ``2x2``)
``pairs-2``   2      4 dominoes (e.g. ``4x2``)
``pairs-4``   4      8 dominoes (``4x4``)
``pairs-8``   8      16 dominoes (``8x4``)
``pairs-16``  16     32 dominoes (``8x8``)
============  =====  ==============================================

``pairs-1`` needs no key matching: the one value on the grid is the answer, wherever it is, so it
asks only that a mixer carry a token from anywhere on the grid to the query cell (global reach).
From ``pairs-2`` on, the query must find its key and read the cell next to it: a key–value binding
(the value cell learns its neighbour's key, or the key cell its value) and a content-based lookup.
More pairs mean more keys to tell apart per query and more distractor keys per sample; the
vocabulary (``vocab``, default 32, at least the rung's pairs) is the ladder's second knob (``gridmix
sweep --over vocab=16,32,64``). The default grid is ``8x8`` (64 tokens); any grid of any dimension
whose last axis has at least 2 cells and that holds the rung's dominoes works (the ``dims`` setting
gives the track's dimension: ``--set dims=3 --grid 4x4x4``), and the task is the same on every such
grid (more filler), so a model can be tested on another grid.

Models: a non-causal pre-norm transformer over the grid's tokens (token embedding, learned
positions, timm ``Block``s, norm, a per-token head over the ``3V + 1`` tokens; dim 64, depth 2, 2
heads): ``transformer`` (dense attention, the matched baseline), ``transformer-concentration`` (the
idea), ``transformer-concentration-uncapped`` (ablation) and ``transformer-tokenwise`` (control);
every registered mixer through the backbone (``--baselines transformer-global-filter``, …).

Budgets: the global ones. At the default budget on ``8x8`` (docs/tracks.md, "Calibration at the
default budget", 8 seeds), dense attention solves ``pairs-1`` on every seed (1.000) and stays on
the "one of the values" plateau from ``pairs-2`` on (0.501 on ``pairs-2``, 0.281 on ``pairs-4``),
so ``pairs-1`` is the default rung: the one where attention's answer is known to be right. There
the concentration mixer (0.041) and the global filter (0.035) stay near chance (0.031); the
neighbourhood window (0.983) does not differ significantly from attention.

Shape legend:
    S: samples, *grid: the grid (N tokens in all), V: vocabulary; inputs (S, *grid) int64, targets
    (S, *grid) int64 (the value at query cells, ``IGNORE`` elsewhere), predictions (S, N, 3V + 1)
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from gridmix import hookimpl
from gridmix.core.grid import Grid
from gridmix.models import BackboneConfig, MixerConfig
from gridmix.tracks import Backbone, DataSizes, ModelSpec, Split, Track, TrackData
from gridmix_tracks.arms import attention_arm, idea_arms, mixer_backbone, network_size
from gridmix_tracks.common import IGNORE, cell_accuracy, cell_cross_entropy, generated_data
from gridmix_tracks.examples import draw_recall
from gridmix_tracks.token_model import TokenTransformer

# rung → pairs, in order
LADDER = {"pairs-1": 1, "pairs-2": 2, "pairs-4": 4, "pairs-8": 8, "pairs-16": 16}


@dataclass(frozen=True)
class GridRecallTask:
    """Settings of the recall task: the ladder's rung (its number of pairs) and the vocabulary."""

    difficulty: str = "pairs-1"
    vocab: int = 32

    def __post_init__(self) -> None:
        if self.difficulty not in LADDER:
            raise ValueError(f"difficulty={self.difficulty!r}; expected one of {', '.join(LADDER)}")
        if self.vocab < self.pairs:
            raise ValueError(
                f"vocab={self.vocab}; expected at least the {self.pairs} pairs of "
                f"{self.difficulty} (distinct keys)"
            )

    @property
    def pairs(self) -> int:
        return LADDER[self.difficulty]

    @property
    def tokens(self) -> int:
        """Filler, keys, values and queries: ``3V + 1`` token ids."""
        return 3 * self.vocab + 1

    def unsupported(self, grid: Grid) -> str | None:
        """Why ``grid`` cannot hold the rung's dominoes, or None."""
        if grid[-1] < 2:
            return f"the last axis needs at least 2 cells (a key and its value); got {grid}"
        dominoes = grid.numel // grid[-1] * (grid[-1] // 2)
        if dominoes < 2 * self.pairs:
            return (
                f"{self.difficulty} needs {2 * self.pairs} dominoes (a pair and a query each); "
                f"{grid} holds {dominoes}"
            )
        return None

    def generate(self, rng: np.random.Generator, n: int, grid: Grid) -> Split:
        V, P, last = self.vocab, self.pairs, grid[-1]
        per_row, rows = last // 2, grid.numel // last
        chosen = np.argsort(rng.random((n, rows * per_row)), axis=1)[:, : 2 * P]  # (n, 2P)
        first = (chosen // per_row) * last + 2 * (chosen % per_row)  # (n, 2P) domino's first cell
        keys = np.argsort(rng.random((n, V)), axis=1)[:, :P] + 1  # (n, P): distinct, in 1..V
        values = rng.integers(V + 1, 2 * V + 1, size=(n, P))  # (n, P)
        asked = np.argsort(rng.random((n, P)), axis=1)  # (n, P): which key each query domino asks
        at = first[:, P:] + rng.integers(0, 2, size=(n, P))  # (n, P): query cell in its domino
        tokens = np.zeros((n, grid.numel), dtype=np.int64)  # (n, N)
        targets = np.full((n, grid.numel), IGNORE, dtype=np.int64)  # (n, N)
        row = np.arange(n)[:, None]
        tokens[row, first[:, :P]], tokens[row, first[:, :P] + 1] = keys, values
        tokens[row, at] = 2 * V + keys[row, asked]
        targets[row, at] = values[row, asked]
        shape = (n, *grid.shape)
        return Split(
            inputs=torch.from_numpy(tokens.reshape(shape)),
            targets=torch.from_numpy(targets.reshape(shape)),
        )


@dataclass(frozen=True)
class GridRecallModels:
    """The token-grid transformers for a token count; ``specs()`` gives their ModelSpecs."""

    tokens: int
    backbone: BackboneConfig = BackboneConfig(embed_dim=64, depth=2, num_heads=2, mlp_ratio=2.0)
    mixer: MixerConfig = field(default_factory=lambda: MixerConfig(start="global"))

    def with_mixer(
        self, grid: Grid, attn_layer: type[nn.Module], *, mlp_ratio: float | None = None
    ) -> TokenTransformer:
        """This model with a registered mixer's ``attn_layer`` (the track's :class:`Backbone`)."""
        backbone = (
            self.backbone
            if mlp_ratio is None
            else dataclasses.replace(self.backbone, mlp_ratio=mlp_ratio)
        )
        return TokenTransformer(grid, vocab=self.tokens, backbone=backbone, attn_layer=attn_layer)

    def backbone_spec(self) -> Backbone:
        """How the track builds ``transformer-<mixer>`` around every registered mixer."""
        return mixer_backbone(self.with_mixer, self.mixer, prefix="transformer")

    def specs(self) -> tuple[ModelSpec, ...]:
        """The track's four arms, each built around a registered mixer (``Backbone.model``)."""
        backbone = self.backbone_spec()
        network = f"token-grid transformer, dense attention ({network_size(self.backbone)})"
        return attention_arm(backbone, "transformer", network), *idea_arms(backbone, "transformer")


def default_grid(dims: int) -> Grid:
    """About 64 tokens in ``dims`` axes of one length (``64``, ``8x8``, ``4x4x4``, ``3x3x3x3``)."""
    if dims < 1:
        raise ValueError(f"dims={dims}; expected a grid dimension >= 1")
    return Grid((max(2, round(64 ** (1 / dims))),) * dims)


def make_track(
    task: GridRecallTask = GridRecallTask(),
    backbone: BackboneConfig = GridRecallModels.backbone,
    dims: int = 2,
) -> Track:
    """The ``recall`` track at one rung on ``dims``-d grids; its settings (``--set``, ``gridmix
    sweep --over``) are ``difficulty`` (the rung), ``vocab``, ``dims`` (the grid's dimension: with
    ``--set dims=3`` a grid like ``4x4x4``) and the models' ``embed_dim`` and ``depth``."""

    def make_data(grid: Grid, seed: int, sizes: DataSizes) -> TrackData:
        return generated_data(
            lambda rng, n: task.generate(rng, n, grid), seed=seed, sizes=sizes, task="recall"
        )

    def rebuild(*, difficulty: str, vocab: int, dims: int, embed_dim: int, depth: int) -> Track:
        return make_track(
            GridRecallTask(difficulty=difficulty, vocab=vocab),
            dataclasses.replace(backbone, embed_dim=embed_dim, depth=depth),
            dims,
        )

    models = GridRecallModels(tokens=task.tokens, backbone=backbone)
    return Track(
        name="recall",
        description=f"associative recall on a grid: {task.pairs} key-value pairs in adjacent "
        f"cells, a query per key, vocabulary {task.vocab}; accuracy at the query cells; "
        f"ladder: {' < '.join(LADDER)}",
        ndim=dims,
        default_grid=default_grid(dims),
        make_data=make_data,
        loss=cell_cross_entropy,
        metric=cell_accuracy,
        metric_name="query accuracy",
        direction="higher",
        models=models.specs(),
        backbone=models.backbone_spec(),
        matched_baseline="transformer",
        chance=1 / task.vocab,  # the value is uniform over V tokens, independent of the query cell
        ceiling=1.0,  # keys are distinct in a sample: the input determines every answer
        supports=task.unsupported,
        fixed_grid=None,
        settings=dict(
            difficulty=task.difficulty,
            vocab=task.vocab,
            dims=dims,
            embed_dim=backbone.embed_dim,
            depth=backbone.depth,
        ),
        rebuild=rebuild,
        ladder=tuple(LADDER),
        draw_examples=functools.partial(draw_recall, task),
    )


@hookimpl
def gridmix_tracks() -> list[Track]:
    """The synthetic ``recall`` track."""
    return [make_track()]
