"""Does ``--compile`` pay on each built-in track? One run of the idea and of the matched baseline at
the track's default budget, eager and compiled, timed as a study times a run.

    python benchmarks/compile_speed.py [--tracks T,…] [--budget B] [--json PATH]

For every built-in track with generated data, on its default grid: the idea and the matched baseline
trained by :func:`gridmix.study.train.train_run` (the function behind every run of ``gridmix run``)
on seed 0 at the budget's middle learning rate, once eager and once with ``compile=True`` (the
``--compile`` path: the model compiled with inductor and warmed up before its first step), one
torch thread. Per run: the wall-clock, the compile warm-up's seconds, the rest (training, the
recompiles the warm-up did not meet, evaluation) and the test metric, so a reader sees whether the
compiled run is faster and whether its number moved. Prints a markdown row per (track, model) and
writes them as JSON with ``--json``. A track that reads files it was not given is skipped, and said.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from bench_common import markdown_table, print_rows, tracks_with_generated_data

from gridmix.core.allocator import keep_freed_memory
from gridmix.study.train import train_run


def timed_runs(track, spec, budget) -> dict:
    """The eager and the compiled run of ``spec`` on ``track``'s default grid: their wall-clock,
    compile seconds and test metric."""
    grid = track.default_grid
    data = track.make_data(grid, 0, budget.sizes)
    lr = budget.lrs[len(budget.lrs) // 2]
    row = dict(track=track.name, model=spec.name, grid=str(grid), lr=lr, budget=budget.name)
    for mode in ("eager", "compiled"):
        result = train_run(
            track,
            spec,
            grid,
            lr=lr,
            seed=0,
            budget=budget,
            data=data,
            device=torch.device("cpu"),
            compile=mode == "compiled",
        )
        record = result.extras.get("compile", {})
        row[mode] = dict(
            status=result.status,
            error=result.error,
            wall_s=result.wall_s,
            compile_s=record.get("seconds", 0.0),
            fallback=record.get("fallback", ""),
            test=result.test_metric,
        )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tracks", default="", help="comma-separated tracks (default: all)")
    parser.add_argument("--budget", default="default", help="the budget a run spends")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    keep_freed_memory("reuse")  # as a study's run process does
    tracks, skipped = tracks_with_generated_data(args.tracks)
    rows = []
    for track in tracks:
        budget = track.budget(args.budget)
        for spec in (track.idea, track.model(track.matched_baseline)):
            rows.append(timed_runs(track, spec, budget))
            print(json.dumps(rows[-1]), flush=True)
    print_rows(
        markdown_table(
            ["track", "model", "grid", "eager s", "compiled s (compile)", "ratio", "test eager"]
            + ["test compiled"],
            [
                [r["track"], r["model"], r["grid"], f"{r['eager']['wall_s']:.1f}"]
                + [f"{r['compiled']['wall_s']:.1f} ({r['compiled']['compile_s']:.1f})"]
                + [f"{r['compiled']['wall_s'] / r['eager']['wall_s']:.2f}"]
                + [
                    f"{r[mode]['test']:.4g}" if r[mode]["test"] is not None else r[mode]["status"]
                    for mode in ("eager", "compiled")
                ]
                for r in rows
            ],
        ),
        rows,
        skipped,
        args.json,
    )


if __name__ == "__main__":
    main()
