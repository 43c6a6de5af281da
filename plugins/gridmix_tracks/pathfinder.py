"""The built-in ``pathfinder`` track: are the two marked end points joined by one dashed contour?

A 2-d binary image classification written from the description of the Pathfinder generator (Linsley
et al. 2018, "Learning long-range spatial dependencies with horizontal gated recurrent units"; Long
Range Arena's ``lra_benchmarks/data/pathfinder.py`` reads its images): contours made of short
straight dashes ("paddles") with a gap between them and a bounded turn from one dash to the next,
distractor contours, and two end-point discs. Drawn here on the grid itself, one pixel per token
(no anti-aliasing: ink 1, background 0, one channel).

Geometry, scaled with the grid's shorter side ``s`` (so the task is the same on every grid; at
``32x32``): a dash is ``round(2s/32)`` pixels long (2), the gap ``round(s/32)`` (1), the discs'
radius ``round(s/32)`` (1: a 3x3 blot), all at least 1; a contour is drawn by a unit-step walk
whose heading turns by at most 60° between dashes (uniform; each dash tries up to 8 turns and keeps
the first that fits). Every contour (with the discs at both of its ends for the two marked contours)
keeps a Chebyshev distance of at least ``gap + 2`` from every other one, so two pixels ``gap + 1``
or less apart belong to the same contour and no contour touches another: whether the discs are
joined is decided by the image alone.

Every image holds two contours ``A`` and ``B`` of the rung's length and the rung's distractors
(shorter contours), drawn the same way for both labels. Label 1: the discs sit on both ends of
``A``; label 0: on one end of ``A`` and one end of ``B`` (each end a fair coin). The two classes
therefore have the same contours, the same ink and the same number of free ends in distribution:
only whether the discs are joined differs. Labels are exactly balanced in every split (a random
half of each split is positive; an odd split has one more negative).

Chance and ceiling, derived: with balanced labels any guess scores 1/2 in expectation (the track's
``chance``, accuracy); the label is a function of the image (the connectivity of the discs), so the
ceiling is 1. No label noise. The references (majority class, logistic probe, 1-NN on the pixels)
and the no-mixing control are expected at chance: a logit that is a sum of per-pixel terms sees the
same per-pixel distribution under both labels. The distance between the discs differs in
distribution between the classes (as in the published generator); a model that mixes may use it as
a partial cue.

The difficulty ladder (the ``difficulty`` setting, rungs in order; the contour length in dashes and
the distractors):

============  ================  ===========================
rung          contour (dashes)  distractors (dashes each)
============  ================  ===========================
``len-6``     6                 2 (3)
``len-9``     9                 3 (3)
``len-14``    14                4 (4)
============  ================  ===========================

``len-14`` on ``32x32`` is Path-32's contour length (slow to draw there: about 0.2 s an image on a
2-core CPU, against 0.01 s for ``len-6`` and 0.02 s for ``len-9``); ``--grid 128x128 --set
difficulty=len-14`` draws the same task at Path-X's size (dashes 8 pixels, gaps 4) for larger
machines. The default grid is ``32x32``; a side below 16 is refused. On ``16x16`` (``len-6`` only)
the 1-NN reference read 0.613 on one seed's 256 test images (3.6 standard errors above chance): use
32x32 or more. An image that cannot be fitted after many tries (a rung too long for its grid) raises
an error naming the rung and the grid.

Models: the ``image`` track's (timm ``VisionTransformer``, patch 1, no norm after the pooling):
``vit`` (dense attention, the matched baseline), ``vit-concentration`` (the idea),
``vit-concentration-uncapped`` (ablation), ``vit-tokenwise`` (control), ``mlp-mixer`` (small grids,
not in the default run). Budgets: the global ones; the calibration (which rung attention solves and
which a mixer fails) is not measured yet (docs/tracks.md).

Shape legend:
    S: samples, H, W: the grid; inputs (S, 1, H, W) float32 in {0, 1}, targets (S,) int64 in {0, 1}
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.ndimage import binary_dilation

from gridmix import hookimpl
from gridmix.core.grid import Grid
from gridmix.models import BackboneConfig, MixerConfig
from gridmix.tracks import DataSizes, Split, Track, TrackData
from gridmix_tracks.common import accuracy, cross_entropy, generated_data
from gridmix_tracks.examples import draw_pathfinder
from gridmix_tracks.image import ImageModels

MIN_SIDE = 16
MAX_TURN = math.pi / 3  # the most a contour's heading turns from one dash to the next
TRIES = 50  # attempts at one contour before the image is started again
TURNS = 8  # random turns a dash tries before the contour is started again
RESTARTS = 50  # images started again before the rung is declared too long for the grid
# rung → (contour length in dashes, distractors, distractor length in dashes), in order
LADDER = {"len-6": (6, 2, 3), "len-9": (9, 3, 3), "len-14": (14, 4, 4)}
DEFAULT_MODELS = ("vit-concentration", "vit", "vit-concentration-uncapped", "vit-tokenwise")


@dataclass(frozen=True)
class Geometry:
    """Dash, gap and disc radius in pixels for a grid (scaled with its shorter side)."""

    dash: int
    gap: int
    radius: int

    @classmethod
    def of(cls, grid: Grid) -> Geometry:
        scale = min(grid) / 32
        return cls(
            dash=max(1, round(2 * scale)),
            gap=max(1, round(scale)),
            radius=max(1, round(scale)),
        )

    @property
    def link(self) -> int:
        """The largest Chebyshev distance between neighbouring ink pixels of one contour."""
        return self.gap + 1


@dataclass(frozen=True)
class Drawing:
    """One generated image with what made it: the disc centres (row, column) and the label."""

    image: np.ndarray  # (H, W) float32 in {0, 1}
    discs: tuple[tuple[int, int], tuple[int, int]]
    label: int


@dataclass(frozen=True)
class PathfinderTask:
    """Settings of the task: the ladder's rung (contour length and distractors)."""

    difficulty: str = "len-6"

    def __post_init__(self) -> None:
        if self.difficulty not in LADDER:
            raise ValueError(f"difficulty={self.difficulty!r}; expected one of {', '.join(LADDER)}")

    @property
    def segments(self) -> int:
        return LADDER[self.difficulty][0]

    @property
    def distractors(self) -> tuple[int, int]:
        """How many distractors, and their length in dashes."""
        return LADDER[self.difficulty][1:]

    def draw(self, rng: np.random.Generator, grid: Grid, label: int) -> Drawing:
        """One image of ``label`` (1: the discs on both ends of one contour)."""
        for _ in range(RESTARTS):
            drawing = self._try_draw(rng, grid, label, Geometry.of(grid))
            if drawing is not None:
                return drawing
        raise ValueError(
            f"{self.difficulty} ({self.segments} dashes, {self.distractors[0]} distractors) does "
            f"not fit on {grid} after {RESTARTS} attempts; use a larger grid or a lower rung"
        )

    def _try_draw(
        self, rng: np.random.Generator, grid: Grid, label: int, geometry: Geometry
    ) -> Drawing | None:
        taken = np.zeros(grid.shape, dtype=bool)  # (H, W): every contour's footprint so far
        contours = []
        count, length = self.distractors
        for index, dashes in enumerate((self.segments, self.segments, *[length] * count)):
            pixels = _contour(rng, grid, geometry, dashes, taken, marked=index < 2)
            if pixels is None:
                return None
            contours.append(pixels)
            taken |= _footprint(grid, geometry, pixels, marked=index < 2)
        a, b = contours[0], contours[1]
        end = rng.integers(2)  # which end of A carries the first disc
        first = (a[0], a[-1])[end]
        second = (a[-1], a[0])[end] if label == 1 else (b[0], b[-1])[rng.integers(2)]
        image = np.zeros(grid.shape, dtype=np.float32)  # (H, W)
        for pixels in contours:
            image[pixels[:, 0], pixels[:, 1]] = 1.0
        for centre in (first, second):
            image[_disc(grid, geometry, centre)] = 1.0
        return Drawing(image, (tuple(map(int, first)), tuple(map(int, second))), label)

    def generate(self, rng: np.random.Generator, n: int, grid: Grid) -> Split:
        labels = rng.permutation(n) % 2  # (n,): exactly balanced (odd n: one more negative)
        images = np.stack([self.draw(rng, grid, int(label)).image for label in labels])
        return Split(
            inputs=torch.from_numpy(images[:, None]),  # (n, 1, H, W)
            targets=torch.from_numpy(labels.astype(np.int64)),
        )


