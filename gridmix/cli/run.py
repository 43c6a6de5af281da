"""``gridmix run`` and ``gridmix report``: the paired-seed comparison and its re-rendering.

``gridmix run --track image --grid 32x32`` trains the idea model and its baselines over paired seeds
with a learning-rate sweep (:mod:`gridmix.study.harness`), writes every finished run to the ledger in
``--out`` (re-running resumes), measures parity and scaling, and writes the report.
``gridmix report DIR`` rebuilds the report from the ledger alone.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gridmix.analysis.stats import DEFAULT_MIN_EFFECT
from gridmix.cli.app import BudgetName, DeviceName, ExecutorName, app, console, fail
from gridmix.report.format import fmt
from gridmix.report.types import Report


def storage_error(error: OSError | sqlite3.Error, path: Path) -> str:
    """One line naming the path an ``OSError`` or SQLite error is about."""
    if isinstance(error, OSError):
        where = error.filename if error.filename is not None else path
        return f"{where}: {error.strerror or error} ({type(error).__name__})"
    return f"{path}: SQLite error: {error}"


def parse_floats(text: str, name: str) -> tuple[float, ...]:
    try:
        values = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        fail(f"{name} {text!r} is not a comma-separated list of numbers, e.g. '1e-3,3e-3'")
    if not values or any(not v > 0 for v in values):
        fail(f"{name} {text!r} must hold positive numbers, e.g. '1e-3,3e-3'")
    return values


DATA_ENV = {"image-folder": "GRIDMIX_IMAGE_FOLDER", "sequence-csv": "GRIDMIX_SEQUENCE_CSV"}


def set_data_env(track: str, *, data: Path | None, data_root: Path | None, download: bool) -> None:
    """Hand --data / --data-root / --download to the data plugins through their environment variables.

    The variables are the plugins' one interface (worker processes inherit them); the options only set them.
    """
    if data is not None:
        if track not in DATA_ENV:
            fail(f"--data is for the tracks {sorted(DATA_ENV)}; track {track!r} takes none (--data-root for "
                 f"torchvision data sets)")
        os.environ[DATA_ENV[track]] = str(data.expanduser().resolve())
    if data_root is not None:
        os.environ["GRIDMIX_DATA_ROOT"] = str(data_root.expanduser().resolve())
    if download:
        os.environ["GRIDMIX_DOWNLOAD"] = "1"
    if data is not None or data_root is not None or download:
        from gridmix.tracks.registry import load_registry

        load_registry(refresh=True)  # the plugins read the variables when the registry is built


def results_table(report: Report) -> Table:
    """Every arm with its chosen rate, its test metric, and the idea's comparison with it (or mechanism question)."""
    table = Table(title=f"{report.track} {report.grid} — {report.metric} ({report.metric_direction})")
    for column in ("model", "role", "lr", "mean", "std", "n", "idea − it: Δ", "p", "MDE 80%", "verdict"):
        table.add_column(column, justify="left" if column in ("model", "role", "verdict") else "right")
    for name, arm in report.arms.items():
        comp = report.comparison_with(name)
        result = comp.result if comp else None
        role = arm.role + (" (primary)" if comp and comp.family == "primary" else "")
        verdict = (comp.verdict if comp else "") + (f" [{arm.flag}]" if arm.flag else "")
        table.add_row(name, role, fmt(arm.lr), fmt(arm.mean), fmt(arm.std), str(arm.n),
                      *(fmt(getattr(result, key, None)) for key in ("delta_mean", "p_holm", "mde")), verdict)
    return table


