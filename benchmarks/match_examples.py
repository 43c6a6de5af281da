"""Render generated examples of every rung of the match track, one of each label, to
docs/images/match_track.png.

Run from the repository root: ``python benchmarks/match_examples.py``."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from gridmix_tracks.match import LADDER, SIDE, MatchTask

from gridmix.core.grid import Grid

GRID = Grid((16, 16))

fig, axes = plt.subplots(2, len(LADDER), figsize=(13, 7))
rng = np.random.default_rng(7)
for column, rung in enumerate(LADDER):
    pairs = MatchTask(rung).draw(rng, 8, GRID)
    for row, label in enumerate((1, 0)):
        index = int(np.flatnonzero(pairs.labels == label)[0])
        values, mask = pairs.inputs[index]  # (16, 16) each
        # the values off the patterns pale, on the patterns full: -1 blue, +1 red
        shown = values * np.where(mask > 0, 1.0, 0.25)  # (16, 16)
        ax = axes[row, column]
        ax.imshow(shown, cmap="bwr", vmin=-1, vmax=1)
        for corner in pairs.corners[index]:
            ax.add_patch(
                plt.Rectangle(
                    (corner[1] - 0.5, corner[0] - 0.5), SIDE, SIDE, fill=False, lw=2, color="k"
                )
            )
        same = "the same" if label else f"{MatchTask(rung).flips} cells differ"
        ax.set_title(f"match {rung} ({GRID}), label {label}: {same}", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
fig.suptitle(
    "values: red +1, blue -1 (pale: off the patterns); the mask marks the two outlined patterns",
    fontsize=10,
)
fig.tight_layout()
fig.savefig("docs/images/match_track.png", dpi=80)