def _contour(
    rng: np.random.Generator,
    grid: Grid,
    geometry: Geometry,
    dashes: int,
    taken: np.ndarray,
    *,
    marked: bool,
) -> np.ndarray | None:
    """The ink pixels (P, 2) of one contour, in order from one end to the other, clear of ``taken``
    by more than the link distance (with the discs at its ends when ``marked``); None after TRIES
    attempts. Drawn dash by dash: each dash tries TURNS random turns and keeps the first that
    fits."""
    H, W = grid.shape
    forbidden = binary_dilation(taken, np.ones((2 * geometry.link + 1,) * 2, dtype=bool))
    margin = geometry.radius if marked else 0  # the discs must fit inside the image too
    low, high = np.array([margin, margin]), np.array([H - margin, W - margin])
    offsets = np.arange(geometry.dash + geometry.gap)  # unit steps of a dash and its gap
    for _ in range(TRIES):
        position = rng.uniform(low, high - 1)
        to_centre = np.array([(H - 1) / 2, (W - 1) / 2]) - position
        heading = math.atan2(to_centre[0], to_centre[1]) + rng.uniform(-math.pi / 2, math.pi / 2)
        drawn = []
        for index in range(dashes):
            for turn in rng.uniform(-MAX_TURN, MAX_TURN, TURNS) if index else [0.0]:
                step = np.array([math.sin(heading + turn), math.cos(heading + turn)])
                path = position + offsets[:, None] * step  # (dash + gap, 2)
                dash = np.rint(path[: geometry.dash]).astype(np.int64)  # (dash, 2)
                if (
                    (dash >= low).all()
                    and (dash < high).all()
                    and not forbidden[dash[:, 0], dash[:, 1]].any()
                ):
                    break
            else:
                break
            heading += turn
            position = path[-1] + step
            drawn.append(dash)
        pixels = np.concatenate(drawn) if len(drawn) == dashes else None
        if pixels is not None and not (
            marked and _footprint(grid, geometry, pixels, marked=True)[forbidden].any()
        ):
            return pixels
    return None


