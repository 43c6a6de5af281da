"""Pilot a cheaper budget: train a track's models at budget changes, on every rate and seed, and tabulate the results.

    python benchmarks/pilot_budget.py --track image --grid 32x32 --models vit-concentration,vit \
        --budget '{"n_train": 512, "epochs": 3, "batch_size": 4}' --lrs 1e-3,3e-3,1e-2 --seeds 1000,0,1,2,3,4,5 \
        --out runs/pilot.jsonl

Each run is what ``gridmix run`` trains for that model, rate and seed (:func:`gridmix.study.train.train_run` on the
track's data for the seed), from the track's ``default`` budget with the changes in ``--budget`` (a JSON object of
:class:`gridmix.tracks.budget.Budget` fields). Seeds 1000 and up are sweep seeds: their row shows the validation
metric the sweep would choose on; the others show the test metric the paired comparison uses. Runs go to ``--jobs``
worker processes at one torch thread each, in the order of ``--models`` (put the slowest first); every finished run
is appended to ``--out`` as one JSON line, so an interrupted pilot keeps what it finished. At the end it prints one
row per budget change, model and rate with the per-seed values, how many comparison seeds sit at the track's chance
(by the calibration's rule, ``calibrate_budgets.at_chance``), and the median run time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
from collections import defaultdict
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING

from calibrate_budgets import at_chance

if TYPE_CHECKING:
    from gridmix.tracks import Track

SWEEP_SEEDS_FROM = 1000


def train_one(args: tuple[str, str, dict, str, float, int]) -> dict:
    """One run in a worker: the track's default budget with ``changes``; never raises (a failure is a row)."""
    track_name, grid_text, changes, model, lr, seed = args
    import torch

    torch.set_num_threads(1)
    from gridmix.grid import Grid
    from gridmix.study.train import train_run
    from gridmix.tracks.registry import load_registry

    track = load_registry().track(track_name)
    grid = Grid.parse(grid_text) if grid_text else track.default_grid
    budget = dataclasses.replace(track.budget("default"), **changes)
    spec = next(spec for spec in track.models if spec.name == model)
    data = track.make_data(grid, seed, budget.sizes)
    result = train_run(track, spec, grid, lr=lr, seed=seed, budget=budget, data=data, device=torch.device("cpu"))
    return dict(track=track_name, grid=str(grid), budget=changes, model=model, lr=lr, seed=seed, status=result.status,
                error=result.error, val=result.val_metric, test=result.test_metric, wall_s=round(result.wall_s, 2),
                train_loss=[round(loss, 4) for loss in result.train_loss])


def table(rows: list[dict], track: Track) -> list[str]:
    """One line per (budget, model, rate): per-seed values, comparison seeds at chance, median run seconds."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        groups[(json.dumps(row["budget"], sort_keys=True), row["model"], row["lr"])].append(row)
    lines = []
    for (budget, model, lr), group in sorted(groups.items()):
        group.sort(key=lambda row: row["seed"])
        values = [(row["seed"], row["val"] if row["seed"] >= SWEEP_SEEDS_FROM else row["test"]) for row in group]
        shown = " ".join(f"{seed}:{value:.4f}" if value is not None else f"{seed}:failed" for seed, value in values)
        stuck = sum(1 for seed, value in values if seed < SWEEP_SEEDS_FROM and value is not None
                    and at_chance(value, chance=track.chance, ceiling=track.ceiling, direction=track.direction))
        median_s = statistics.median(row["wall_s"] for row in group)
        lines.append(f"{budget} {model} lr {lr:g}: {shown} | at chance {stuck} | median {median_s:.1f} s")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--track", required=True)
    parser.add_argument("--grid", default="", help="e.g. 32x32 (default: the track's)")
    parser.add_argument("--models", required=True, help="comma-separated model names")
    parser.add_argument("--budget", action="append", required=True, type=json.loads,
                        help='a JSON object of Budget fields to change, e.g. \'{"n_train": 512}\' (repeatable)')
    parser.add_argument("--lrs", required=True, help="comma-separated learning rates")
    parser.add_argument("--seeds", required=True, help=f"comma-separated seeds ({SWEEP_SEEDS_FROM}+: sweep seeds)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True, help="JSON lines, appended to")
    args = parser.parse_args()

    from gridmix.tracks.budget import Budget
    from gridmix.tracks.registry import load_registry

    try:
        track = load_registry().track(args.track)
    except ValueError as error:
        parser.error(str(error))
    models = args.models.split(",")
    unknown = sorted(set(models) - {spec.name for spec in track.models})
    if unknown:
        parser.error(f"unknown models {unknown} for track {args.track!r}; it has {[s.name for s in track.models]}")
    fields = {field.name for field in dataclasses.fields(Budget)}
    for changes in args.budget:
        if not isinstance(changes, dict) or set(changes) - fields:
            parser.error(f"--budget {json.dumps(changes)}; expected a JSON object of Budget fields: {sorted(fields)}")
    tasks = [(args.track, args.grid, changes, model, float(lr), int(seed)) for changes in args.budget
             for model in models for lr in args.lrs.split(",") for seed in args.seeds.split(",")]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    with get_context("spawn").Pool(args.jobs) as pool, args.out.open("a") as out:
        for row in pool.imap_unordered(train_one, tasks):
            rows.append(row)
            out.write(json.dumps(row) + "\n")
            out.flush()
    print("\n".join(table(rows, track)))


if __name__ == "__main__":
    main()
