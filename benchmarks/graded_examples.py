"""Render generated examples of the recall and pathfinder rungs to docs/images/graded_tracks.png.

Run from the repository root: ``python benchmarks/graded_examples.py``."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from gridmix_tracks.pathfinder import PathfinderTask
from gridmix_tracks.recall import LADDER as RC
from gridmix_tracks.recall import GridRecallTask

from gridmix.core.grid import Grid

fig, axes = plt.subplots(2, 5, figsize=(16, 7))
rng = np.random.default_rng(7)
for ax, rung in zip(axes[0], RC):
    split = GridRecallTask(rung).generate(rng, 1, Grid((8, 8)))
    tokens, targets = split.inputs[0].numpy(), split.targets[0].numpy()
    kind = np.select([tokens == 0, tokens <= 32, tokens <= 64], [0, 1, 2], 3)
    ax.imshow(
        kind,
        cmap=matplotlib.colors.ListedColormap(["white", "#9ecae1", "#fdae6b", "#a1d99b"]),
        vmin=0,
        vmax=3,
    )
    for (r, c), t in np.ndenumerate(tokens):
        if t:
            label = f"k{t}" if t <= 32 else f"v{t - 32}" if t <= 64 else f"q{t - 64}"
            ax.text(c, r, label, ha="center", va="center", fontsize=7)
    ax.set_title(f"recall {rung} (8x8)\nk key, v value, q query", fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
for ax, (rung, label) in zip(
    axes[1], [("len-6", 1), ("len-6", 0), ("len-9", 1), ("len-9", 0), ("len-14", 0)]
):
    d = PathfinderTask(rung).draw(rng, Grid((32, 32)), label)
    ax.imshow(d.image, cmap="gray_r", vmin=0, vmax=1)
    ax.set_title(f"pathfinder {rung} (32x32), label {label}", fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
fig.tight_layout()
fig.savefig("docs/images/graded_tracks.png", dpi=80)