def _mask(grid: Grid, pixels: np.ndarray) -> np.ndarray:
    """A (H, W) mask of ``pixels`` (P, 2)."""
    mask = np.zeros(grid.shape, dtype=bool)
    mask[pixels[:, 0], pixels[:, 1]] = True
    return mask


def _disc(grid: Grid, geometry: Geometry, centre) -> np.ndarray:
    """A (H, W) mask of the disc of the geometry's radius around ``centre``."""
    rows, cols = np.ogrid[: grid[0], : grid[1]]
    r = geometry.radius
    return (rows - centre[0]) ** 2 + (cols - centre[1]) ** 2 <= r * r + r


def _footprint(grid: Grid, geometry: Geometry, pixels: np.ndarray, *, marked: bool) -> np.ndarray:
    """A (H, W) mask of a contour's ink, with the discs at both of its ends when ``marked``."""
    mask = _mask(grid, pixels)
    if marked:
        mask |= _disc(grid, geometry, pixels[0]) | _disc(grid, geometry, pixels[-1])
    return mask


def grid_supported(grid: Grid) -> str | None:
    """Contours of a few dashes with gaps and discs need room: every side at least MIN_SIDE."""
    if min(grid) < MIN_SIDE:
        return f"every side must be at least {MIN_SIDE} pixels; got {grid}"
    return None


def make_track(
    task: PathfinderTask = PathfinderTask(), backbone: BackboneConfig = ImageModels.backbone
) -> Track:
    """The ``pathfinder`` track at one rung; its settings (``--set``, ``gridmix sweep --over``) are
    ``difficulty`` (the rung) and the models' ``embed_dim`` and ``depth``."""

    def make_data(grid: Grid, seed: int, sizes: DataSizes) -> TrackData:
        return generated_data(
            lambda rng, n: task.generate(rng, n, grid), seed=seed, sizes=sizes, task="pathfinder"
        )

    def rebuild(*, difficulty: str, embed_dim: int, depth: int) -> Track:
        return make_track(
            PathfinderTask(difficulty),
            dataclasses.replace(backbone, embed_dim=embed_dim, depth=depth),
        )

    models = ImageModels(
        in_chans=1, num_classes=2, fc_norm=False, mixer=MixerConfig(), backbone=backbone
    )
    count, length = task.distractors
    return Track(
        name="pathfinder",
        description=f"are the two discs joined by one dashed contour? ({task.segments} dashes, "
        f"{count} distractors of {length}); ladder: {' < '.join(LADDER)}",
        ndim=2,
        default_grid=Grid((32, 32)),
        make_data=make_data,
        loss=cross_entropy,
        metric=accuracy,
        metric_name="test accuracy",
        direction="higher",
        models=models.specs(),
        backbone=models.backbone_spec(),
        matched_baseline="vit",
        default_models=DEFAULT_MODELS,
        chance=0.5,  # balanced labels
        ceiling=1.0,  # the discs' connectivity, a function of the image, is the label
        supports=grid_supported,
        fixed_grid=None,
        settings=dict(
            difficulty=task.difficulty, embed_dim=backbone.embed_dim, depth=backbone.depth
        ),
        rebuild=rebuild,
        ladder=tuple(LADDER),
        draw_examples=functools.partial(draw_pathfinder, task),
    )


@hookimpl
def gridmix_tracks() -> list[Track]:
    """The synthetic ``pathfinder`` track."""
    return [make_track()]
