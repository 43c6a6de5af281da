"""Every registered mixer as the idea on one track, at one budget: the table of docs/mixers.md.

    python benchmarks/mixer_table.py --track image --out DIR [--budget default] [--mixers a b ...]
        [--jobs auto]

One ``gridmix run --idea MIXER`` per mixer that can serve the track, all into the same output
directory: the studies share the track, grid and data, so the matched baseline's and the control's
runs (the same run keys in every study) train once and are reused from the ledger, and each mixer
adds only its own runs. For every mixer the table gives the test metric's mean and standard
deviation over the comparison seeds, the paired verdict against the matched baseline (attention)
with its exact sign-flip p and MDE (the report's primary comparison), the parameters of the whole
model, and the FLOPs of one forward+backward on one training batch (``FlopCounterMode`` on fake
tensors); an idea arm at chance (or ceiling) says so beside its verdict, as the report does. A mixer
that cannot serve the track is listed with its reason. Writes ``DIR/mixer_table.json`` and
``DIR/mixer_table.md``; each study's own report stays in ``DIR/<mixer>/`` (its
``bench_report.json``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import torch
from bench_common import environment, markdown_table, write_json

from gridmix import orchestrate
from gridmix.analysis.measure import dry_run
from gridmix.core.grid import Grid
from gridmix.report.format import fmt
from gridmix.tracks.plugin_loader import load_registry


def model_cost(track, spec, grid: Grid, budget) -> tuple[int, float]:
    """Parameters of the whole model and GFLOPs of a forward+backward on one training batch (fake
    tensors)."""
    torch.manual_seed(0)
    model = spec.build(grid)
    inputs = track.make_data(grid, 0, budget.sizes).train.inputs[: budget.batch_size]
    flops, _ = dry_run(model, (inputs,), loss=lambda out: out.float().sum())
    return sum(p.numel() for p in model.parameters()), flops.total / 1e9


def _verdict(row: dict) -> str:
    """The table's verdict cell: why a mixer was skipped, its role, or its verdict with the idea
    arm's flag."""
    said = row.get("skipped") or row.get("role") or row.get("verdict") or "–"
    return f"{said} [idea {row['flag']}]" if row.get("flag") else said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--track", required=True)
    parser.add_argument(
        "--out", type=Path, required=True, help="the shared study directory and the table"
    )
    parser.add_argument("--budget", default="default")
    parser.add_argument(
        "--mixers",
        nargs="*",
        help="the mixers (default: every registered one); the matched baseline's is always in",
    )
    parser.add_argument("--jobs", default="auto")
    args = parser.parse_args()
    registry = load_registry()
    track = registry.track(args.track)
    grid, budget = track.default_grid, track.budget(args.budget)
    matched = track.model(track.matched_baseline)
    rows, started = [], time.perf_counter()
    mixers = args.mixers or list(registry.mixers.names)
    if matched.mixer and matched.mixer not in mixers:  # the row every verdict is against
        mixers = [matched.mixer, *mixers]
    for mixer in mixers:
        spec = track.model_for_mixer(mixer)
        row = dict(mixer=mixer, model=spec.name if spec else None)
        rows.append(row)
        reason = "the track builds no model around it" if spec is None else spec.supports(grid)
        if reason:
            row["skipped"] = reason
            continue
        row["params"], row["gflops_fwdbwd"] = model_cost(track, spec, grid, budget)
        if spec.name == matched.name:
            row["role"] = "matched baseline"
            continue
        began = time.perf_counter()
        report = orchestrate.run(
            args.track,
            out=args.out / "ledger",
            idea=mixer,
            budget=args.budget,
            scaling=False,
            jobs=int(args.jobs) if args.jobs.isdigit() else args.jobs,
        )
        shutil.copytree(
            args.out / "ledger",
            args.out / mixer,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("*.sqlite*", ".gridmix.lock"),
        )
        arm, comparison = report.idea_arm, report.comparison
        result = comparison.result if comparison else None
        row.update(
            mean=arm.mean,
            std=arm.std,
            n=arm.n,
            flag=arm.flag,
            seconds=time.perf_counter() - began,
            verdict=comparison.verdict if comparison else None,
            p=result.p_value if result else None,
            mde=result.mde if result else None,
            baseline_mean=report.baseline.mean if report.baseline else None,
        )
        baseline = report.baseline
        if baseline is not None:
            reference = (
                next(r for r in rows if r["mixer"] == matched.mixer) if matched.mixer else None
            )
            if reference is not None:
                reference.update(mean=baseline.mean, std=baseline.std, n=baseline.n)
        print(
            f"{mixer}: {row['verdict']} (p {fmt(row['p'])}, MDE {fmt(row['mde'])}), "
            f"{row['seconds']:.0f} s",
            flush=True,
        )
    result = dict(
        environment=environment(threads=torch.get_num_threads()),
        track=args.track,
        grid=str(grid),
        budget=args.budget,
        metric=track.metric_name,
        direction=track.direction,
        rows=rows,
        seconds=time.perf_counter() - started,
    )
    write_json(args.out / "mixer_table.json", result)
    table = markdown_table(
        [
            "mixer",
            "model",
            f"{track.metric_name} mean",
            "sd",
            "vs attention",
            "p",
            "MDE",
            "parameters",
            "GFLOP",
        ],
        [
            [
                r["mixer"],
                r.get("model") or "–",
                fmt(r.get("mean")),
                fmt(r.get("std")),
                _verdict(r),
                fmt(r.get("p")),
                fmt(r.get("mde")),
                f"{r['params']:,}" if "params" in r else "–",
                fmt(r.get("gflops_fwdbwd")),
            ]
            for r in rows
        ],
    )
    (args.out / "mixer_table.md").write_text(
        f"{args.track} {grid}, budget {args.budget}\n\n{table}\n"
    )
    print(table)
    print(json.dumps({"seconds": round(result["seconds"])}))


if __name__ == "__main__":
    main()
