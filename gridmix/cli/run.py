"""``gridmix run`` and ``gridmix report``: the paired-seed comparison and its re-rendering.

``gridmix run --track image --grid 32x32`` trains the idea model and its baselines over paired seeds
with a learning-rate sweep (:mod:`gridmix.study.harness`), writes every finished run to the ledger
in ``--out`` (re-running resumes), measures parity and scaling, and writes the report.
``gridmix report DIR`` rebuilds the report from the ledger alone.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape

from gridmix.cli.app import DEFAULT_TRACK, BudgetName, DeviceName, ExecutorName, app, console, fail
from gridmix.cli.options import (
    AA,
    Address,
    Baselines,
    Compile,
    Data,
    DataRoot,
    Device,
    Download,
    Epochs,
    EvalGrids,
    Executor,
    Jobs,
    Lrs,
    MatchParams,
    MinEffect,
    NTrain,
    Precision,
    RunBudget,
    RunFresh,
    RunGrid,
    RunIdea,
    RunModels,
    RunOut,
    RunSet,
    RunUnderpowered,
    Scaling,
    Seeds,
    StopAboveChance,
    Threads,
    Track,
    WithoutIdea,
)
from gridmix.cli.progress import drive
from gridmix.cli.tables import Column, TextTable
from gridmix.core.defaults import DEFAULT_MIN_EFFECT
from gridmix.core.grid import Grid
from gridmix.core.inputs import parse_grids, parse_names, parse_rates
from gridmix.report.cost import cost_words
from gridmix.report.format import fmt, fmt_column
from gridmix.tracks.budget import describe

if TYPE_CHECKING:  # the report's modules import torch; the command imports them when it runs
    from gridmix.report.sweep_report import SweepReport
    from gridmix.report.types import Report


def parse_jobs(jobs: str) -> int | str:
    """``--jobs``: ``"auto"`` or a positive number of worker processes; ``ValueError`` in one line
    otherwise."""
    if jobs == "auto":
        return jobs
    if not (jobs.isascii() and jobs.isdigit() and int(jobs) >= 1):
        raise ValueError(f"--jobs {jobs!r}; expected 'auto' or a positive integer")
    return int(jobs)


DATA_ENV = {"image-folder": "GRIDMIX_IMAGE_FOLDER", "sequence-csv": "GRIDMIX_SEQUENCE_CSV"}


def set_data_env(track: str, *, data: Path | None, data_root: Path | None, download: bool) -> None:
    """Hand --data / --data-root / --download to the data plugins through their environment
    variables.

    The variables are the plugins' one interface (worker processes inherit them); the options only
    set them.
    """
    if data is not None:
        if track not in DATA_ENV:
            fail(
                f"--data is for the tracks {sorted(DATA_ENV)}; track {track!r} takes none "
                "(--data-root for torchvision data sets)"
            )
        os.environ[DATA_ENV[track]] = str(data.expanduser().resolve())
    if data_root is not None:
        os.environ["GRIDMIX_DATA_ROOT"] = str(data_root.expanduser().resolve())
    if download:
        os.environ["GRIDMIX_DOWNLOAD"] = "1"
    if data is not None or data_root is not None or download:
        from gridmix.tracks.plugin_loader import load_registry

        load_registry(refresh=True)  # the plugins read the variables when the registry is built


DELTA_HEADER = "Δ (idea − model)"


def results_table(report: Report) -> TextTable:
    """Every arm with its chosen rate, its test metric, and the idea's comparison with it (or
    mechanism question)."""
    arms = list(report.arms.items())
    comparisons = [report.comparison_with(name) for name, _ in arms]
    results = [comp.result if comp else None for comp in comparisons]
    means, stds = (
        fmt_column([arm.mean for _, arm in arms]),
        fmt_column([arm.std for _, arm in arms]),
    )
    deltas = fmt_column([getattr(result, "delta_mean", None) for result in results])
    mdes = fmt_column([getattr(result, "mde", None) for result in results])
    rows = []
    for index, ((name, arm), comp, result) in enumerate(zip(arms, comparisons, results)):
        role = arm.role + (" (primary)" if comp and comp.family == "primary" else "")
        verdict = " ".join(
            part
            for part in (comp.verdict if comp else "", f"[{arm.flag}]" if arm.flag else "")
            if part
        )
        rows.append(
            (
                escape(name),
                role,
                fmt(arm.lr),
                means[index],
                stds[index],
                str(arm.n),
                deltas[index],
                fmt(getattr(result, "p_holm", None)),
                mdes[index],
                escape(verdict),
            )
        )
    columns = (
        Column("model", "name"),
        Column("role"),
        Column("lr", "number"),
        Column("mean", "number"),
        Column("std", "number"),
        Column("n", "number"),
        Column(DELTA_HEADER, "number"),
        Column("p", "number"),
        Column("MDE 80%", "number"),
        Column("verdict"),
    )
    caption = (
        f"mean, std: {report.metric} over the comparison seeds (std ddof=0); {DELTA_HEADER}: the "
        f"idea's {report.metric} minus this model's, mean over paired seeds "
        f"({report.metric_direction}); p: exact sign-flip (Holm among secondary baselines); MDE "
        "80%: the smallest |Δ| the test detects at 80% power"
    )
    return TextTable(
        title=f"{report.track} {report.grid} — {report.metric} ({report.metric_direction})",
        columns=columns,
        rows=rows,
        caption=caption,
    )


def sweep_table(report: SweepReport) -> TextTable:
    """Every point: the swept values, each model's mean ± std, the primary comparison's Δ, MDE and
    verdict."""
    first = report.first
    names = [name for name, _ in report.over]
    models = list(dict.fromkeys(name for point in report.points for name in point.report.arms))
    rows = []
    for point in report.points:
        arms = point.report.arms
        cells = [str(point.values[name]) for name in names]
        cells += [
            "–" if model not in arms else f"{fmt(arms[model].mean)} ± {fmt(arms[model].std)}"
            for model in models
        ]
        comparison = point.report.comparison
        result = comparison.result if comparison else None
        cells += [
            fmt(getattr(result, "delta_mean", None)),
            fmt(getattr(result, "mde", None)),
            escape(comparison.verdict) if comparison else "no baseline",
        ]
        rows.append(tuple(cells))
    columns = (
        *(Column(name, "number") for name in names),
        *(Column(escape(model), "number") for model in models),
        Column("Δ (idea − baseline)", "number"),
        Column("MDE 80%", "number"),
        Column("verdict"),
    )
    return TextTable(
        title=f"{report.track} sweep — {first.metric} ({first.metric_direction})",
        columns=columns,
        rows=rows,
        caption=f"each model: mean ± std of {first.metric} over the comparison seeds",
    )


# the options read as one table, not one per line
# fmt: off
@app.command("run")
def run(track: Track = DEFAULT_TRACK, grid: RunGrid = None, models: RunModels = None,
        idea: RunIdea = None, baselines: Baselines = None, budget: RunBudget = "default",
        seeds: Seeds = None, lrs: Lrs = None, epochs: Epochs = None, n_train: NTrain = None,
        out: RunOut = None, device: Device = "auto", precision: Precision = "auto",
        executor: Executor = "local", jobs: Jobs = "auto", address: Address = None,
        threads: Threads = None, scaling: Scaling = True, match_params: MatchParams = None,
        underpowered: RunUnderpowered = False, aa: AA = False,
        min_effect: MinEffect = DEFAULT_MIN_EFFECT, fresh: RunFresh = False, data: Data = None,
        data_root: DataRoot = None, download: Download = False, eval_grids: EvalGrids = None,
        settings: RunSet = None, without_idea: WithoutIdea = False,
        stop_above_chance: StopAboveChance = None, compile: Compile = False) -> None:
    """Compare the idea model with its baselines on a track: paired seeds, LR sweep, exact
    statistics."""
    arguments = run_arguments(**locals())  # every option, checked before torch loads
    from gridmix.orchestrate import front_door

    print_run(drive(front_door.run, run_header, arguments))  # gridmix.run
# fmt: on


def run_arguments(
    *,
    track: str,
    eval_grids: str | None,
    data: Path | None,
    data_root: Path | None,
    download: bool,
    **options,
) -> dict:
    """:func:`gridmix.run`'s keyword arguments from ``gridmix run``'s options: the cheap checks done
    before torch and the plugins load (one line, exit 2; docs/guide.md, "Input checks"), the data
    plugins told where their data is (:func:`set_data_env`); ``options``: the others, for
    :func:`study_arguments`."""
    try:
        arguments = study_arguments(
            track=track,
            eval_grids=()
            if eval_grids is None
            else tuple(map(str, parse_grids(eval_grids, "--eval-grids"))),
            **options,
        )
    except ValueError as error:
        fail(str(error))
    set_data_env(track, data=data, data_root=data_root, download=download)
    return arguments


def study_arguments(
    *,
    grid: str | None,
    models: str | None,
    baselines: str | None,
    lrs: str | None,
    settings: list[str] | None,
    jobs: str,
    budget: BudgetName,
    device: DeviceName,
    executor: ExecutorName,
    **options,
) -> dict:
    """The options ``gridmix run`` and ``gridmix sweep`` share, checked and converted for
    :func:`gridmix.run` and :func:`gridmix.sweep` (a ``ValueError`` in one line); ``options``: those
    passed on as they are."""
    return dict(
        grid=str(Grid.parse(grid)) if grid is not None else None,
        models=parse_names(models, "--models") if models is not None else None,
        baselines=parse_names(baselines, "--baselines") if baselines is not None else (),
        lrs=parse_rates(lrs) if lrs is not None else None,
        settings=parse_settings(settings or []),
        jobs=parse_jobs(jobs),
        budget=budget.value,
        device=device.value,
        executor=executor.value,
        **options,
    )


def run_header(planned, ledger) -> None:
    """The line ``gridmix run`` prints as the study begins: what it trains, on what, with what,
    where."""
    study = planned.study
    changed = (
        f", changed by {', '.join(f'--{k.replace(chr(95), chr(45))}' for k in study.overrides)}"
        if study.overrides
        else ""
    )
    console.print(
        f"[bold]gridmix run[/] {escape(study.track)} {study.grid}: models "
        f"{escape(', '.join(study.models))}; budget {study.budget.name} "
        f"({describe(study.budget)}{changed}); {study.device} {study.precision}, {planned.jobs} "
        f"worker(s) × {study.threads} thread(s); data {study.data['hash']}; ledger "
        f"{escape(str(ledger.path))}",
        highlight=False,
    )


def print_run(outcome) -> None:
    """The finished study on the console: the results table, the transfer lines, the verdict and the
    report's path; exit status 1 when a run or an analysis failed (never because the idea lost)."""
    from gridmix.report.learnability import Learnability

    report = outcome.report
    if isinstance(report, Learnability):  # a study without the idea: per-model lines, no verdict
        for line in report.lines():
            console.print(line, highlight=False, markup=False)
        console.print(f"{report.verdict}; report: {outcome.paths[1]}", highlight=False)
        return
    results_table(report).print(Console())
    for line in transfer_lines(report):
        console.print(line, highlight=False, markup=False)
    cost = cost_words(report)
    if cost:
        console.print(f"cost: {cost}", highlight=False, markup=False)
    console.print(
        f"verdict: [bold]{report.verdict}[/]; report: {outcome.paths[1]} ({outcome.seconds:.0f} s)",
        highlight=False,
    )
    errors = analysis_errors(report)
    for line in errors:
        console.print(f"[red]{escape(line)}[/]", highlight=False)
    if errors:
        raise typer.Exit(1)


