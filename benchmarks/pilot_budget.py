"""Pilot a cheaper budget: train a track's models at budget changes, on every rate and seed, and
tabulate the results.

    python benchmarks/pilot_budget.py --track image --grid 32x32 --models vit-concentration,vit \
        --budget '{"n_train": 512, "epochs": 3, "batch_size": 4}' --lrs 1e-3,3e-3,1e-2 \
        --seeds 1000,0,1,2,3,4,5 \
        --out runs/pilot.jsonl

Each run is a :class:`gridmix.study.spec.RunTask` executed as ``gridmix run`` executes it
(:class:`gridmix.study.executors.WorkerPoolExecutor`, ``--jobs`` workers at one torch thread each),
from the track's ``default`` budget with the changes in ``--budget`` (a JSON object of
:class:`gridmix.tracks.budget.Budget` fields), and with the track's settings ``--set`` (``depth=1``;
recorded beside the budget changes). Seeds 1000 and up are sweep seeds: their row shows the
validation metric the sweep would choose on; the others show the test metric the paired comparison
uses. Runs start in the order of ``--models`` (put the slowest first); every finished run's ledger
row is appended to ``--out`` as one JSON line, with the budget changes it ran under, so an
interrupted pilot keeps what it finished. At the end it prints one row per budget change, model and
rate with the per-seed values, how many comparison seeds sit at the track's chance (by the
calibration's rule, ``calibrate_budgets.at_chance``), and the median run time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from calibrate_budgets import at_chance

if TYPE_CHECKING:
    from gridmix.study.ledger import RunRow
    from gridmix.tracks import Track

SWEEP_SEEDS_FROM = 1000


def table(rows: list[dict], track: Track) -> list[str]:
    """One line per (budget changes, model, rate): per-seed values, comparison seeds at chance,
    median run seconds."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        groups[(json.dumps(row["budget_changes"], sort_keys=True), row["model"], row["lr"])].append(
            row
        )
    lines = []
    for (budget, model, lr), group in sorted(groups.items()):
        group.sort(key=lambda row: row["seed"])
        values = [
            (
                row["seed"],
                row["val_metric"] if row["seed"] >= SWEEP_SEEDS_FROM else row["test_metric"],
            )
            for row in group
        ]
        shown = " ".join(
            f"{seed}:{value:.4f}" if value is not None else f"{seed}:failed"
            for seed, value in values
        )
        stuck = sum(
            1
            for seed, value in values
            if seed < SWEEP_SEEDS_FROM
            and value is not None
            and at_chance(
                value, chance=track.chance, ceiling=track.ceiling, direction=track.direction
            )
        )
        median_s = statistics.median(row["wall_s"] for row in group)
        lines.append(
            f"{budget} {model} lr {lr:g}: {shown} | at chance {stuck} | median {median_s:.1f} s"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--track", required=True)
    parser.add_argument("--grid", default="", help="e.g. 32x32 (default: the track's)")
    parser.add_argument("--models", required=True, help="comma-separated model names")
    parser.add_argument(
        "--budget",
        action="append",
        required=True,
        type=json.loads,
        help="a JSON object of Budget fields to change, e.g. '{\"n_train\": 512}' (repeatable)",
    )
    parser.add_argument("--lrs", required=True, help="comma-separated learning rates")
    parser.add_argument(
        "--seeds", required=True, help=f"comma-separated seeds ({SWEEP_SEEDS_FROM}+: sweep seeds)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SETTING=VALUE",
        help="a track setting for every run (as gridmix run --set), e.g. depth=1 (repeatable)",
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True, help="JSON lines, appended to")
    args = parser.parse_args()

    from gridmix.core.grid import Grid
    from gridmix.orchestrate.plan import choose_settings
    from gridmix.study.executors import WorkerPoolExecutor
    from gridmix.study.spec import RunTask
    from gridmix.tracks.plugin_loader import load_registry

    try:
        track = load_registry().track(args.track)
        grid = str(Grid.parse(args.grid) if args.grid else track.default_grid)
        models = [track.model(name).name for name in args.models.split(",")]
        budgets = [
            dataclasses.replace(track.budget("default"), **changes) for changes in args.budget
        ]
        lrs, seeds = (
            [float(lr) for lr in args.lrs.split(",")],
            [int(seed) for seed in args.seeds.split(",")],
        )
        pairs = [text.split("=", 1) for text in args.set]
        if any(len(pair) != 2 for pair in pairs):
            raise ValueError(f"--set {args.set}; expected SETTING=VALUE")
        settings = choose_settings(track, dict(pairs))
    except (TypeError, ValueError) as error:
        parser.error(str(error))
    planned = [
        (
            RunTask(
                track=args.track,
                model=model,
                grid=grid,
                lr=lr,
                seed=seed,
                budget=budget,
                device="cpu",
                threads=1,
                sweep=seed >= SWEEP_SEEDS_FROM,
                settings=settings,
            ),
            dict(changes, **{f"set {name}": value for name, value in settings.items()}),
        )
        for budget, changes in zip(budgets, args.budget)
        for model in models
        for lr in lrs
        for seed in seeds
    ]
    changes_of = {
        id(task): changes for task, changes in planned
    }  # the executor hands back these task objects
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    with args.out.open("a") as out:

        def record(task: RunTask, row: RunRow) -> None:
            rows.append(dict(dataclasses.asdict(row), budget_changes=changes_of[id(task)]))
            out.write(json.dumps(rows[-1]) + "\n")
            out.flush()

        executor = WorkerPoolExecutor(args.jobs)
        try:
            executor.run([task for task, _ in planned], on_done=record)
        finally:
            executor.close()
    print("\n".join(table(rows, track)))


if __name__ == "__main__":
    main()
