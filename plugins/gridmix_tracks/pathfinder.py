"""The built-in ``pathfinder`` track: which discs does one dashed contour join?

A 2-d task written from the description of the Pathfinder generator (Linsley et al. 2018, "Learning
long-range spatial dependencies with horizontal gated recurrent units"; Long Range Arena's
``lra_benchmarks/data/pathfinder.py`` reads its images): contours made of short straight dashes
("paddles") with a gap between them and a bounded turn from one dash to the next, distractor
contours, and end-point discs. Drawn here on the grid itself, one pixel per token (no
anti-aliasing: ink 1, background 0, one channel).

Geometry, scaled with the grid's shorter side ``s`` (so the task is the same on every grid; at
``32x32``): a dash is ``round(2s/32)`` pixels long (2), the gap ``round(s/32)`` (1), the discs'
radius ``round(s/32)`` (1: a 3x3 blot), all at least 1 (on ``16x16`` a dash is one pixel: dotted
contours); a contour is drawn by a unit-step walk whose heading turns by at most 60° between dashes
(uniform; each dash tries up to 8 turns and keeps the first that fits). Every contour (with the
discs at both of its ends for the two marked contours) keeps a Chebyshev distance of at least
``gap + 2`` from every other one, so two pixels ``gap + 1`` or less apart belong to the same
contour and no contour touches another: which discs are joined is decided by the image alone.

Every image holds two contours ``A`` and ``B`` of the rung's length and the rung's distractors
(shorter contours). The rung asks one of two questions:

- ``joined`` (the published task, a label per image): label 1 puts two discs on both ends of ``A``,
  label 0 on one end of ``A`` and one end of ``B`` (each end a fair coin). The two classes have the
  same contours, ink and free ends in distribution: only whether the discs are joined differs.
  Labels are exactly balanced in every split (a random half is positive; an odd split has one more
  negative). The distance between the discs differs between the classes (as in the published
  generator); a model that mixes may use it as a partial cue.
- ``trace`` (the answer at a cell): a marked disc (pixels :data:`START`) on one end of ``A``, a
  disc on its other end and one on an end of ``B``; which of the two unmarked discs is joined to
  the marked one? Which of the two drawn contours is ``A`` is a fair coin, and a second coin
  decides whether the joined disc is the nearer of the two to the marked one (images are drawn
  until they agree strictly), so the distance says nothing. The image is a torus (contours, discs
  and distances wrap around the edges; a contour may leave one edge and come back on the other), so
  every disc is anywhere alike and its place says nothing either: drawn inside the image, the coin
  pushed the joined disc toward the edges and a model without token mixing scored 0.536 on 6 seeds.
  The target is 1 at the joined disc's centre, 0 at the other's, ``IGNORE`` elsewhere; the loss is
  a softmax over those two cells' logits (one logit per token).

Chance and ceiling, derived: 1/2 for both questions (balanced labels; or two discs alike in place
on the torus, under a fair distance coin), the track's ``chance``; the answer is a function of the
image (the connectivity of the discs), so the ceiling is 1. No label noise. On a ``joined`` rung the
references (majority class, logistic probe, 1-NN on the pixels) and the no-mixing control are
expected at chance (a logit that is a sum of per-pixel terms sees the same per-pixel distribution
under both labels); on a ``trace`` rung the control's logit at a disc sees that disc's pixels and
place only, alike for both discs (the references apply to labels per image only).

The difficulty ladder (the ``difficulty`` setting, rungs in order):

============  ========  ================  ===========================  ============
rung          question  contour (dashes)  distractors (dashes each)    default grid
============  ========  ================  ===========================  ============
``trace-4``   trace     4                 1 (3)                        ``16x16``
``trace-6``   trace     6                 1 (3)                        ``16x16``
``len-6``     joined    6                 2 (3)                        ``32x32``
``len-9``     joined    9                 3 (3)                        ``32x32``
``len-14``    joined    14                4 (4)                        ``32x32``
============  ========  ================  ===========================  ============

``len-14`` on ``32x32`` is Path-32's contour length (slow to draw there: about 0.05 s an image on a
2-core CPU beside a running study, against 0.003 s for ``len-6`` and ``len-9``); ``--grid 128x128
--set difficulty=len-14`` draws the same task at Path-X's size (dashes 8 pixels, gaps 4) for larger
machines. A side below the rung's ``min_side`` is refused (14 for ``trace-4``, 16 otherwise). On
``16x16`` (``len-6`` only) the 1-NN reference read 0.613 on one seed's 256 test images (3.6 standard
errors above chance): the ``joined`` rungs use 32x32 or more. An image that cannot be fitted after
many tries (a rung too long for its grid) raises an error naming the rung and the grid.

Models: the ``image`` track's (timm ``VisionTransformer``, patch 1, no norm after the pooling; on a
``trace`` rung no pooling: one logit per token): ``vit`` (dense attention, the matched baseline),
``vit-concentration`` (the idea), ``vit-concentration-uncapped`` (ablation), ``vit-tokenwise``
(control), ``mlp-mixer`` (small grids, not in the default run). Budgets: the global ones; the
calibration is in docs/tracks.md.

Shape legend:
    S: samples, H, W: the grid; inputs (S, 1, H, W) float32 in {0, 1} (and START on a trace rung);
    targets: joined (S,) int64 in {0, 1}; trace (S, H, W) int64 in {0, 1, IGNORE}
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from scipy.ndimage import binary_dilation

from gridmix import hookimpl
from gridmix.core.grid import Grid
from gridmix.models import BackboneConfig, MixerConfig
from gridmix.tracks import DataSizes, Split, Track, TrackData
from gridmix_tracks.common import (
    IGNORE,
    accuracy,
    cell_choice_accuracy,
    cell_choice_cross_entropy,
    cross_entropy,
    generated_data,
)
from gridmix_tracks.examples import draw_pathfinder
from gridmix_tracks.image import ImageModels

MAX_TURN = math.pi / 3  # the most a contour's heading turns from one dash to the next
TRIES = 50  # attempts at one contour before the image is started again
TURNS = 8  # random turns a dash tries before the contour is started again
RESTARTS = 50  # images started again before the rung is declared too long for the grid
BALANCE_TRIES = 1000  # trace images drawn that the distance coin may reject
START = -1.0  # the value of the marked disc's pixels on a trace rung (ink is 1)


class Rung(NamedTuple):
    """One rung: what is asked, the contours' length in dashes, the distractors (how many, their
    length in dashes), the side of the rung's default square grid and the shortest side on which
    its images are drawn."""

    question: str  # "trace": which disc is joined to the marked one; "joined": are the discs joined
    segments: int
    distractors: int
    distractor_segments: int
    side: int
    min_side: int


LADDER = {  # in order
    "trace-4": Rung("trace", 4, 1, 3, side=16, min_side=14),
    "trace-6": Rung("trace", 6, 1, 3, side=16, min_side=16),
    "len-6": Rung("joined", 6, 2, 3, side=32, min_side=16),
    "len-9": Rung("joined", 9, 3, 3, side=32, min_side=16),
    "len-14": Rung("joined", 14, 4, 4, side=32, min_side=16),
}
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
    """One generated image with what made it: the disc centres (row, column) and the label.

    ``joined`` rungs: the two discs, label 1 when they sit on the ends of one contour. ``trace``
    rungs: the marked disc, the disc joined to it and the other one; label 1."""

    image: np.ndarray  # (H, W) float32: ink 1, background 0, the marked disc START
    discs: tuple[tuple[int, int], ...]
    label: int

    def joined_nearer(self) -> bool | None:
        """On a trace rung: whether the joined disc is nearer to the marked one than the other
        (Euclidean between centres, on the torus); None when both are as near (such images are
        not drawn)."""
        marked, joined, other = self.discs
        shape = self.image.shape
        to_joined = _torus_distance(shape, joined, marked)
        to_other = _torus_distance(shape, other, marked)
        return None if to_joined == to_other else to_joined < to_other


@dataclass(frozen=True)
class PathfinderTask:
    """Settings of the task: the ladder's rung (what is asked, contour length and distractors)."""

    difficulty: str = "trace-4"

    def __post_init__(self) -> None:
        if self.difficulty not in LADDER:
            raise ValueError(f"difficulty={self.difficulty!r}; expected one of {', '.join(LADDER)}")

    @property
    def rung(self) -> Rung:
        return LADDER[self.difficulty]

    @property
    def segments(self) -> int:
        return self.rung.segments

    @property
    def distractors(self) -> tuple[int, int]:
        """How many distractors, and their length in dashes."""
        return self.rung.distractors, self.rung.distractor_segments

    def unsupported(self, grid: Grid) -> str | None:
        """Why the rung's contours, gaps and discs have no room on ``grid``, or None."""
        if min(grid) < self.rung.min_side:
            return f"{self.difficulty} needs every side at least {self.rung.min_side}; got {grid}"
        return None

    @property
    def traces(self) -> bool:
        """Whether the rung asks which disc is joined to the marked one (the answer at a cell)."""
        return self.rung.question == "trace"

    def draw(self, rng: np.random.Generator, grid: Grid, label: int = 1) -> Drawing:
        """One image: on a ``joined`` rung of ``label`` (1: the discs on both ends of one
        contour); on a ``trace`` rung (``label`` unused) a marked disc and two others, one joined
        to it, the joined one the nearer of the two to the marked disc on a fair coin."""
        nearer = bool(rng.integers(2)) if self.traces else None
        misfits = rejected = 0
        while misfits < RESTARTS and rejected < BALANCE_TRIES:
            drawing = self._try_draw(rng, grid, label, Geometry.of(grid))
            if drawing is None:
                misfits += 1
            elif nearer is None or drawing.joined_nearer() is nearer:
                return drawing
            else:
                rejected += 1
        if misfits == RESTARTS:
            raise ValueError(
                f"{self.difficulty} ({self.segments} dashes, {self.distractors[0]} distractors) "
                f"does not fit on {grid} after {RESTARTS} attempts; use a larger grid or a lower "
                "rung"
            )
        raise ValueError(
            f"{self.difficulty} on {grid}: the disc joined to the marked one was "
            f"{'farther' if nearer else 'nearer'} than the other in all {BALANCE_TRIES} images "
            "drawn; use a larger grid or a longer rung"
        )

    def _try_draw(
        self, rng: np.random.Generator, grid: Grid, label: int, geometry: Geometry
    ) -> Drawing | None:
        wrap = self.traces  # a trace rung is drawn on the torus
        taken = np.zeros(grid.shape, dtype=bool)  # (H, W): every contour's footprint so far
        contours = []
        count, length = self.distractors
        for index, dashes in enumerate((self.segments, self.segments, *[length] * count)):
            pixels = _contour(rng, grid, geometry, dashes, taken, marked=index < 2, wrap=wrap)
            if pixels is None:
                return None
            contours.append(pixels)
            taken |= _footprint(grid, geometry, pixels, marked=index < 2, wrap=wrap)
        a, b = contours[0], contours[1]
        if self.traces and rng.integers(2):  # which contour is joined to the marked disc: a coin
            a, b = b, a
        end = rng.integers(2)  # which end of A carries the first disc
        first = (a[0], a[-1])[end]
        joined = (a[-1], a[0])[end]
        if self.traces:
            discs = (first, joined, (b[0], b[-1])[rng.integers(2)])
        else:
            discs = (first, joined if label == 1 else (b[0], b[-1])[rng.integers(2)])
        image = np.zeros(grid.shape, dtype=np.float32)  # (H, W)
        for pixels in contours:
            image[pixels[:, 0], pixels[:, 1]] = 1.0
        for index, centre in enumerate(discs):
            marked = self.traces and index == 0
            image[_disc(grid, geometry, centre, wrap=wrap)] = START if marked else 1.0
        return Drawing(image, tuple(tuple(map(int, centre)) for centre in discs), label)

    def generate(self, rng: np.random.Generator, n: int, grid: Grid) -> Split:
        if self.traces:
            return self._generate_traces(rng, n, grid)
        labels = rng.permutation(n) % 2  # (n,): exactly balanced (odd n: one more negative)
        images = np.stack([self.draw(rng, grid, int(label)).image for label in labels])
        return Split(
            inputs=torch.from_numpy(images[:, None]),  # (n, 1, H, W)
            targets=torch.from_numpy(labels.astype(np.int64)),
        )

    def _generate_traces(self, rng: np.random.Generator, n: int, grid: Grid) -> Split:
        """Images with a target at the two unmarked discs' centres: 1 at the one joined to the
        marked disc, 0 at the other, IGNORE elsewhere."""
        drawings = [self.draw(rng, grid) for _ in range(n)]
        targets = np.full((n, *grid.shape), IGNORE, dtype=np.int64)  # (n, H, W)
        for sample, drawing in enumerate(drawings):
            _, joined, other = drawing.discs
            targets[(sample, *joined)], targets[(sample, *other)] = 1, 0
        return Split(
            inputs=torch.from_numpy(np.stack([d.image for d in drawings])[:, None]),  # (n,1,H,W)
            targets=torch.from_numpy(targets),  # (n, H, W)
        )


