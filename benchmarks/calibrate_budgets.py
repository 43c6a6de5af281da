"""Run built-in tracks' default studies as a user would, and check each against the budget
calibration criteria.

    python benchmarks/calibrate_budgets.py [--tracks image,sequence,video,mqar] [--layouts 2x1,1x2]
                                           [--grid image=16x16] [--out runs/calibrate]
                                           [-- extra gridmix run arguments]

For every track and every layout ``JOBSxTHREADS`` it runs ``gridmix run --track T --jobs J --threads
K`` in a fresh output folder, times the whole command (wall clock, from start to exit), and reads
the report it wrote. The criteria (docs/calibration.md, "Budgets of the built-in tracks"):

- no seed of the idea or of the matched baseline at chance (within ``FLOOR_BAND`` of
  gridmix.analysis.verdicts);
- the no-mixing control worse than the matched baseline by more than the primary comparison's MDE;
- the primary MDE at most 2 % of the matched baseline's mean;
- the whole command in at most 300 s.

Writes ``calibration.json`` into ``--out`` (the environment, with the CPU and the native kernels'
ISA, the reference GEMM's rate at one thread and at every core before the first study and after the
last, which says how fast the machine was that day, and one record per study) and prints one line
per study. Run it on an idle machine: other processes slow small-kernel work many times over
(docs/benchmarks.md, "Method").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from bench_common import environment, gemm_gflops

from gridmix.analysis.verdicts import FLOOR_BAND
from gridmix.report.types import Report

GRIDS = {"image": "32x32"}  # the README's main command; every other track at its default grid
MAX_MDE_PCT = 2.0
MAX_WALL_S = 300.0


def at_chance(value: float, *, chance: float | None, ceiling: float | None, direction: str) -> bool:
    """Whether one seed's metric sits at a track's chance, by the report's band (a value past chance
    counts too)."""
    if chance is None:
        return False
    span = abs(ceiling - chance) if ceiling is not None else abs(chance)
    past = value < chance if direction == "higher" else value > chance
    return past or abs(value - chance) <= FLOOR_BAND * span


def criteria(report: Report, wall_s: float) -> dict:
    """The calibration record of one study's report: the measured figures and whether each criterion
    holds."""
    idea, baseline = report.arms[report.idea], report.arms[report.primary_baseline]
    control = next((arm for arm in report.arms.values() if arm.role == "control"), None)
    primary = report.comparisons[report.primary_baseline].result
    sign = 1.0 if report.direction == "lower" else -1.0  # positive gap: the control is worse
    gap = sign * (control.mean - baseline.mean) if control and control.mean is not None else None
    mde_pct = (
        100 * primary.mde / abs(baseline.mean) if primary and primary.mde is not None else None
    )
    chance_seeds = {
        arm.name: [
            s
            for s, v in zip(report.comparison_seeds, arm.per_seed)
            if at_chance(
                v, chance=report.chance, ceiling=report.ceiling, direction=report.direction
            )
        ]
        for arm in (idea, baseline)
    }
    return dict(
        wall_s=round(wall_s, 1),
        threads=report.threads,
        run_seconds=round(report.timings["total_s"], 1),
        references_s=report.timings.get("references_s"),
        idea=dict(name=idea.name, mean=idea.mean, lr=idea.lr),
        baseline=dict(name=baseline.name, mean=baseline.mean, lr=baseline.lr),
        control=dict(name=control.name, mean=control.mean) if control else None,
        delta=primary.delta_mean if primary else None,
        p=primary.p_value if primary else None,
        verdict=report.comparisons[report.primary_baseline].verdict,
        mde=primary.mde if primary else None,
        mde_pct_of_baseline=mde_pct,
        control_gap=gap,
        seeds_at_chance=chance_seeds,
        met=dict(
            none_at_chance=not any(chance_seeds.values()),
            control_beyond_mde=gap is not None
            and primary is not None
            and primary.mde is not None
            and gap > primary.mde,
            mde_within_2pct=mde_pct is not None and mde_pct <= MAX_MDE_PCT,
            wall_within_5min=wall_s <= MAX_WALL_S,
        ),
    )


def run_study(
    track: str, jobs: int, threads: int, out: Path, extra: list[str], grids: dict[str, str]
) -> dict:
    """Run one default study in a fresh folder and return its calibration record (or the
    failure)."""
    command = [
        "gridmix",
        "run",
        "--track",
        track,
        "--jobs",
        str(jobs),
        "--threads",
        str(threads),
        "--out",
        str(out),
    ]
    if track in grids:
        command += ["--grid", grids[track]]
    command += extra
    if out.exists():
        raise SystemExit(
            f"{out} exists; calibration runs start from nothing (remove it or pass another --out)"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    log = out.parent / f"{out.name}.log"
    start = time.perf_counter()
    with log.open("w") as handle:
        status = subprocess.run(
            command, stdout=handle, stderr=subprocess.STDOUT, check=False
        ).returncode
    wall_s = time.perf_counter() - start
    record = dict(
        track=track,
        grid=grids.get(track),
        jobs=jobs,
        threads=threads,
        command=" ".join(command),
        log=str(log),
        exit=status,
    )
    report_path = out / "bench_report.json"
    if status != 0 or not report_path.exists():
        return dict(record, wall_s=round(wall_s, 1), error=f"exit {status}; see {log}")
    return dict(record, **criteria(Report.from_dict(json.loads(report_path.read_text())), wall_s))


def number(value: float | None, spec: str) -> str:
    """``value`` formatted, or "(none)" where the study gave none (an exploratory budget has no
    MDE)."""
    return "(none)" if value is None else format(value, spec)


def machine_speed() -> dict[int, float]:
    """The reference GEMM's rate now, GFLOP/s, at one thread (a worker of ``--jobs auto``) and at
    every core."""
    return {threads: round(gemm_gflops(threads), 1) for threads in sorted({1, os.cpu_count() or 1})}


def layout(text: str) -> tuple[int, int]:
    try:
        jobs, threads = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"layout {text!r}; expected JOBSxTHREADS, e.g. 2x1"
        ) from None
    return jobs, threads


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tracks", default="image,sequence,video,mqar")
    parser.add_argument(
        "--layouts", default="2x1", help="comma-separated JOBSxTHREADS, e.g. 2x1,1x2"
    )
    parser.add_argument("--out", type=Path, default=Path("runs/calibrate"))
    parser.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="TRACK=GRID",
        help=f"a track's grid instead of {GRIDS} or its default (repeatable)",
    )
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    layouts = [layout(text) for text in args.layouts.split(",")]
    pairs = [text.split("=", 1) for text in args.grid]
    if any(len(pair) != 2 for pair in pairs):
        parser.error(f"--grid {args.grid}; expected TRACK=GRID, e.g. image=16x16")
    grids = dict(GRIDS, **dict(pairs))
    result = dict(
        environment=environment(threads=max(t for _, t in layouts)),
        extra_arguments=extra,
        gemm_gflops=dict(before=machine_speed()),
        studies=[],
    )
    args.out.mkdir(parents=True, exist_ok=True)
    print(
        f"2048³ float32 GEMM before: {result['gemm_gflops']['before']} GFLOP/s by threads",
        flush=True,
    )
    for track in args.tracks.split(","):
        for jobs, threads in layouts:
            record = run_study(
                track, jobs, threads, args.out / f"{track}-{jobs}x{threads}", extra, grids
            )
            result["studies"].append(record)
            (args.out / "calibration.json").write_text(json.dumps(result, indent=2) + "\n")
            met = record.get("met") or {}
            print(
                f"{track} {jobs}x{threads}: wall {record['wall_s']} s"
                + (
                    f", MDE {number(record['mde_pct_of_baseline'], '.2f')} % of baseline, control "
                    f"gap {number(record['control_gap'], '.4g')} vs MDE "
                    f"{number(record['mde'], '.4g')}, verdict {record['verdict']!r}, unmet "
                    f"{[k for k, v in met.items() if not v]}"
                    if met
                    else f", {record['error']}"
                ),
                flush=True,
            )
    result["peak_rss_children_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    result["gemm_gflops"]["after"] = machine_speed()
    print(f"2048³ float32 GEMM after: {result['gemm_gflops']['after']} GFLOP/s by threads")
    (args.out / "calibration.json").write_text(json.dumps(result, indent=2) + "\n")
    return (
        0 if all(all((s.get("met") or {"error": False}).values()) for s in result["studies"]) else 1
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