def parse_settings(assignments: list[str]) -> dict[str, str]:
    """``["pairs=8", "vocab=128"]`` as ``{"pairs": "8", "vocab": "128"}`` (the track converts the
    values); a malformed or repeated one is a ``ValueError`` in one line."""
    settings = {}
    for text in assignments:
        name, sep, value = text.partition("=")
        name = name.strip()
        if not sep or not name or not value.strip():
            raise ValueError(f"--set {text!r}; expected NAME=VALUE, e.g. --set pairs=8")
        if name in settings:
            raise ValueError(f"--set names {name!r} twice; expected each setting once")
        settings[name] = value.strip()
    return settings


def transfer_lines(report: Report) -> list[str]:
    """One line per evaluation grid: the idea against the matched baseline there, marked
    secondary."""
    if report.transfer is None:
        return []
    lines = []
    for point in report.transfer.grids:
        comp = point.comparison
        if comp is None:
            continue
        detail = (
            f"Δ = {fmt(comp.result.delta_mean)}, p = {fmt(comp.result.p_value)}"
            if comp.result
            else comp.reason
        )
        lines.append(
            f"transfer to {point.grid} (secondary, alone at α): {comp.a} − {comp.b}: "
            f"{comp.verdict} ({detail})"
        )
    return lines


def analysis_errors(report: Report) -> list[str]:
    """What went wrong in the study itself (never that the idea lost): failed runs and failed
    analyses."""
    errors = [
        f"run {f.model} lr={f.lr:g} {'sweep seed' if f.seed in report.sweep_seeds else 'seed'} "
        f"{f.seed} failed: {f.error}"
        for f in report.failures
        if f.status == "failed"
    ]
    errors += [
        f"{name} analysis failed: {report.analyses[name]['error']}"
        for name in ("parity", "scaling")
        if isinstance(report.analyses.get(name), dict) and "error" in report.analyses[name]
    ]
    # an evaluation that raised (a model that cannot move is no error)
    if report.transfer is not None:
        errors += [
            f"transfer of {name}: {reason}"
            for point in report.transfer.grids
            for name, arm in point.arms.items()
            for reason in arm.reasons
            if reason.startswith("failed")
        ]
    return errors


