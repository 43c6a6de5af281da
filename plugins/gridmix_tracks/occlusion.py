"""The built-in ``occlusion`` track: where is the hidden object in the last frame?

A 3-d clip task (time × height × width, one pixel per token, one channel) that needs time and space
together: a pointer over the last frame's cells. A target object (one pixel, value 1) moves at a
constant velocity, drawn uniformly from the 24 velocities whose components lie in -2..2 (not both 0;
on the lowest rung, ``shift-1``, every object moves by (1, 2)), from a uniform random start;
``distractors`` other objects (value 0.5) move the same way, each with its own start and velocity.
Motion wraps around the frame's edges (a torus, as the ``video`` track's square): no wall, no
bounce. Every object is visible in the first ``T - k`` frames and hidden (removed: the frames are
blank) in the last ``k``, the ladder's rung. The answer is the target's cell in the last frame (its
start plus ``T - 1`` velocities, modulo the frame): the model gives one logit per cell, and the loss
is the cross-entropy of a softmax over the last frame's ``H·W`` cells against the answer cell
(``cell_choice_cross_entropy``); the metric is the fraction of clips whose highest-logit last-frame
cell is the answer. Where objects overlap, the target is drawn on top.

Why wrap: the target's final cell is then exactly uniform over the frame (a uniform start shifted by
any velocity), and two consecutive visible frames give the velocity modulo the frame for any speed.
With a bounce, two frames do not tell a still axis from one that met a wall, nor a speed of 1 from
a speed of 2 turned back by it; with neither, a path of ``T`` frames barely fits an 8x8 frame. The
wrap makes the motion a circular shift of the frame, the operation a circular convolution (the
global filter's FFT) carries exactly; docs/tracks.md weighs what that means for the comparison.

Chance and ceiling, derived: every last-frame token is blank (value 0), so a model without token
mixing gives each last-frame cell a logit that depends on its position alone and picks one fixed
cell (or a fixed spread); the answer is uniform over the ``H·W`` cells, so its expected accuracy is
exactly ``1/(H·W)`` (the track's ``chance``, a function of the grid: 1/49 on 7x7 frames). The input
determines the answer: the target is the only pixel of value 1 in every visible frame, two visible
frames (every rung keeps at least two) give its velocity modulo the frame, and its final cell is
its first cell plus ``T - 1`` velocities (tests/test_occlusion_track.py extrapolates exactly so);
so the ceiling is 1. No label noise. The references (majority class, logistic probe, 1-NN) fit only
whole-sample targets; this track's is a cell, so none runs (``kind: none`` in the report) and the
no-mixing control is the check that the task needs mixing (at chance in the tests).

The difficulty ladder (the ``difficulty`` setting, rungs in order; ``k`` the hidden frames):

============  ====  ==================================================
rung          k     default grid (three visible frames, ``T = k + 3``)
============  ====  ==================================================
``shift-1``   1     ``4x5x5``, every object moving by (1, 2)
``hidden-1``  1     ``4x7x7``
``hidden-2``  2     ``5x7x7``
``hidden-4``  4     ``7x7x7``
``hidden-6``  6     ``9x11x11``
============  ====  ==================================================

``shift-1`` (the default) asks for one fixed shift of the last sight, (1, 2), not its own inverse
on any frame the track accepts: a pointer whose offset attention can learn from positions alone,
on a 5x5 frame in 16 epochs, the rung's default budget (on 7x7 frames, or in 8 epochs, it stayed
at chance on some seeds; docs/tracks.md). The other rungs draw the velocity too, so the answer
depends on two frames' relation. The more frames are hidden, the farther (in time, and with speed
in space) the answer lies from the target's last sight: ``k`` velocities beyond it. Their frame is
7x7 because 7 is prime: no
shift of the frame but the identity is its own inverse, and ``k`` steps of two different velocities
never end on the same cell, so no rung's answer lies a symmetric shift away from the last sight. On
an 8x8 frame ``4v`` is 0 or 4 (half the frame) along each axis, so ``hidden-4``'s answer was the
last sight's cell or one half a frame away, a shortcut a mixer with symmetric bases reads
(docs/tracks.md, "Calibration"). ``hidden-6`` cannot use 7x7 frames: after 8 steps every object is
where it was after 1 (8 ≡ 1 modulo 7), so on ``9x7x7`` the answer is the target's cell in the
second frame, a visible one, and a mixer of the time axis alone copies it; its frames are 11x11.
The second knob is ``distractors`` (default 1, 0 or
more: ``gridmix sweep --over distractors=0,1,2``): more objects to tell apart from the target. Any
``T x H x W`` works whose ``T`` leaves two visible frames and whose frames are at least 4x4, but
one on which every object is in the last frame where it was in a visible frame ``j`` (``T - 1 - j``
a multiple of both ``H`` and ``W``: the answer would be that frame's cell); others are refused in
one line.

Models: the ``video`` track's network (GridTransformer, patch 1, learned positions; dim 32, depth 2,
2 heads) with a per-token head of one logit: ``dense-attention`` (joint space-time attention, the
matched baseline), ``divided-attention`` (not in the default run), ``concentration`` (the idea, at
its default start, ``MixerConfig()``), ``concentration-uncapped`` (ablation), ``tokenwise``
(control), and every registered mixer through the backbone. Budgets: the global ones, but
``shift-1`` trains for 16 epochs at the default budget (:data:`SHIFT_RUNG`). The calibration at the
default budget is docs/tracks.md's (8 seeds): on ``shift-1`` dense attention reads 0.913 (0.617 to
1.000), the concentration mixer 0.997, the global filter 1.000, the no-mixing control chance; from
``hidden-1`` on, the global filter finds the hidden target (1.000 on ``hidden-1`` and ``hidden-2``,
0.984 on ``hidden-4``, 0.996 on ``hidden-6``), dense attention and the concentration mixer stay at
chance.

Shape legend:
    S: samples, T, H, W: the grid, O: objects (target first, then distractors);
    inputs (S, 1, T, H, W) float32 in {0, 0.5, 1}, targets (S, T, H, W) int64: ``IGNORE`` off the
    last frame, 1 at the answer cell, 0 at the other last-frame cells
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from gridmix import hookimpl
from gridmix.core.grid import Grid
from gridmix.models import BackboneConfig, MixerConfig
from gridmix.tracks import DataSizes, Split, Track, TrackData
from gridmix_tracks.common import (
    IGNORE,
    cell_choice_accuracy,
    cell_choice_cross_entropy,
    generated_data,
)
from gridmix_tracks.examples import draw_occlusion
from gridmix_tracks.video import DEFAULT_MODELS, VideoModels

# every (dy, dx) with components in -2..2, not both 0
VELOCITIES = np.array([(dy, dx) for dy in range(-2, 3) for dx in range(-2, 3) if dy or dx])


class Rung(NamedTuple):
    """A rung of the ladder: frames hidden at the end, the velocities each object's is drawn from
    (V, 2), the frame sides its default grid tries in order (the first with no shortcut), and the
    rung's changes to the global budgets (``Track.budget_overrides``)."""

    hidden: int
    velocities: np.ndarray
    sides: tuple[int, ...]
    budget_overrides: dict