def _contour(
    rng: np.random.Generator,
    grid: Grid,
    geometry: Geometry,
    dashes: int,
    taken: np.ndarray,
    *,
    marked: bool,
    wrap: bool,
) -> np.ndarray | None:
    """The ink pixels (P, 2) of one contour, in order from one end to the other, clear of ``taken``
    by more than the link distance (with the discs at its ends when ``marked``); None after TRIES
    attempts. Drawn dash by dash: each dash tries TURNS random turns and keeps the first that
    fits. ``wrap``: on the torus (a start anywhere, any first heading, pixels modulo the grid);
    else inside the image, first heading within 90° of the way to its centre."""
    H, W = grid.shape
    forbidden = _dilate(taken, geometry.link, wrap=wrap)  # (H, W)
    near = forbidden.tolist()  # the same as rows of bools, read pixel by pixel
    margin = geometry.radius if marked and not wrap else 0  # the discs must fit in the image
    low, high = np.array([margin, margin]), np.array([H - margin, W - margin])
    stride = geometry.dash + geometry.gap  # unit steps from a dash's start to the next one's
    for _ in range(TRIES):
        position = rng.uniform(low, high if wrap else high - 1)
        if wrap:
            heading = rng.uniform(-math.pi, math.pi)
        else:
            to_centre = np.array([(H - 1) / 2, (W - 1) / 2]) - position
            heading = math.atan2(*to_centre) + rng.uniform(-math.pi / 2, math.pi / 2)
        row, col = position.tolist()
        drawn: list[tuple[int, int]] = []
        for index in range(dashes):
            for turn in rng.uniform(-MAX_TURN, MAX_TURN, TURNS).tolist() if index else [0.0]:
                d_row, d_col = math.sin(heading + turn), math.cos(heading + turn)
                dash = _dash(row, col, d_row, d_col, geometry.dash, (H, W) if wrap else None)
                if all(
                    margin <= r < H - margin and margin <= c < W - margin and not near[r][c]
                    for r, c in dash
                ):
                    break
            else:
                break
            heading += turn
            row, col = row + (stride - 1) * d_row + d_row, col + (stride - 1) * d_col + d_col
            drawn.extend(dash)
        if len(drawn) < dashes * geometry.dash:
            continue
        pixels = np.array(drawn, dtype=np.int64)  # (P, 2)
        if not (
            marked
            and _footprint(grid, geometry, pixels, marked=True, wrap=wrap)[
                np.array(forbidden)
            ].any()
        ):
            return pixels
    return None