@app.command("run")
def run(
    track: str = typer.Option("image", help="Track name (see `gridmix tracks`)."),
    grid: str = typer.Option(None, help="Token grid, e.g. 64, 32x32, 8x16x16 (default: the track's)."),
    models: str = typer.Option(None, help="Comma-separated models to include (default: the track's default models, "
                                         "else every model the grid allows: idea, baselines, ablation, control)."),
    idea: str = typer.Option(None, help="A registered mixer (see `gridmix mixers`) as the idea, in the track's "
                                        "backbone against its matched baseline (default: the track's idea)."),
    baselines: str = typer.Option(None, help="Comma-separated registered mixers to add as secondary baselines."),
    budget: BudgetName = typer.Option("default", help="smoke (CI), default (minutes on a laptop) or full "
                                                      "(seed scale)."),
    seeds: int = typer.Option(None, min=2, help="Paired seeds (overrides the budget)."),
    lrs: str = typer.Option(None, help="Learning rates to sweep, e.g. 1e-3,3e-3 (overrides the budget)."),
    out: Path = typer.Option(None, help="Output directory (default: runs/TRACK-GRID-BUDGET)."),
    device: DeviceName = typer.Option("auto", help="auto, cpu or cuda."),
    precision: str = typer.Option("auto", help="auto (bf16 mixed precision on CUDA, fp32 on CPU), fp32, bf16 or fp16."),
    executor: ExecutorName = typer.Option("local", help="local or ray."),
    jobs: int = typer.Option(1, min=1, help="Local worker processes (threads are split between them)."),
    address: str = typer.Option(None, help="Ray cluster address HOST:PORT (with --executor ray)."),
    threads: int = typer.Option(None, min=1, help="Torch threads per run (default: all cores / jobs)."),
    scaling: bool = typer.Option(True, help="Measure time, FLOPs and memory at this grid and smaller ones."),
    match_params: str = typer.Option(None, help="Scale the idea's width knob to this baseline's parameter count."),
    underpowered: bool = typer.Option(False, "--underpowered", help="Run even when the seeds are too few for "
                                                                    "the primary comparison to reach α (reported)."),
    aa: bool = typer.Option(False, "--aa", help="An A/A study: the matched baseline against a copy of itself "
                                                 "(independent initialisation, same data), to check the harness."),
    min_effect: str = typer.Option(DEFAULT_MIN_EFFECT, help="Smallest effect worth reporting as real: a significant "
                                   "difference below it is 'significant but negligible'. A percentage of the compared "
                                   "arm's mean (1%) or a number in the metric's units (0.005)."),
    fresh: bool = typer.Option(False, "--fresh", help="Start a fresh study in --out even if it holds results on "
                                                      "other data (they are kept, but no longer reported)."),
    data: Path = typer.Option(None, help="The data of image-folder (a folder) or sequence-csv (a CSV file)."),
    data_root: Path = typer.Option(None, help="Root holding torchvision data sets (mnist, cifar10, ...)."),
    download: bool = typer.Option(False, help="Let torchvision download a missing data set into --data-root."),
) -> None:
    """Compare the idea model with its baselines on a track: paired seeds, LR sweep, exact statistics."""
    from gridmix.study import pipeline

    set_data_env(track, data=data, data_root=data_root, download=download)
    try:
        extra = tuple(name.strip() for name in baselines.split(",") if name.strip()) if baselines else ()
        planned = pipeline.plan_study(track, grid, models=models, idea=idea, baselines=extra, budget=budget.value,
                                      seeds=seeds, lrs=parse_floats(lrs, "--lrs") if lrs else None, device=device.value,
                                      precision=precision, jobs=jobs, threads=threads, scaling=scaling,
                                      match_params=match_params, underpowered=underpowered, aa=aa,
                                      min_effect=min_effect, note=print_note)
    except ValueError as error:
        fail(str(error))
    study = planned.study
    out = out or planned.default_out
    try:
        ledger = pipeline.open_ledger(out, planned, fresh=fresh)
    except (ValueError, OSError, sqlite3.Error) as error:
        fail(str(error) if isinstance(error, ValueError) else storage_error(error, out))
    try:
        chosen_executor = pipeline.make_executor(executor.value, jobs=jobs, address=address)
    except ValueError as error:
        ledger.close()
        fail(str(error))
    console.print(f"[bold]gridmix run[/] {study.track} {study.grid}: models {', '.join(study.models)}; budget "
                  f"{study.budget.name} ({study.budget.seeds} seeds, lrs {study.budget.lrs}); {study.device} "
                  f"{study.precision}, "
                  f"{study.threads} thread(s); data {study.data['hash']}; ledger {ledger.path}", highlight=False)
    try:
        with _progress() as progress:
            outcome = pipeline.run_study(planned, ledger, chosen_executor, out, callbacks=_callbacks(progress, study))
    except KeyboardInterrupt:
        console.print(f"interrupted: the finished runs are saved in {ledger.path}; re-run the same command to "
                      "resume where it stopped", highlight=False)
        raise typer.Exit(130) from None
    except (OSError, sqlite3.Error) as error:
        fail(storage_error(error, out))
    report = outcome.report
    Console(width=None if sys.stdout.isatty() else 140).print(results_table(report))
    console.print(f"verdict: [bold]{report.verdict}[/]; report: {outcome.paths[1]} ({outcome.seconds:.0f} s)",
                  highlight=False)
    errors = analysis_errors(report)
    for line in errors:
        console.print(f"[red]{escape(line)}[/]", highlight=False)
    if errors:
        raise typer.Exit(1)


