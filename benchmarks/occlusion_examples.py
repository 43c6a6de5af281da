"""Render a generated clip of every occlusion rung to docs/images/occlusion_examples.png: one row
a rung, one panel a frame (target black, distractor grey, marker a red cross, hidden frames
shaded), and in the last frame a ring where the target is.

Run from the repository root: ``python benchmarks/occlusion_examples.py``."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from gridmix_tracks.occlusion import LADDER, MARKER, OcclusionTask

from gridmix.core.grid import Grid

GRID = Grid((8, 8, 8))
T, H, W = GRID.shape
rng = np.random.default_rng(3)
fig, axes = plt.subplots(len(LADDER), T, figsize=(1.6 * T, 1.9 * len(LADDER)))
for index, (row, (rung, hidden)) in enumerate(zip(axes, LADDER.items())):
    label = (index + 1) % 2  # labels 1, 0, 1, 0 down the rungs
    split = OcclusionTask(rung, distractors=1).generate(rng, 2, GRID)  # one clip of each label
    clip = split.inputs[int(split.targets.argmax()) if label else int(split.targets.argmin()), 0]
    clip = clip.numpy()  # (T, H, W)
    (target,) = np.argwhere(clip[0] == 1.0)
    (after,) = np.argwhere(clip[1] == 1.0)
    final = (target + (T - 1) * (after - target)) % (H, W)
    for t, ax in enumerate(row):
        frame = np.where(clip[t] == MARKER, 0.0, clip[t])
        ax.imshow(frame, cmap="gray_r", vmin=0, vmax=1)
        if t >= T - hidden:
            ax.set_facecolor("#dddddd")
            ax.imshow(np.ones((H, W)), cmap="Greys", vmin=0, vmax=8, alpha=0.6)
        if t == T - 1:
            (marker,) = np.argwhere(clip[t] == MARKER)
            ax.plot(marker[1], marker[0], "rx", markersize=11, mew=2.5)
            ax.plot(final[1], final[0], "o", mfc="none", mec="tab:blue", markersize=14, mew=2)
        ax.set_title(f"t={t}" + (" hidden" if t >= T - hidden else ""), fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    row[0].set_ylabel(f"{rung}\nlabel {label}", fontsize=10)
fig.suptitle(
    "occlusion (8x8x8, 1 distractor): target black, distractor grey, marker red x; "
    "blue ring: where the hidden target is in the last frame",
    fontsize=10,
)
fig.tight_layout()
fig.savefig("docs/images/occlusion_examples.png", dpi=70)