@app.command("report")
def report(
    directory: Path = typer.Argument(
        ..., help="An output directory of `gridmix run` or `gridmix sweep`."
    ),
) -> None:
    """Re-render bench_report.json, report.md and the plots (and a sweep's sweep.md) from a
    directory's ledger."""
    from gridmix.orchestrate.front_door import storage_error
    from gridmix.report.build import build_report, write_report
    from gridmix.report.learnability import learnability_report, write_learnability
    from gridmix.report.sweep_report import build_sweep_report, write_sweep_report
    from gridmix.study.ledger import Ledger

    rebuilt, swept, learned, paths = None, None, None, []
    try:
        with Ledger(directory, create=False, lock=True) as ledger:
            study = ledger.study()
            # --without-idea (a malformed study goes on to build_report, which says what is wrong)
            if study and "idea" in study and study["idea"] not in study.get("models", ()):
                learned = learnability_report(ledger)
                paths += write_learnability(learned, directory)
            # neither: build_report says what is missing
            elif study is not None or ledger.sweep() is None:
                rebuilt = build_report(ledger)
                paths += write_report(rebuilt, directory)
            if ledger.sweep() is not None:
                swept = build_sweep_report(ledger)
                paths += write_sweep_report(swept, directory)
            unfinished, planned = unfinished_runs(ledger)
    except ValueError as error:
        fail(str(error))
    except (OSError, sqlite3.Error) as error:
        fail(storage_error(error, directory))
    if rebuilt is not None:
        results_table(rebuilt).print(Console())
        for line in transfer_lines(rebuilt):
            console.print(line, highlight=False, markup=False)
    if swept is not None:
        sweep_table(swept).print(Console())
    for line in learned.lines() if learned is not None else []:
        console.print(line, highlight=False, markup=False)
    console.print(f"wrote {', '.join(str(p) for p in paths)}", highlight=False)
    if unfinished:
        command = "gridmix sweep" if swept is not None else "gridmix run"
        console.print(
            f"[yellow]unfinished:[/] {unfinished} of {planned} planned runs are missing or failed, "
            f"so this report covers only the runs done; the same `{command}` command resumes the "
            "study",
            highlight=False,
        )


def unfinished_runs(ledger) -> tuple[int, int]:
    """``(runs missing or failed, runs planned)`` over the ledger's study and every point of its
    sweep (:func:`gridmix.study.spec.study_progress`; a comparison not yet planned counts as
    ``models × seeds``)."""
    from gridmix.study.spec import Study, study_progress

    specs = [] if ledger.study() is None else [ledger.study()]
    specs += [point["study"] for point in (ledger.sweep() or {}).get("points", ())]
    rows = {row.key: row for row in ledger.rows()}
    unfinished = planned = 0
    for spec in specs:
        try:
            progress = study_progress(Study.from_dict(spec), rows)
        except (KeyError, TypeError) as error:
            raise ValueError(
                f"the study spec in {ledger.path} is incomplete or foreign "
                f"({type(error).__name__}: {error})"
            ) from None
        unfinished += sum(phase["missing"] + phase["failed"] for phase in progress.values())
        planned += sum(phase["planned"] for phase in progress.values())
    return unfinished, planned
