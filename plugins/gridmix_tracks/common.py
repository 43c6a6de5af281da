"""Helpers the built-in tracks share: seeded per-split random generators, losses and metrics."""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from gridmix.tracks import DataSizes, Split, TrackData

SPLITS = ("train", "val", "test")
# Tracks on the user's data split it once, with this seed, whatever the run's seed: every seed then
# tests on the same test set (seeds vary initialisation and batch order), so the paired test's
# inference is conditional on that one dataset and split, and no two seeds' test sets overlap
# partially (docs/analysis.md).
FIXED_SPLIT_SEED = 0


def split_rng(seed: int, split: str, *, task: str) -> np.random.Generator:
    """An independent generator per (task, seed, split): splits never share samples or random
    streams."""
    return np.random.default_rng([zlib.crc32(task.encode()), seed, SPLITS.index(split)])


def generated_data(
    generate: Callable[[np.random.Generator, int], Split], *, seed: int, sizes: DataSizes, task: str
) -> TrackData:
    """Draw each split with ``generate(rng, n)`` from its own generator (see :func:`split_rng`)."""
    counts = {"train": sizes.n_train, "val": sizes.n_val, "test": sizes.n_test}
    return TrackData(
        **{split: generate(split_rng(seed, split, task=task), counts[split]) for split in SPLITS}
    )


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Classification loss: logits (S, K), labels (S,) int64."""
    return F.cross_entropy(logits, labels)


def mean_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Mean cross-entropy (nats) over a whole split: a continuous metric, lower is better (ln K at
    chance)."""
    return F.cross_entropy(logits.float(), labels).item()


def binary_entropy(p: float) -> float:
    """H(p) in nats: the least expected cross-entropy when a fraction ``p`` of the labels is flipped
    at random."""
    return 0.0 if p in (0.0, 1.0) else -(p * math.log(p) + (1 - p) * math.log(1 - p))


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of samples whose arg-max logit is the label."""
    return (logits.argmax(dim=-1) == labels).float().mean().item()


def mse_loss(predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Regression loss: mean squared error over every predicted value."""
    return F.mse_loss(predictions, targets)


def mse(predictions: torch.Tensor, targets: torch.Tensor) -> float:
    """Mean squared error over a whole split."""
    return F.mse_loss(predictions, targets).item()


IGNORE = -100  # the target of a cell that is not asked (F.cross_entropy's ignore_index)


def cell_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-cell classification loss over the asked cells only: logits (S, N, K), targets (S, *grid)
    int64, ``IGNORE`` at the cells not asked."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)


def cell_choice_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Which asked cell is the answer: a softmax over each sample's asked cells (targets not
    ``IGNORE``) of the one logit per cell, against the cell whose target is 1; logits (S, N, 1),
    targets (S, *grid) with exactly one 1 among the asked cells of a sample."""
    scores, answer = _choice(logits, targets)  # (S, N), (S,)
    return F.cross_entropy(scores, answer)


def cell_choice_accuracy(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """Fraction of samples whose highest-logit asked cell is the answer (see
    :func:`cell_choice_cross_entropy`)."""
    scores, answer = _choice(logits, targets)  # (S, N), (S,)
    return (scores.argmax(dim=-1) == answer).float().mean().item()


def _choice(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The logits of the asked cells, -inf elsewhere (S, N), and each sample's answer cell (S,)."""
    targets = targets.flatten(1)  # (S, N)
    scores = logits[..., 0].masked_fill(targets == IGNORE, float("-inf"))  # (S, N)
    return scores, (targets == 1).int().argmax(dim=-1)  # (S, N), (S,)


def cell_accuracy(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """Fraction of the asked cells (targets not ``IGNORE``) whose arg-max logit is the target:
    logits (S, N, K), targets (S, *grid)."""
    targets = targets.flatten(1)  # (S, N)
    asked = targets != IGNORE  # (S, N)
    return (logits.argmax(dim=-1)[asked] == targets[asked]).float().mean().item()