# the lowest rung: one velocity for every object, a shift that is not its own inverse, on a 5x5
# frame in 16 epochs: on 7x7 frames, or in 8 epochs, dense attention stayed at chance on some seeds
# (docs/tracks.md, "Pilots for shift-1")
SHIFT_RUNG = Rung(1, np.array([(1, 2)]), (5,), {"default": {"epochs": 16}})
LADDER = {
    "shift-1": SHIFT_RUNG,
    **{f"hidden-{k}": Rung(k, VELOCITIES, (7, 11, 13), {}) for k in (1, 2, 4, 6)},
}
TARGET, DISTRACTOR = 1.0, 0.5  # pixel values; the background is 0
MIN_VISIBLE, MIN_SIDE = 2, 4
VISIBLE = 3  # the default grids' visible frames (docstring)


@dataclass(frozen=True)
class Objects:
    """The objects of ``n`` clips: starts and velocities (n, O, 2) as (row, column)."""

    starts: np.ndarray
    velocities: np.ndarray

    def __post_init__(self) -> None:
        if self.velocities.shape != self.starts.shape or self.starts.ndim != 3:
            raise ValueError(
                f"starts {self.starts.shape}, velocities {self.velocities.shape}; expected both "
                "(n, O, 2)"
            )

    def paths(self, frames: int, shape: tuple[int, int]) -> np.ndarray:
        """Every object's cell in every frame, wrapped around: (n, O, frames, 2)."""
        t = np.arange(frames)[None, None, :, None]  # (1, 1, frames, 1)
        return (self.starts[:, :, None] + t * self.velocities[:, :, None]) % np.array(shape)


