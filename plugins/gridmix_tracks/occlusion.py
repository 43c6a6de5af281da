"""The built-in ``occlusion`` track: is the hidden object in the marked cell in the last frame?

A 3-d binary clip classification (time × height × width, one pixel per token, one channel) that
needs time and space together. A target object (one pixel, value 1) moves at a constant velocity,
drawn uniformly from the 24 velocities whose components lie in -2..2 (not both 0), from a uniform
random start; ``distractors`` other objects (value 0.5) move the same way, each with its own start
and velocity. Motion wraps around the frame's edges (a torus, as the ``video`` track's square): no
wall, no bounce. Every object is visible in the first ``T - k`` frames and hidden (removed: the
frames are blank) in the last ``k``, the ladder's rung. The last frame holds one marker pixel (value
-1) and nothing else. Label 1: the marker is where the target is in the last frame (its start plus
``T - 1`` velocities, modulo the frame). Label 0: the marker is at a decoy, either where the target
would be with another velocity (uniform over the other 23) or, with distractors, a fair coin
choosing instead where a random distractor is in the last frame; a decoy never falls on the target's
cell (the whole draw is repeated when it does). Where objects overlap, the target is drawn on top.
Labels are exactly balanced in every split (a random half of each split is positive; an odd split
has one more negative).

Why wrap: the target's final cell is then exactly uniform over the frame (a uniform start shifted by
any velocity), and two consecutive visible frames give the velocity modulo the frame for any speed.
With a bounce, two frames do not tell a still axis from one that met a wall, nor a speed of 1 from
a speed of 2 turned back by it (only the 4 diagonal unit velocities would be told apart: too few
paths, which 1-NN would memorise); with neither, a path of ``T`` frames barely fits an 8x8 frame.

Chance and ceiling, derived: with balanced labels any guess scores 1/2 in expectation (the track's
``chance``, accuracy). The input determines the label: the target is the only pixel of value 1 in
every visible frame, two visible frames (every rung keeps at least two) give its velocity modulo the
frame, and its final cell is its first cell plus ``T - 1`` velocities (tests/test_occlusion_track.py
extrapolates exactly so); so the ceiling is 1. No label noise.

The task needs mixing, and every token's value has the same distribution under both labels: the
objects are drawn (decoy included) before the label, so every visible frame is label-blind; the
hidden frames are blank; the marker is the target's final cell or the decoy, and these two have the
same distribution (swapping the target's velocity with the decoy velocity, or the target with the
chosen distractor, is a bijection of equally likely draws that keeps a valid draw valid and swaps
the two cells): uniform over the frame but for the redrawn draws, which change both alike. So for a
model whose logit difference ``z`` is a sum of per-token terms (the no-mixing control: per-token
features, mean pooling, a linear head; and the logistic probe, linear in the pixels) ``E[z | y]`` is
the same for both labels, and its cross-entropy ``E[ln(2·cosh(z/2))] + E[(1/2 - y)·z]`` cannot go
below ln 2 (as the ``video`` track argues): its optimum is a constant logit, and its accuracy could
leave 1/2 only through the shape of ``z``'s distribution, not its mean. 1-NN on the pixels can only
use a training clip with the same objects: at ``8x8x8`` with one distractor there are 24·64 target
paths times 24·64 distractor paths, far more than a training split (1-NN read 0.500 on 512 test
clips of ``hidden-1``, 512 training clips); with none, the 24·64 target paths are few enough for it
to meet the test clip's path now and then (0.545 there, 2 standard errors above chance; 0.514 with
1024 training clips). The references and the control are at chance in tests/test_occlusion_track.py.

The difficulty ladder (the ``difficulty`` setting, rungs in order; ``k`` the hidden frames):

============  ====  ============================  =====================================
rung          k     visible frames on ``8x8x8``   smallest ``T`` (two visible frames)
============  ====  ============================  =====================================
``hidden-1``  1     7                             3
``hidden-2``  2     6                             4
``hidden-4``  4     4                             6
``hidden-6``  6     2                             8
============  ====  ============================  =====================================

The more frames are hidden, the fewer show the velocity and the farther (in time, and with speed in
space) the marker lies from the target's last sight. The second knob is ``distractors`` (default 1,
0 or more: ``gridmix sweep --over distractors=0,1,2``): more objects to tell apart from the target
and, with one or more, decoys that are where a distractor ends. A rung whose ``T`` leaves fewer than
two visible frames is refused in one line, as are frames smaller than 4x4 and grids on which every
object is back at its start in the last frame (``T - 1`` a multiple of both ``H`` and ``W``: no
velocity decoy exists). The default grid is ``8x8x8``; the task is the same on every grid it takes.

Models: the ``video`` track's (GridTransformer, patch 1, learned positions, mean-pool head; dim 32,
depth 2, 2 heads): ``dense-attention`` (joint space-time attention, the matched baseline),
``divided-attention`` (not in the default run), ``concentration`` (the idea, at its default start,
``MixerConfig()``), ``concentration-uncapped`` (ablation), ``tokenwise`` (control), and every
registered mixer through the backbone. Budgets: the global ones; the calibration (which rung
attention solves and which a mixer fails at the default budget) is not measured yet, and at the
smoke run's step time a default run on a 2-core CPU would exceed 10 minutes; in first pilots dense
attention stayed on the chance plateau of ``hidden-1`` (docs/tracks.md, "Pilots").

Shape legend:
    S: samples, T, H, W: the grid, O: objects (target first, then distractors);
    inputs (S, 1, T, H, W) float32 in {-1, 0, 0.5, 1}, targets (S,) int64 in {0, 1}
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np
import torch

from gridmix import hookimpl
from gridmix.core.grid import Grid
from gridmix.models import BackboneConfig, MixerConfig
from gridmix.tracks import DataSizes, Split, Track, TrackData
from gridmix_tracks.common import accuracy, cross_entropy, generated_data
from gridmix_tracks.examples import draw_occlusion
from gridmix_tracks.video import DEFAULT_MODELS, VideoModels

# every (dy, dx) with components in -2..2, not both 0
VELOCITIES = np.array([(dy, dx) for dy in range(-2, 3) for dx in range(-2, 3) if dy or dx])
LADDER = {"hidden-1": 1, "hidden-2": 2, "hidden-4": 4, "hidden-6": 6}  # rung → hidden frames
TARGET, DISTRACTOR, MARKER = 1.0, 0.5, -1.0  # pixel values; the background is 0
MIN_VISIBLE, MIN_SIDE = 2, 4
DRAWS = 100  # rounds of redrawing the samples whose decoy fell on the target's final cell


@dataclass(frozen=True)
class Objects:
    """The objects of ``n`` clips and each clip's decoy: starts and velocities (n, O, 2) as (row,
    column), decoy cells (n, 2)."""

    starts: np.ndarray
    velocities: np.ndarray
    decoys: np.ndarray

    def __post_init__(self) -> None:
        n, count, _ = self.starts.shape
        if self.velocities.shape != (n, count, 2) or self.decoys.shape != (n, 2):
            raise ValueError(
                f"starts {self.starts.shape}, velocities {self.velocities.shape}, decoys "
                f"{self.decoys.shape}; expected (n, O, 2), (n, O, 2), (n, 2)"
            )

    def paths(self, frames: int, shape: tuple[int, int]) -> np.ndarray:
        """Every object's cell in every frame, wrapped around: (n, O, frames, 2)."""
        t = np.arange(frames)[None, None, :, None]  # (1, 1, frames, 1)
        return (self.starts[:, :, None] + t * self.velocities[:, :, None]) % np.array(shape)


