"""The real-data acceptance check on an image folder: does the matched baseline of the
``image-folder`` track's default study reach the majority-class accuracy plus half the gap to a
logistic-regression probe on the same split?

    python benchmarks/check_real_data.py --make-folder DIR          # optional: a generated glyph
                                                                    # folder (below)
    gridmix run --track image-folder --data DIR --grid 8x8 --no-scaling --out OUT
    python benchmarks/check_real_data.py --data DIR --grid 8x8 --report OUT/bench_report.json
        --json result.json

``--data`` may be any ImageFolder (e.g. a digits set kept outside the repo). ``--make-folder``
writes :func:`write_glyph_folder`'s: four classes of glyphs (T, L, X, O strokes on a 4x4 pattern,
drawn 3 pixels per cell) at a random shift of up to 4 pixels in a 16x16 PNG, in a random colour on a
random grey, with pixel noise: a linear probe on the pixels separates them (nearly) perfectly, so
the bar for the matched baseline is high. The probe is multinomial logistic regression (L-BFGS, L2
1e-4) on the standardised pixels of the track's own seed-0 split; majority is the training split's
most common class, scored on the test split. JSON out.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from gridmix_tracks.image_folder import image_folder_track
from PIL import Image

from gridmix.core.grid import Grid
from gridmix.report.types import Report
from gridmix.tracks import TrackData

GLYPHS = {  # 4x4 stroke patterns, one per class
    "T": ["####", ".##.", ".##.", ".##."],
    "L": ["#...", "#...", "#...", "####"],
    "X": ["#..#", ".##.", ".##.", "#..#"],
    "O": ["####", "#..#", "#..#", "####"],
}


def write_glyph_folder(
    root: str | Path, *, per_class: int = 150, size: int = 16, noise: float = 0.25, seed: int = 0
) -> Path:
    """An ImageFolder of ``per_class`` PNGs per glyph class (see the module docstring); returns
    ``root``."""
    root, rng = Path(root), np.random.default_rng(seed)
    cell = 3
    for label, pattern in GLYPHS.items():
        mask = np.kron(
            np.array([[c == "#" for c in row] for row in pattern], dtype=float),
            np.ones((cell, cell)),
        )
        (root / label).mkdir(parents=True, exist_ok=True)
        for index in range(per_class):
            dy, dx = rng.integers(0, size - mask.shape[0] + 1, size=2)
            glyph = np.zeros((size, size))
            glyph[dy : dy + mask.shape[0], dx : dx + mask.shape[1]] = mask
            colour, grey = rng.uniform(0.4, 1.0, size=3), rng.uniform(0.0, 0.3)
            image = (
                grey
                + glyph[..., None] * (colour - grey)
                + rng.normal(0, noise, size=(size, size, 3))
            )
            pixels = (np.clip(image, 0, 1) * 255).round().astype(np.uint8)
            Image.fromarray(pixels, "RGB").save(root / label / f"{index:04d}.png")
    return root


def logistic_probe(data: TrackData, *, l2: float = 1e-4) -> float:
    """Test accuracy of multinomial logistic regression fitted on the training split."""
    x, y = data.train.inputs.flatten(1), data.train.targets  # (S, F), (S,)
    k = int(max(y.max(), data.test.targets.max())) + 1
    linear = torch.nn.Linear(x.shape[1], k)
    optimizer = torch.optim.LBFGS(linear.parameters(), max_iter=500, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(linear(x), y) + l2 * linear.weight.square().sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        return (
            (linear(data.test.inputs.flatten(1)).argmax(-1) == data.test.targets)
            .float()
            .mean()
            .item()
        )


def acceptance(data: TrackData, accuracies: dict[str, float], matched: str) -> dict:
    """Majority, probe, the target (majority + half the gap to the probe) and whether ``matched``
    reaches it."""
    majority = (
        (data.test.targets == torch.bincount(data.train.targets).argmax()).float().mean().item()
    )
    probe = logistic_probe(data)
    target = majority + (probe - majority) / 2
    return {
        "majority": majority,
        "logistic_probe": probe,
        "target": target,
        "matched_baseline": matched,
        "matched_accuracy": accuracies[matched],
        "passes": accuracies[matched] >= target,
        "models": accuracies,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--make-folder", default=None, help="write the generated glyph folder here and stop"
    )
    parser.add_argument("--data", help="the image folder the study ran on")
    parser.add_argument("--grid", default="32x32")
    parser.add_argument("--report", help="the study's bench_report.json")
    parser.add_argument("--json", default=None, help="write the result here as JSON")
    args = parser.parse_args()
    if args.make_folder:
        print(write_glyph_folder(args.make_folder))
        return
    if not args.data or not args.report:
        parser.error("--data and --report are required (or --make-folder)")
    torch.manual_seed(0)
    track = image_folder_track(args.data)
    data = track.make_data(Grid.parse(args.grid), 0, track.budget("default").sizes)
    report = Report.from_dict(json.loads(Path(args.report).read_text()))
    result = acceptance(
        data, {name: arm.mean for name, arm in report.arms.items()}, report.primary_baseline
    )
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text)


if __name__ == "__main__":
    main()
