"""``gridmix sweep``: quality against scale, one paired-seed study per point of a grid of sizes, one report.

``gridmix sweep --track mqar --over grid=64,128,256 --over embed_dim=32,64,128`` runs the study ``gridmix run`` would
run at every combination of the swept values (:mod:`gridmix.orchestrate.sweeping`), all in one ledger in ``--out``
(re-running resumes; a point a plain ``gridmix run`` already trained there is reused), and writes ``sweep.md``,
``sweep_report.json`` and ``sweep_points.png`` (:mod:`gridmix.report.sweep`).
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from gridmix.cli.app import (
    ADDRESS_HELP,
    BUDGET_HELP,
    DEVICE_HELP,
    EXECUTOR_HELP,
    JOBS_HELP,
    LRS_HELP,
    PRECISION_HELP,
    SEEDS_HELP,
    THREADS_HELP,
    TRACK_HELP,
    BudgetName,
    DeviceName,
    ExecutorName,
    app,
    console,
    fail,
)
from gridmix.cli.run import (
    _callbacks,
    _progress,
    parse_jobs,
    parse_settings,
    print_note,
    stop_interrupted,
    storage_error,
    sweep_table,
)
from gridmix.grid import Grid
from gridmix.inputs import parse_names, parse_over, parse_rates
from gridmix.interrupt import stop_on_signals
from gridmix.tracks.budget import MAX_SEEDS


@app.command("sweep")
def sweep(
    track: str = typer.Option("mqar", help=TRACK_HELP),
    over: list[str] = typer.Option(..., help="NAME=V1,V2,… to sweep: grid, or one of the track's knobs (see `gridmix "
                                             "tracks`); repeat for a grid of points, e.g. --over grid=64,128,256."),
    grid: str = typer.Option(None, help="The grid where grid is not swept (default: the track's)."),
    settings: list[str] = typer.Option(None, "--set", help="A track knob NAME=VALUE held at every point "
                                                           "(repeatable; default: the track's values)."),
    models: str = typer.Option(None, help="Comma-separated models (default: the track's default models)."),
    idea: str = typer.Option(None, help="A registered mixer as the idea (see `gridmix run --idea`; default: the "
                                        "track's idea)."),
    baselines: str = typer.Option(None, help="Comma-separated registered mixers to add as secondary baselines "
                                             "(default: none)."),
    budget: BudgetName = typer.Option("default", help=BUDGET_HELP + " At every point."),
    seeds: int = typer.Option(None, min=2, max=MAX_SEEDS, help=SEEDS_HELP),
    lrs: str = typer.Option(None, help=LRS_HELP),
    out: Path = typer.Option(None, help="Output directory (default: runs/TRACK-sweep-NAMES-BUDGET)."),
    device: DeviceName = typer.Option("auto", help=DEVICE_HELP),
    precision: str = typer.Option("auto", help=PRECISION_HELP),
    executor: ExecutorName = typer.Option("local", help=EXECUTOR_HELP),
    jobs: str = typer.Option("auto", help=JOBS_HELP),
    address: str = typer.Option(None, help=ADDRESS_HELP),
    threads: int = typer.Option(None, min=1, help=THREADS_HELP),
    underpowered: bool = typer.Option(False, "--underpowered", help="Run even when the seeds cannot reach α."),
    fresh: bool = typer.Option(False, "--fresh", help="Start afresh in --out even if it holds results on other data."),
) -> None:
    """How the verdict moves with size: the paired comparison at every point of a grid of sizes, one report."""
    try:  # the cheap checks, before torch and the plugins load (docs/guide.md, "Input checks")
        swept = parse_over(over)
        grid = str(Grid.parse(grid)) if grid is not None else None
        chosen_models = parse_names(models, "--models") if models is not None else None
        extra = parse_names(baselines, "--baselines") if baselines is not None else ()
        rates = parse_rates(lrs) if lrs is not None else None
        chosen_settings, jobs = parse_settings(settings or []), parse_jobs(jobs)
    except ValueError as error:
        fail(str(error))
    from gridmix import orchestrate

    try:
        planned = orchestrate.plan_sweep(track, swept, grid=grid, settings=chosen_settings, models=chosen_models,
                                      idea=idea, baselines=extra, budget=budget.value, seeds=seeds, lrs=rates,
                                      device=device.value, precision=precision, jobs=jobs, threads=threads,
                                      underpowered=underpowered, note=print_note)
    except ValueError as error:
        fail(str(error))
    out = out or planned.default_out
    try:
        ledger = orchestrate.open_sweep_ledger(out, planned, fresh=fresh)
    except (ValueError, OSError, sqlite3.Error) as error:
        fail(str(error) if isinstance(error, ValueError) else storage_error(error, out))
    try:
        chosen_executor = orchestrate.make_executor(executor.value, jobs=planned.points[0].planned.jobs,
                                                    address=address)
    except ValueError as error:
        ledger.close()
        fail(str(error))
    first = planned.points[0].planned.study
    swept = ", ".join(f"{name}=" + ",".join(map(str, values)) for name, values in planned.over)
    console.print(f"[bold]gridmix sweep[/] {planned.track}: {len(planned.points)} points over {swept}; models "
                  f"{', '.join(first.models)}; budget {first.budget.name} ({first.budget.seeds} seeds); ledger "
                  f"{ledger.path}", highlight=False)
    try:
        with stop_on_signals(), _progress() as progress:
            callbacks = _callbacks(progress, first, ledger, jobs=planned.points[0].planned.jobs,
                                   studies=[point.planned.study for point in planned.points])
            outcome = orchestrate.run_sweep(planned, ledger, chosen_executor, out, callbacks=callbacks,
                                         on_point=lambda point: console.print(f"point {point.label}", highlight=False,
                                                                              markup=False))
    except KeyboardInterrupt as error:
        stop_interrupted(error, ledger.path)
    except (OSError, sqlite3.Error) as error:
        fail(storage_error(error, out))
    Console(width=None if sys.stdout.isatty() else 160).print(sweep_table(outcome.report))
    console.print(f"report: {outcome.paths[1]} ({outcome.seconds:.0f} s)", highlight=False)
    failed = [f"{point.label}: run {f.model} lr={f.lr:g} seed={f.seed} failed: {f.error}"
              for point in outcome.report.points for f in point.report.failures if f.status == "failed"]
    for line in failed:
        console.print(f"[red]{escape(line)}[/]", highlight=False)
    if failed:
        raise typer.Exit(1)