def print_note(message: str) -> None:
    """A note of the pipeline (a model skipped, an underpowered run, the parity match), its head in yellow."""
    head, sep, rest = message.partition(": ")
    console.print(f"[yellow]{escape(head + sep.rstrip())}[/]{' ' if sep else ''}{escape(rest)}", highlight=False)


def _callbacks(progress: Progress, study):
    """The pipeline's callbacks drawing ``progress``: a bar over all runs, one for the current run's epochs."""
    from gridmix.study.pipeline import Callbacks

    overall = progress.add_task("runs", total=0)
    current = progress.add_task("current run", total=study.budget.epochs, visible=False)
    analysis = progress.add_task("", total=None, visible=False)

    def plan(n):
        progress.update(overall, total=(progress.tasks[overall].total or 0) + n)

    def start(task):
        progress.update(current, description=task.label, completed=0, visible=True)

    def epoch(task, epoch, loss, val):
        progress.update(current, completed=epoch + 1, description=f"{task.label} val={val:.4g}")

    def done(task, row):
        progress.advance(overall)
        if not console.is_terminal:  # a log file: one plain line per finished run
            console.print(run_line(task, row, study.metric_name), highlight=False, markup=False)
        elif row.status != "ok":
            progress.console.print(f"[yellow]{escape(task.label)}: {row.status}[/] {escape(row.error)}",
                                   highlight=False)

    def analyse(name):
        progress.update(current, visible=False)
        progress.update(analysis, description=name, visible=name != "references")

    return Callbacks(note=print_note, plan=plan, start=start, epoch=epoch, done=done, analysis=analyse)


def run_line(task, row, metric_name: str) -> str:
    """One finished run as a plain log line: model, learning rate, seed, status, metrics, seconds."""
    line = (f"done {task.label}: {row.status}, val {fmt(row.val_metric)}, {metric_name} {fmt(row.test_metric)}, "
            f"{row.wall_s:.1f} s")
    return line + (f"; {row.error}" if row.error else "")


def _progress() -> Progress:
    """Live bars on a terminal; elsewhere (a pipe, a log file) none: ``done`` prints a line per run."""
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, disable=not console.is_terminal)


def analysis_errors(report: Report) -> list[str]:
    """What went wrong in the study itself (never that the idea lost): failed runs and failed analyses."""
    errors = [f"run {f.model} lr={f.lr:g} seed={f.seed} failed: {f.error}"
              for f in report.failures if f.status == "failed"]
    errors += [f"{name} analysis failed: {report.analyses[name]['error']}" for name in ("parity", "scaling")
               if isinstance(report.analyses.get(name), dict) and "error" in report.analyses[name]]
    return errors


@app.command("report")
def report(directory: Path = typer.Argument(..., help="An output directory of `gridmix run`.")) -> None:
    """Re-render bench_report.json, report.md and the plots from a run directory's ledger."""
    from gridmix.report.build import build_report, write_report
    from gridmix.study.ledger import Ledger

    try:
        with Ledger(directory, create=False, lock=True) as ledger:
            rebuilt = build_report(ledger)
            paths = write_report(rebuilt, directory)
    except ValueError as error:
        fail(str(error))
    except (OSError, sqlite3.Error) as error:
        fail(storage_error(error, directory))
    Console(width=None if sys.stdout.isatty() else 140).print(results_table(rebuilt))
    console.print(f"wrote {', '.join(str(p) for p in paths)}", highlight=False)
