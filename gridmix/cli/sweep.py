"""``gridmix sweep``: quality against scale, one paired-seed study per point of a grid of sizes, one report.

``gridmix sweep --track mqar --over grid=64,128,256 --over embed_dim=32,64,128`` runs the study ``gridmix run`` would
run at every combination of the swept values (:mod:`gridmix.orchestrate.sweeping`), all in one ledger in ``--out``
(re-running resumes; a point a plain ``gridmix run`` already trained there is reused), and writes ``sweep.md``,
``sweep_report.json`` and ``sweep_points.png`` (:mod:`gridmix.report.sweep_report`).
"""

from __future__ import annotations

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
from gridmix.cli.progress import drive
from gridmix.cli.run import parse_jobs, parse_settings, sweep_table
from gridmix.core.grid import Grid
from gridmix.core.inputs import parse_names, parse_over, parse_rates
from gridmix.tracks.budget import MAX_SEEDS


@app.command("sweep")
def sweep(
    track: str = typer.Option("mqar", help=TRACK_HELP),
    over: list[str] = typer.Option(..., help="NAME=V1,V2,… to sweep: grid, or one of the track's settings (see "
                                             "`gridmix tracks`); repeat for a grid of points, e.g. "
                                             "--over grid=64,128,256."),
    grid: str = typer.Option(None, help="The grid where grid is not swept (default: the track's)."),
    settings: list[str] = typer.Option(None, "--set", help="A track setting NAME=VALUE held at every point "
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
    arguments = sweep_arguments(**locals())  # every option, checked before torch loads
    from gridmix.orchestrate import front_door

    print_sweep(drive(front_door.sweep, sweep_header, arguments))  # gridmix.sweep


def sweep_arguments(*, over: list[str], grid: str | None, settings: list[str] | None, models: str | None,
                    baselines: str | None, budget: BudgetName, lrs: str | None, device: DeviceName,
                    executor: ExecutorName, jobs: str, **options) -> dict:
    """:func:`gridmix.sweep`'s keyword arguments from ``gridmix sweep``'s options, the cheap checks done before torch
    and the plugins load (one line, exit 2; docs/guide.md, "Input checks"); ``options``: those passed on as they
    are."""
    try:
        return dict(over=parse_over(over), grid=str(Grid.parse(grid)) if grid is not None else None,
                    settings=parse_settings(settings or []),
                    models=parse_names(models, "--models") if models is not None else None,
                    baselines=parse_names(baselines, "--baselines") if baselines is not None else (),
                    lrs=parse_rates(lrs) if lrs is not None else None, jobs=parse_jobs(jobs), budget=budget.value,
                    device=device.value, executor=executor.value, **options)
    except ValueError as error:
        fail(str(error))


def sweep_header(planned, ledger) -> None:
    """The line ``gridmix sweep`` prints as the sweep begins: its points, models, budget and ledger."""
    first = planned.studies[0]
    swept = ", ".join(f"{name}=" + ",".join(map(str, values)) for name, values in planned.over)
    console.print(f"[bold]gridmix sweep[/] {planned.track}: {len(planned.points)} points over {swept}; models "
                  f"{', '.join(first.models)}; budget {first.budget.name} ({first.budget.seeds} seeds); ledger "
                  f"{ledger.path}", highlight=False)


def print_sweep(outcome) -> None:
    """The finished sweep on the console: its table and the report's path; exit status 1 when a run failed."""
    Console(width=None if sys.stdout.isatty() else 160).print(sweep_table(outcome.report))
    console.print(f"report: {outcome.paths[1]} ({outcome.seconds:.0f} s)", highlight=False)
    failed = [f"{point.label}: run {f.model} lr={f.lr:g} seed={f.seed} failed: {f.error}"
              for point in outcome.report.points for f in point.report.failures if f.status == "failed"]
    for line in failed:
        console.print(f"[red]{escape(line)}[/]", highlight=False)
    if failed:
        raise typer.Exit(1)
