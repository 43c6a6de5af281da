"""Render generated examples of the recall and pathfinder rungs to docs/images/graded_tracks.png:
every recall rung on 8x8 (top row), pathfinder rungs on their default grids, the ``joined`` ones
with both labels (bottom row), drawn
by the panels the tracks' own examples pictures use (``gridmix_tracks.examples``).

Run from the repository root: ``python benchmarks/graded_examples.py``."""

import numpy as np
from gridmix_tracks.examples import figure, pathfinder_panel, recall_panel, save
from gridmix_tracks.pathfinder import PathfinderTask
from gridmix_tracks.recall import LADDER as RC
from gridmix_tracks.recall import GridRecallTask

from gridmix.core.grid import Grid

PATHFINDER = [
    ("trace-4", 1),
    ("trace-6", 1),
    ("len-6", 1),
    ("len-6", 0),
    ("len-9", 1),
    ("len-14", 0),
]  # (rung, label) a panel

columns = max(len(RC), len(PATHFINDER))
fig, axes = figure(2, columns, (3.25, 3.5))
rng = np.random.default_rng(7)
for ax, rung in zip(axes[0], RC):
    recall_panel(ax, GridRecallTask(rung), Grid((8, 8)), rng)
for ax, (rung, label) in zip(axes[1], PATHFINDER):
    task = PathfinderTask(rung)
    pathfinder_panel(ax, task, Grid((task.rung.side,) * 2), rng, label)
for ax in [*axes[0][len(RC) :], *axes[1][len(PATHFINDER) :]]:
    ax.set_axis_off()
save(fig, "docs/images/graded_tracks.png", dpi=80)
