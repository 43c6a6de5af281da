"""Render a generated example of every rung of the copy track on its default grid, the input and its
answer, to docs/images/copy_track.png.

Run from the repository root: ``python benchmarks/copy_examples.py``."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from gridmix_tracks.common import IGNORE
from gridmix_tracks.copy_track import LADDER, SIDE, CopyTask, make_track

fig, axes = plt.subplots(2, len(LADDER), figsize=(13, 7.5))
rng = np.random.default_rng(7)
for column, rung in enumerate(LADDER):
    grid = make_track(CopyTask(rung)).default_grid
    copies = CopyTask(rung).draw(rng, 1, grid)
    values, targets = copies.inputs[0, 0], copies.targets[0]  # (*grid) each
    asked, k = targets != IGNORE, SIDE**grid.ndim
    source = copies.inputs[0, 1 : 1 + k].sum(axis=0) > 0  # (*grid): the source's cells
    # the source and the copied values full, the other cells pale
    answer = np.where(asked, 2.0 * targets - 1, np.where(source, values, values * 0.25))
    for row, (shown, what) in enumerate(((values, "input"), (answer, "answer"))):
        ax = axes[row, column]
        ax.imshow(shown, cmap="bwr", vmin=-1, vmax=1)
        for corner, colour in zip(copies.corners[0], ("k", "g")):
            ax.add_patch(
                plt.Rectangle(
                    (corner[1] - 0.5, corner[0] - 0.5), SIDE, SIDE, fill=False, lw=2, color=colour
                )
            )
        ax.set_title(f"copy {rung} ({grid}): {what}", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
fig.suptitle(
    "values: red +1, blue -1, white 0 (the blank target); black: the source block, green: the "
    "target block (the index channels mark both)\nanswer: the target holds the source's values, "
    "cell by cell (the other cells pale)",
    fontsize=10,
)
fig.tight_layout()
fig.savefig("docs/images/copy_track.png", dpi=80)
