"""Render a generated clip of every occlusion rung to docs/images/occlusion_examples.png: one row
a rung on its default grid, one panel a frame (target black, distractor grey, hidden frames
shaded), and in the last frame a ring at the answer, where the hidden target is; drawn by the rows
the track's own examples picture uses (``gridmix_tracks.examples``).

Run from the repository root: ``python benchmarks/occlusion_examples.py``."""

import numpy as np
from gridmix_tracks.examples import figure, occlusion_row, occlusion_title, save
from gridmix_tracks.occlusion import LADDER, OcclusionTask

tasks = [OcclusionTask(rung, distractors=1) for rung in LADDER]
longest = tasks[-1].default_grid()
rng = np.random.default_rng(3)
fig, axes = figure(len(LADDER), longest[0], (1.6, 1.9))
for row, task in zip(axes, tasks):
    grid = task.default_grid()
    occlusion_row(row[: grid[0]], task, grid, rng)
    for ax in row[grid[0] :]:
        ax.set_axis_off()
fig.suptitle(occlusion_title("each rung on its default grid", 1), fontsize=10)
save(fig, "docs/images/occlusion_examples.png", dpi=70)