def _dash(
    row: float, col: float, d_row: float, d_col: float, length: int, wrap: tuple[int, int] | None
) -> list[tuple[int, int]]:
    """The ``length`` pixels of a dash from (``row``, ``col``) in unit steps (``d_row``,
    ``d_col``), rounded half to even (modulo the grid ``wrap`` when given)."""
    pixels = [(round(row + k * d_row), round(col + k * d_col)) for k in range(length)]
    return [(r % wrap[0], c % wrap[1]) for r, c in pixels] if wrap else pixels


def _mask(grid: Grid, pixels: np.ndarray) -> np.ndarray:
    """A (H, W) mask of ``pixels`` (P, 2)."""
    mask = np.zeros(grid.shape, dtype=bool)
    mask[pixels[:, 0], pixels[:, 1]] = True
    return mask


def _dilate(mask: np.ndarray, reach: int, *, wrap: bool) -> np.ndarray:
    """``mask`` (H, W) grown by ``reach`` pixels (Chebyshev), across the edges when ``wrap``."""
    square = np.ones((2 * reach + 1,) * 2, dtype=bool)
    if not wrap:
        return binary_dilation(mask, square)
    padded = np.pad(mask, reach, mode="wrap")  # (H + 2 reach, W + 2 reach)
    return binary_dilation(padded, square)[reach:-reach, reach:-reach]


