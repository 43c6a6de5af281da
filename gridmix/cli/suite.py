"""``gridmix suite``: a mixer's capability profile against attention and its peers, every track of a
set over its difficulty ladder, one report.

``gridmix suite --idea global-filter --baselines s4nd,linear-attention`` runs, for each track of
``--tracks`` (default: the graded grid tasks, mqar and sequence), the sweep over its ladder
(:mod:`gridmix.orchestrate.suiting`), each into its own ledger ``--out/TRACK`` (re-running resumes
and reuses), and writes ``suite.md``, ``suite.json`` and ``suite_TRACK.png`` into ``--out``
(:mod:`gridmix.report.suite_report`).
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from gridmix.cli.app import app, console, fail
from gridmix.cli.options import (
    Address,
    Executor,
    Jobs,
    Seeds,
    SuiteBaselines,
    SuiteBudget,
    SuiteFraction,
    SuiteOut,
    SuiteRungs,
    SuiteTracks,
    SweepFresh,
    SweepIdea,
    Threads,
)
from gridmix.cli.progress import drive
from gridmix.cli.run import parse_jobs
from gridmix.core.inputs import parse_names, parse_over


@app.command("suite")
def suite(
    idea: SweepIdea = None,
    baselines: SuiteBaselines = None,
    tracks: SuiteTracks = None,
    rungs: SuiteRungs = None,
    budget: SuiteBudget = "default",
    seeds: Seeds = None,
    out: SuiteOut = None,
    executor: Executor = "local",
    jobs: Jobs = "auto",
    address: Address = None,
    threads: Threads = None,
    fraction: SuiteFraction = 0.5,
    fresh: SweepFresh = False,
) -> None:
    """A mixer's profile against attention and its peers: every track of a set over its difficulty
    ladder, reach, an aggregate, cost."""
    try:  # the cheap checks, before torch and the plugins load
        arguments = dict(
            idea=idea,
            baselines=parse_names(baselines, "--baselines") if baselines is not None else (),
            budget=budget.value,
            seeds=seeds,
            out=out,
            executor=executor.value,
            jobs=parse_jobs(jobs),
            address=address,
            threads=threads,
            fraction=fraction,
            fresh=fresh,
        )
        if tracks is not None:
            arguments["tracks"] = parse_names(tracks, "--tracks")
        if rungs:
            arguments["rungs"] = dict(parse_over(rungs, "--rungs", "recall=pairs-1,pairs-2"))
    except ValueError as error:
        fail(str(error))
    from gridmix.orchestrate import suiting

    finished = {}

    def front_door(**options) -> None:  # gridmix.suite, its report kept
        finished["report"] = suiting.suite(**options)

    drive(front_door, track_header, arguments)
    print_suite(finished["report"], suiting.default_out(budget.value) if out is None else out)


def track_header(planned, ledger) -> None:
    """The line ``gridmix suite`` prints as a track begins: its rungs, models, budget and ledger."""
    first = planned.studies[0]
    rungs = ", ".join(str(p.values["difficulty"]) for p in getattr(planned, "points", ()))
    console.print(
        f"[bold]gridmix suite[/] {escape(first.track)} {first.grid}: "
        f"{'rungs ' + rungs if rungs else 'one point'}; models {escape(', '.join(first.models))}; "
        f"budget {first.budget.name} ({first.budget.seeds} seeds); ledger {ledger.path}",
        highlight=False,
    )


def print_suite(report, out: Path) -> None:
    """The finished suite on the console: the aggregate per mixer and the report's path; exit status
    1 when a run failed."""
    for mixer, row in report.aggregate.items():
        poi = row["p_improvement"]
        console.print(
            f"{escape(mixer)}: IQM {row['iqm']:.3g} [{row['interval'][0]:.3g}, "
            f"{row['interval'][1]:.3g}] over {row['scores']} normalised scores"
            + ("" if poi is None else f"; P(improvement over attention) {poi:.3g}"),
            highlight=False,
        )
    console.print(f"report: {Path(out) / 'suite.md'}", highlight=False)
    failed = [(t["track"], f) for t in report.tracks for f in t["failures"]]
    for track, f in failed:
        console.print(
            f"[red]{escape(track)} {escape(f['rung'])}: run {escape(f['model'])} lr={f['lr']:g} "
            f"seed={f['seed']} failed: {escape(f['error'])}[/]",
            highlight=False,
        )
    if failed:
        raise typer.Exit(1)
