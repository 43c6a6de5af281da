"""The real-data acceptance check on a digits-like image folder kept outside the repo: does the matched baseline
reach the majority-class accuracy plus half the gap to a logistic-regression probe on the same split?

    gridmix run --track image-folder --data DIR --grid 8x8 --out OUT
    python benchmarks/check_real_data.py --data DIR --grid 8x8 --report OUT/bench_report.json --json result.json

The probe is multinomial logistic regression (L-BFGS, L2 1e-4) on the standardised pixels of the track's own
seed-0 split; majority is the training split's most common class, scored on the test split. JSON out.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from gridmix_tracks.image_folder import image_folder_track

from gridmix.budget import resolve_budget
from gridmix.grid import Grid
from gridmix.tracks import TrackData


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
        return (linear(data.test.inputs.flatten(1)).argmax(-1) == data.test.targets).float().mean().item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="the image folder the study ran on")
    parser.add_argument("--grid", default="32x32")
    parser.add_argument("--report", required=True, help="the study's bench_report.json")
    parser.add_argument("--json", default=None, help="write the result here as JSON")
    args = parser.parse_args()
    torch.manual_seed(0)
    track = image_folder_track(args.data)
    data = track.make_data(Grid.parse(args.grid), 0, resolve_budget("default", track).sizes)
    majority = (data.test.targets == torch.bincount(data.train.targets).argmax()).float().mean().item()
    probe = logistic_probe(data)
    report = json.loads(Path(args.report).read_text())
    matched = report["baseline"]["full"]["mean"]
    target = majority + (probe - majority) / 2
    result = {"majority": majority, "logistic_probe": probe, "target": target, "matched_baseline":
              report["baseline"]["name"], "matched_accuracy": matched, "passes": matched >= target,
              "models": {n: a["full"]["mean"] for n, a in {report["idea"]["name"]: report["idea"],
                                                          **report["baselines"]}.items()}}
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text)


if __name__ == "__main__":
    main()