@dataclass(frozen=True)
class OcclusionTask:
    """Settings of the task: the ladder's rung (frames hidden) and the number of distractors."""

    difficulty: str = "shift-1"
    distractors: int = 1

    def __post_init__(self) -> None:
        if self.difficulty not in LADDER:
            raise ValueError(f"difficulty={self.difficulty!r}; expected one of {', '.join(LADDER)}")
        if isinstance(self.distractors, bool) or not isinstance(self.distractors, int):
            raise ValueError(f"distractors={self.distractors!r}; expected an integer >= 0")
        if self.distractors < 0:
            raise ValueError(f"distractors={self.distractors}; expected an integer >= 0")

    @property
    def rung(self) -> Rung:
        return LADDER[self.difficulty]

    @property
    def hidden(self) -> int:
        return self.rung.hidden

    @property
    def hiding(self) -> str:
        """Which frames hide the objects, in words."""
        return "in the last frame" if self.hidden == 1 else f"for the last {self.hidden} frames"

    @property
    def motion(self) -> str:
        """How the rung's objects move, in words."""
        velocities = self.rung.velocities  # (V, 2)
        if len(velocities) == 1:
            return f"every object moves by {tuple(map(int, velocities[0]))} a frame"
        return f"{len(velocities)} velocities"

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
        for frame in range(T - self.hidden):  # the visible frames
            if (T - 1 - frame) % H == 0 and (T - 1 - frame) % W == 0:
                return (
                    f"on {grid} every object is in the last frame where it was in frame "
                    f"{frame + 1} (the answer would be a visible frame's cell); change T or "
                    "the frame"
                )
        return None

    def default_grid(self) -> Grid:
        """:data:`VISIBLE` frames before the hidden ones, square frames of the first of the rung's
        sides on which the answer is no visible frame's cell: ``4x5x5`` for ``shift-1``, ``4x7x7``
        for ``hidden-1``, ``9x11x11`` for ``hidden-6`` (on 7x7 frames its answer is the second
        frame's cell)."""
        frames, sides = self.hidden + VISIBLE, self.rung.sides
        side = next(s for s in sides if self.unsupported(Grid((frames, s, s))) is None)
        return Grid((frames, side, side))

    def draw_objects(self, rng: np.random.Generator, n: int, grid: Grid) -> Objects:
        """Starts and velocities of the objects of ``n`` clips on ``grid``."""
        _, H, W = grid.shape
        count = 1 + self.distractors
        starts = rng.integers(0, (H, W), size=(n, count, 2))  # (n, O, 2)
        velocities = self.rung.velocities  # (V, 2)
        index = rng.integers(0, len(velocities), size=(n, count))  # (n, O)
        return Objects(starts, velocities[index])

    def generate(self, rng: np.random.Generator, n: int, grid: Grid) -> Split:
        T, H, W = grid.shape
        paths = self.draw_objects(rng, n, grid).paths(T, (H, W))  # (n, O, T, 2)
        clips = np.zeros((n, T, H, W), dtype=np.float32)  # (n, T, H, W)
        sample, frame = np.ogrid[:n, : T - self.hidden]  # (n, 1), (1, visible)
        for o in reversed(range(paths.shape[1])):  # distractors first, the target on top
            cells = paths[:, o, : T - self.hidden]  # (n, visible, 2)
            clips[sample, frame, cells[..., 0], cells[..., 1]] = TARGET if o == 0 else DISTRACTOR
        targets = np.full((n, T, H, W), IGNORE, dtype=np.int64)  # (n, T, H, W)
        targets[:, -1] = 0  # the last frame's cells are asked
        final = paths[:, 0, -1]  # (n, 2): the target's cell in the last frame
        targets[np.arange(n), -1, final[:, 0], final[:, 1]] = 1
        return Split(
            inputs=torch.from_numpy(clips[:, None]),  # (n, 1, T, H, W)
            targets=torch.from_numpy(targets),  # (n, T, H, W)
        )


def frame_chance(grid: Grid) -> float:
    """A model without token mixing finds the uniform answer cell with probability 1/(H·W)."""
    _, H, W = Grid.parse(grid).shape
    return 1 / (H * W)


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

    models = VideoModels(num_classes=1, readout="tokens", backbone=backbone, mixer=MixerConfig())
    return Track(
        name="occlusion",
        description=f"which cell of the last frame holds the object hidden {task.hiding}? "
        f"({task.motion}; distractors: {task.distractors}); ladder: {' < '.join(LADDER)}",
        ndim=3,
        default_grid=task.default_grid(),
        make_data=make_data,
        loss=cell_choice_cross_entropy,
        metric=cell_choice_accuracy,
        metric_name="answer-cell accuracy",
        direction="higher",
        models=models.specs(),
        backbone=models.backbone_spec(),
        matched_baseline="dense-attention",
        default_models=DEFAULT_MODELS,
        chance=frame_chance,  # 1/(H·W): the answer is uniform over the last frame
        ceiling=1.0,  # two visible frames give the velocity, and so the answer
        supports=task.unsupported,
        budget_overrides=task.rung.budget_overrides,
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