def _torus_distance(shape: tuple[int, int], a, b) -> float:
    """The Euclidean distance between the cells ``a`` and ``b``, the shorter way round each axis."""
    offset = np.abs(np.subtract(a, b))  # (2,)
    return float(np.hypot(*np.minimum(offset, np.subtract(shape, offset))))


def _disc(grid: Grid, geometry: Geometry, centre, *, wrap: bool) -> np.ndarray:
    """A (H, W) mask of the disc of the geometry's radius around ``centre`` (across the edges when
    ``wrap``)."""
    (H, W), (row, col) = grid.shape, centre
    mask = np.zeros((H, W), dtype=bool)
    for d_row, d_col in _disc_offsets(geometry.radius):
        r, c = row + d_row, col + d_col
        if wrap:
            mask[r % H, c % W] = True
        elif 0 <= r < H and 0 <= c < W:
            mask[r, c] = True
    return mask


@functools.cache
def _disc_offsets(radius: int) -> tuple[tuple[int, int], ...]:
    """The (row, column) offsets of a disc's cells from its centre: squared distance at most
    ``radius² + radius``."""
    span = range(-radius, radius + 1)
    return tuple((r, c) for r in span for c in span if r * r + c * c <= radius * radius + radius)


def _footprint(
    grid: Grid, geometry: Geometry, pixels: np.ndarray, *, marked: bool, wrap: bool
) -> np.ndarray:
    """A (H, W) mask of a contour's ink, with the discs at both of its ends when ``marked``."""
    mask = _mask(grid, pixels)
    if marked:
        for end in (pixels[0], pixels[-1]):
            mask |= _disc(grid, geometry, end, wrap=wrap)
    return mask


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

    traces = task.traces
    models = ImageModels(
        in_chans=1,
        num_classes=1 if traces else 2,
        fc_norm=False,
        global_pool="" if traces else "avg",
        mixer=MixerConfig(),
        backbone=backbone,
    )
    count, length = task.distractors
    question = (
        "which of two discs is joined to the marked one by a dashed contour?"
        if traces
        else "are the two discs joined by one dashed contour?"
    )
    return Track(
        name="pathfinder",
        description=f"{question} ({task.segments} dashes, {count} distractors of {length}); "
        f"ladder: {' < '.join(LADDER)}",
        ndim=2,
        default_grid=Grid((task.rung.side, task.rung.side)),
        make_data=make_data,
        loss=cell_choice_cross_entropy if traces else cross_entropy,
        metric=cell_choice_accuracy if traces else accuracy,
        metric_name="joined-disc accuracy" if traces else "test accuracy",
        direction="higher",
        models=models.specs(),
        backbone=models.backbone_spec(),
        matched_baseline="vit",
        default_models=DEFAULT_MODELS,
        # trace: the two discs' roles are exchangeable (a coin); joined: balanced labels
        chance=0.5,
        ceiling=1.0,  # which disc is joined (and whether), a function of the image, is the answer
        supports=task.unsupported,
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
