"""``gridmix sweep``: quality against scale, one paired-seed study per point of a grid of sizes, one
report.

``gridmix sweep --track mqar --over grid=64,128,256 --over embed_dim=32,64,128`` runs the study
``gridmix run`` would run at every combination of the swept values
(:mod:`gridmix.orchestrate.sweeping`), all in one ledger in ``--out`` (re-running resumes; a point a
plain ``gridmix run`` already trained there is reused), and writes ``sweep.md``,
``sweep_report.json`` and ``sweep_points.png`` (:mod:`gridmix.report.sweep_report`).
"""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape

from gridmix.cli.app import app, console, fail
from gridmix.cli.options import (
    Address,
    Baselines,
    Compile,
    Device,
    Executor,
    Jobs,
    Lrs,
    Over,
    Precision,
    Seeds,
    SweepBudget,
    SweepFresh,
    SweepGrid,
    SweepIdea,
    SweepModels,
    SweepOut,
    SweepSet,
    SweepUnderpowered,
    Threads,
    Track,
)
from gridmix.cli.progress import drive
from gridmix.cli.run import study_arguments, sweep_table
from gridmix.core.inputs import parse_over


@app.command("sweep")
def sweep(
    track: Track = "mqar",
    over: Over = ...,
    grid: SweepGrid = None,
    settings: SweepSet = None,
    models: SweepModels = None,
    idea: SweepIdea = None,
    baselines: Baselines = None,
    budget: SweepBudget = "default",
    seeds: Seeds = None,
    lrs: Lrs = None,
    out: SweepOut = None,
    device: Device = "auto",
    precision: Precision = "auto",
    executor: Executor = "local",
    jobs: Jobs = "auto",
    address: Address = None,
    threads: Threads = None,
    underpowered: SweepUnderpowered = False,
    fresh: SweepFresh = False,
    compile: Compile = False,
) -> None:
    """How the verdict moves with size: the paired comparison at every point of a grid of sizes, one
    report."""
    arguments = sweep_arguments(**locals())  # every option, checked before torch loads
    from gridmix.orchestrate import front_door

    print_sweep(drive(front_door.sweep, sweep_header, arguments))  # gridmix.sweep


def sweep_arguments(*, over: list[str], **options) -> dict:
    """:func:`gridmix.sweep`'s keyword arguments from ``gridmix sweep``'s options, the cheap checks
    done before torch and the plugins load (one line, exit 2; docs/guide.md, "Input checks");
    ``options``: the others, for :func:`~gridmix.cli.run.study_arguments`."""
    try:
        return study_arguments(over=parse_over(over), **options)
    except ValueError as error:
        fail(str(error))


def sweep_header(planned, ledger) -> None:
    """The line ``gridmix sweep`` prints as the sweep begins: its points, models, budget and
    ledger."""
    first = planned.studies[0]
    swept = ", ".join(f"{name}=" + ",".join(map(str, values)) for name, values in planned.over)
    console.print(
        f"[bold]gridmix sweep[/] {planned.track}: {len(planned.points)} points over {swept}; "
        f"models {', '.join(first.models)}; budget {first.budget.name} ({first.budget.seeds} "
        f"seeds); ledger {ledger.path}",
        highlight=False,
    )


def print_sweep(outcome) -> None:
    """The finished sweep on the console: its table and the report's path; exit status 1 when a run
    failed."""
    sweep_table(outcome.report).print(Console())
    console.print(f"report: {outcome.paths[1]} ({outcome.seconds:.0f} s)", highlight=False)
    failed = [
        f"{point.label}: run {f.model} lr={f.lr:g} seed={f.seed} failed: {f.error}"
        for point in outcome.report.points
        for f in point.report.failures
        if f.status == "failed"
    ]
    for line in failed:
        console.print(f"[red]{escape(line)}[/]", highlight=False)
    if failed:
        raise typer.Exit(1)
