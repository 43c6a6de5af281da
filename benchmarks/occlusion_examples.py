"""Render a generated clip of every occlusion rung to docs/images/occlusion_examples.png: one row
a rung, one panel a frame (target black, distractor grey, marker a red cross, hidden frames
shaded), and in the last frame a ring where the target is; drawn by the rows the track's own
examples picture uses (``gridmix_tracks.examples``).

Run from the repository root: ``python benchmarks/occlusion_examples.py``."""

import numpy as np
from gridmix_tracks.examples import figure, occlusion_row, occlusion_title, save
from gridmix_tracks.occlusion import LADDER, OcclusionTask

from gridmix.core.grid import Grid

GRID = Grid((8, 8, 8))
rng = np.random.default_rng(3)
fig, axes = figure(len(LADDER), GRID[0], (1.6, 1.9))
for index, (row, rung) in enumerate(zip(axes, LADDER)):
    label = (index + 1) % 2  # labels 1, 0, 1, 0 down the rungs
    occlusion_row(row, OcclusionTask(rung, distractors=1), GRID, rng, label)
fig.suptitle(occlusion_title(GRID, 1), fontsize=10)
save(fig, "docs/images/occlusion_examples.png", dpi=70)