@dataclass(frozen=True)
class OcclusionTask:
    """Settings of the task: the ladder's rung (frames hidden) and the number of distractors."""

    difficulty: str = "hidden-1"
    distractors: int = 1

    def __post_init__(self) -> None:
        if self.difficulty not in LADDER:
            raise ValueError(f"difficulty={self.difficulty!r}; expected one of {', '.join(LADDER)}")
        if isinstance(self.distractors, bool) or not isinstance(self.distractors, int):
            raise ValueError(f"distractors={self.distractors!r}; expected an integer >= 0")
        if self.distractors < 0:
            raise ValueError(f"distractors={self.distractors}; expected an integer >= 0")

    @property
    def hidden(self) -> int:
        return LADDER[self.difficulty]

    def unsupported(self, grid: Grid) -> str | None:
        """Why the task cannot be drawn on ``grid``, or None."""
        T, H, W = grid.shape
        if T - self.hidden < MIN_VISIBLE:
            return (
                f"{self.difficulty} hides {self.hidden} frames and needs {MIN_VISIBLE} visible: at "
                f"least {self.hidden + MIN_VISIBLE} frames; got {grid}"
            )
        if min(H, W) < MIN_SIDE:
            return f"frames must be at least {MIN_SIDE}x{MIN_SIDE}; got {grid}"
        if (T - 1) % H == 0 and (T - 1) % W == 0:
            return f"on {grid} every object is back at its start in the last frame; change T"
        return None

    def draw_objects(self, rng: np.random.Generator, n: int, grid: Grid) -> Objects:
        """Starts, velocities and decoys of ``n`` clips on ``grid``, drawn before their labels; a
        draw whose decoy falls on the target's final cell is drawn again (module docstring)."""
        objects = self._draw(rng, n, grid)
        for _ in range(DRAWS):
            bad = np.flatnonzero((objects.decoys == self._final(objects, grid)).all(axis=1))
            if not len(bad):
                return objects
            again = self._draw(rng, len(bad), grid)
            for name in ("starts", "velocities", "decoys"):
                getattr(objects, name)[bad] = getattr(again, name)
        raise ValueError(f"no decoy off the target's final cell on {grid} after {DRAWS} draws")

    def _draw(self, rng: np.random.Generator, n: int, grid: Grid) -> Objects:
        """One draw of ``n`` clips' objects and decoys (a decoy may still be the target's cell)."""
        T, H, W = grid.shape
        count = 1 + self.distractors
        starts = rng.integers(0, (H, W), size=(n, count, 2))  # (n, O, 2)
        index = rng.integers(0, len(VELOCITIES), size=(n, count))  # (n, O)
        # (n,): uniform over the 23 velocities other than the target's
        other = (index[:, 0] + rng.integers(1, len(VELOCITIES), size=n)) % len(VELOCITIES)
        decoys = (starts[:, 0] + (T - 1) * VELOCITIES[other]) % (H, W)  # (n, 2)
        objects = Objects(starts, VELOCITIES[index], decoys)
        if self.distractors:
            chosen = rng.integers(1, count, size=n)  # (n,): one distractor
            finals = objects.paths(T, (H, W))[np.arange(n), chosen, -1]  # (n, 2)
            use = rng.random(n) < 0.5  # (n,): a fair coin between the two kinds of decoy
            objects.decoys[use] = finals[use]
        return objects

    @staticmethod
    def _final(objects: Objects, grid: Grid) -> np.ndarray:
        """The target's cell in the last frame: (n, 2)."""
        T, H, W = grid.shape
        return objects.paths(T, (H, W))[:, 0, -1]

    def generate(self, rng: np.random.Generator, n: int, grid: Grid) -> Split:
        T, H, W = grid.shape
        labels = rng.permutation(n) % 2  # (n,): exactly balanced (odd n: one more negative)
        objects = self.draw_objects(rng, n, grid)
        paths = objects.paths(T, (H, W))  # (n, O, T, 2)
        clips = np.zeros((n, T, H, W), dtype=np.float32)  # (n, T, H, W)
        sample, frame = np.ogrid[:n, : T - self.hidden]  # (n, 1), (1, visible)
        for o in reversed(range(paths.shape[1])):  # distractors first, the target on top
            cells = paths[:, o, : T - self.hidden]  # (n, visible, 2)
            clips[sample, frame, cells[..., 0], cells[..., 1]] = TARGET if o == 0 else DISTRACTOR
        marker = np.where(labels[:, None] == 1, paths[:, 0, -1], objects.decoys)  # (n, 2)
        clips[np.arange(n), T - 1, marker[:, 0], marker[:, 1]] = MARKER
        return Split(
            inputs=torch.from_numpy(clips[:, None]),  # (n, 1, T, H, W)
            targets=torch.from_numpy(labels.astype(np.int64)),
        )


