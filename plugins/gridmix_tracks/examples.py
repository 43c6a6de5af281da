"""Pictures of generated samples of the graded tracks (``recall``, ``pathfinder``, ``copy``,
``occlusion``).

``draw_recall``, ``draw_pathfinder``, ``draw_copy`` and ``draw_occlusion`` are the tracks'
:attr:`gridmix.tracks.Track.draw_examples` (bound to the track's task, the rung it was built with):
:data:`SAMPLES` samples on the study's grid, labels alternating 1, 0, … where the task has labels,
saved as the PNG a study's report shows (``examples.png``). The panels they are made of
(``recall_panel``, ``pathfinder_panel``, ``copy_column``, ``occlusion_row``) also draw the docs
pictures of every rung (``benchmarks/graded_examples.py``, ``benchmarks/copy_examples.py``,
``benchmarks/occlusion_examples.py``): one drawing code for both.

Every study picture is drawn from the fixed seed :data:`SEED`, so the same track and grid draw the
same picture. matplotlib is imported inside the functions (its ``Figure`` alone, no pyplot state),
so that loading the plugins stays light.

Shape legend:
    T, H, W: an occlusion clip's frames and frame size; a recall or copy sample is drawn as a 2-d
    array (every axis but the last, flattened, by the last)
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gridmix.core.grid import Grid

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from gridmix_tracks.copy_track import CopyTask
    from gridmix_tracks.occlusion import OcclusionTask
    from gridmix_tracks.pathfinder import PathfinderTask
    from gridmix_tracks.recall import GridRecallTask

SEED = 0
SAMPLES = 4
RECALL_COLOURS = ("white", "#9ecae1", "#fdae6b", "#a1d99b")  # filler, key, value, query
CELL = 0.42  # inches: a recall cell large enough for its label at 7 points
PANEL = 6.0  # inches: the longest side of a recall panel of a study's picture
SMALLEST = 4.0  # points: the smallest recall cell label drawn
DPI = 80


def recall_panel(
    ax: Axes, task: GridRecallTask, grid: Grid, rng: np.random.Generator, fontsize: float = 7.0
) -> None:
    """One generated ``recall`` sample on ``ax``, in rows of :func:`recall_width` cells: every cell
    coloured by its kind (filler, key, value, query) and labelled ``k3`` (key 3), ``v7`` (value 7)
    or ``q3`` (a query for key 3) in ``fontsize`` points (no labels below :data:`SMALLEST`, too
    small to read)."""
    from matplotlib.colors import ListedColormap

    V, width = task.vocab, recall_width(grid)
    tokens = task.generate(rng, 1, grid).inputs[0].numpy().ravel()  # (N,)
    tokens = np.pad(tokens, (0, -len(tokens) % width)).reshape(-1, width)  # (rows, width)
    kind = np.select([tokens == 0, tokens <= V, tokens <= 2 * V], [0, 1, 2], 3)  # (rows, width)
    ax.imshow(kind, cmap=ListedColormap(RECALL_COLOURS), vmin=0, vmax=3)
    for (r, c), t in np.ndenumerate(tokens):
        if t and fontsize >= SMALLEST:
            label = f"k{t}" if t <= V else f"v{t - V}" if t <= 2 * V else f"q{t - 2 * V}"
            ax.text(c, r, label, ha="center", va="center", fontsize=fontsize)
    drawn = "" if grid.ndim == 2 else f" in rows of {width}"
    kinds = "k key (blue), v value (orange), q query (green)"
    ax.set_title(f"recall {task.difficulty} ({grid}{drawn})\n{kinds}", fontsize=9)
    _bare(ax)


def recall_width(grid: Grid) -> int:
    """How many cells a drawn row of a ``recall`` sample holds: the grid's last axis (the axis a key
    and its value share; the other axes flattened into the rows); a 1-d grid is wrapped into rows of
    an even length near its square root, so no key is parted from its value."""
    if grid.ndim > 1:
        return grid[-1]
    return 2 * max(1, math.ceil(math.sqrt(grid.numel) / 2))


def pathfinder_panel(
    ax: Axes, task: PathfinderTask, grid: Grid, rng: np.random.Generator, label: int
) -> None:
    """One generated ``pathfinder`` image on ``ax``: on a ``joined`` rung of ``label`` (1: the discs
    are joined); on a ``trace`` rung the marked disc ringed red and the disc joined to it (the
    answer) ringed blue."""
    drawing = task.draw(rng, grid, label)
    ax.imshow(np.abs(drawing.image), cmap="gray_r", vmin=0, vmax=1)
    if task.traces:
        for centre, colour in zip(drawing.discs[:2], ("red", "tab:blue")):
            ax.scatter(*centre[::-1], s=160, facecolors="none", edgecolors=colour, linewidths=1.5)
        ax.set_title(f"pathfinder {task.difficulty} ({grid})", fontsize=9)
    else:
        ax.set_title(f"pathfinder {task.difficulty} ({grid}), label {label}", fontsize=9)
    _bare(ax)


def copy_column(axes, task: CopyTask, grid: Grid, rng: np.random.Generator) -> None:
    """One generated ``copy`` sample on two ``axes``: its input (the values, the blank target block
    white) and its answer (the target block holding the source's values; the other cells pale), the
    source's cells ringed black and the target's green; a grid that is not 2-d is drawn in rows of
    its last axis."""
    from gridmix_tracks.common import IGNORE

    copies = task.draw(rng, 1, grid)
    width = grid[-1] if grid.ndim > 1 else grid.numel
    values = copies.inputs[0, 0].reshape(-1, width)  # (rows, width)
    targets = copies.targets[0].reshape(-1, width)  # (rows, width)
    k = (copies.inputs.shape[1] - 1) // 2  # cells of a block
    source = copies.inputs[0, 1 : 1 + k].sum(axis=0).reshape(-1, width) > 0  # (rows, width)
    asked = targets != IGNORE
    answer = np.where(asked, 2.0 * targets - 1, np.where(source, values, values * 0.25))
    drawn = "" if grid.ndim == 2 else f" in rows of {width}"
    for ax, shown, what in ((axes[0], values, "input"), (axes[1], answer, "answer")):
        ax.imshow(shown, cmap="bwr", vmin=-1, vmax=1)
        for cells, colour in ((source, "black"), (asked, "green")):
            rows, columns = np.nonzero(cells)
            ax.scatter(columns, rows, s=90, marker="s", facecolors="none", edgecolors=colour)
        ax.set_title(f"copy {task.difficulty} ({grid}{drawn}): {what}", fontsize=9)
        _bare(ax)


COPY_LEGEND = (
    "values: red +1, blue -1, white 0 (the blank target); ringed black: the source block, green: "
    "the target block\nanswer: the target holds the source's values, cell by cell (the other "
    "cells pale)"
)


def draw_copy(task: CopyTask, grid: Grid, path: str | Path) -> None:
    """:data:`SAMPLES` generated ``copy`` samples of ``task`` on ``grid``, each its input above its
    answer, into the PNG ``path``."""
    grid = Grid.parse(grid)
    fig, axes = figure(2, SAMPLES, (3.3, 3.6))
    rng = np.random.default_rng(SEED)
    for column in range(SAMPLES):
        copy_column(axes[:, column], task, grid, rng)
    fig.suptitle(COPY_LEGEND, fontsize=10)
    save(fig, path)


def occlusion_row(axes, task: OcclusionTask, grid: Grid, rng: np.random.Generator) -> None:
    """One generated ``occlusion`` clip along ``axes`` (T of them, one a frame): the target black,
    distractors grey, hidden frames shaded, and a blue ring at the answer, the hidden target's
    cell in the last frame."""
    T = grid.shape[0]
    split = task.generate(rng, 1, grid)
    clip = split.inputs[0, 0].numpy()  # (T, H, W)
    (answer,) = np.argwhere(split.targets[0, -1].numpy() == 1)
    for t, ax in enumerate(axes):
        hidden = t >= T - task.hidden
        ax.imshow(clip[t], cmap="gray_r", vmin=0, vmax=1)
        if hidden:
            ax.imshow(np.ones(clip[t].shape), cmap="Greys", vmin=0, vmax=8, alpha=0.6)
        if t == T - 1:
            ax.plot(answer[1], answer[0], "o", mfc="none", mec="tab:blue", markersize=14, mew=2)
        ax.set_title(f"t={t}" + (" hidden" if hidden else ""), fontsize=8)
        _bare(ax)
    axes[0].set_ylabel(task.difficulty, fontsize=10)


def draw_recall(task: GridRecallTask, grid: Grid, path: str | Path) -> None:
    """:data:`SAMPLES` generated ``recall`` samples of ``task`` on ``grid``, side by side, into the
    PNG ``path``; a panel's cells are :data:`CELL` inches wide, smaller where the panel would pass
    :data:`PANEL` inches."""
    grid = Grid.parse(grid)
    width = recall_width(grid)
    rows = math.ceil(grid.numel / width)
    cell = min(CELL, PANEL / max(rows, width))
    fig, axes = figure(1, SAMPLES, (max(2.6, cell * width), cell * rows + 0.6))
    rng = np.random.default_rng(SEED)
    for ax in axes[0]:
        recall_panel(ax, task, grid, rng, fontsize=7.0 * cell / CELL)
    save(fig, path)


def draw_pathfinder(task: PathfinderTask, grid: Grid, path: str | Path) -> None:
    """:data:`SAMPLES` generated ``pathfinder`` images of ``task`` on ``grid`` (labels 1, 0, 1, 0 on
    a ``joined`` rung) into the PNG ``path``."""
    grid = Grid.parse(grid)
    fig, axes = figure(1, SAMPLES, (3.3, 3.6))
    rng = np.random.default_rng(SEED)
    for index, ax in enumerate(axes[0]):
        pathfinder_panel(ax, task, grid, rng, 1 - index % 2)
    fig.suptitle(
        "red ring: the marked disc; blue ring: the disc joined to it (the answer)"
        if task.traces
        else "label 1: the two discs sit on the ends of one contour",
        fontsize=10,
    )
    save(fig, path)


def draw_occlusion(task: OcclusionTask, grid: Grid, path: str | Path) -> None:
    """:data:`SAMPLES` generated ``occlusion`` clips of ``task`` on ``grid``, one a row (a panel a
    frame), into the PNG ``path``."""
    grid = Grid.parse(grid)
    fig, axes = figure(SAMPLES, grid[0], (1.6, 1.9))
    rng = np.random.default_rng(SEED)
    for row in axes:
        occlusion_row(row, task, grid, rng)
    fig.suptitle(occlusion_title(str(grid), task.distractors), fontsize=10)
    save(fig, path)


def occlusion_title(where: str, distractors: int) -> str:
    """What an occlusion picture's marks mean; ``where``: its grid (``3x8x8``)."""
    return (
        f"occlusion ({where}, {distractors} distractor{'s' * (distractors != 1)}): target black, "
        "distractor grey; blue ring: the answer, where the hidden target is in the last frame"
    )


def figure(rows: int, columns: int, panel: tuple[float, float]) -> tuple[Figure, np.ndarray]:
    """A figure of ``rows`` x ``columns`` panels, each ``panel`` inches (width, height), and its
    axes (rows, columns)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(panel[0] * columns, panel[1] * rows))
    return fig, fig.subplots(rows, columns, squeeze=False)


def _bare(ax: Axes) -> None:
    ax.set_xticks([])
    ax.set_yticks([])


def save(fig: Figure, path: str | Path, dpi: int = DPI) -> None:
    """``fig``, laid out tight, into the PNG ``path``."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi, format="png", bbox_inches="tight")
