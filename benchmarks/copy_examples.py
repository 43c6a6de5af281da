"""Render a generated example of every rung of the copy track on its default grid, the input and its
answer, to docs/images/copy_track.png, with the panels a copy study's report uses.

Run from the repository root: ``python benchmarks/copy_examples.py``."""

import numpy as np
from gridmix_tracks.copy_track import LADDER, CopyTask, make_track
from gridmix_tracks.examples import COPY_LEGEND, copy_column, figure, save

fig, axes = figure(2, len(LADDER), (3.25, 3.75))
rng = np.random.default_rng(7)
for column, rung in enumerate(LADDER):
    copy_column(axes[:, column], CopyTask(rung), make_track(CopyTask(rung)).default_grid, rng)
fig.suptitle(COPY_LEGEND, fontsize=10)
save(fig, "docs/images/copy_track.png", dpi=80)