def make_track(
    task: OcclusionTask = OcclusionTask(), backbone: BackboneConfig = VideoModels.backbone
) -> Track:
    """The ``occlusion`` track at one rung; its settings (``--set``, ``gridmix sweep --over``) are
    ``difficulty`` (the rung), ``distractors`` and the models' ``embed_dim`` and ``depth``."""

    def make_data(grid: Grid, seed: int, sizes: DataSizes) -> TrackData:
        return generated_data(
            lambda rng, n: task.generate(rng, n, grid), seed=seed, sizes=sizes, task="occlusion"
        )

    def rebuild(*, difficulty: str, distractors: int, embed_dim: int, depth: int) -> Track:
        return make_track(
            OcclusionTask(difficulty, distractors),
            dataclasses.replace(backbone, embed_dim=embed_dim, depth=depth),
        )

    models = VideoModels(backbone=backbone, mixer=MixerConfig())
    return Track(
        name="occlusion",
        description=f"is the object, hidden for the last {task.hidden} frames, in the marked cell "
        f"in the last frame? (distractors: {task.distractors}); ladder: {' < '.join(LADDER)}",
        ndim=3,
        default_grid=Grid((8, 8, 8)),
        make_data=make_data,
        loss=cross_entropy,
        metric=accuracy,
        metric_name="test accuracy",
        direction="higher",
        models=models.specs(),
        backbone=models.backbone_spec(),
        matched_baseline="dense-attention",
        default_models=DEFAULT_MODELS,
        chance=0.5,  # balanced labels
        ceiling=1.0,  # two visible frames and the marker determine the label
        supports=task.unsupported,
        fixed_grid=None,
        settings=dict(
            difficulty=task.difficulty,
            distractors=task.distractors,
            embed_dim=backbone.embed_dim,
            depth=backbone.depth,
        ),
        rebuild=rebuild,
        ladder=tuple(LADDER),
        draw_examples=functools.partial(draw_occlusion, task),
    )


@hookimpl
def gridmix_tracks() -> list[Track]:
    """The synthetic ``occlusion`` track."""
    return [make_track()]
