"""``gridmix run`` and ``gridmix report``: the paired-seed comparison and its re-rendering.

``gridmix run --track image --grid 32x32`` trains the idea model and its baselines over paired seeds
with a learning-rate sweep (:mod:`gridmix.harness`), writes every finished run to the ledger in
``--out`` (re-running resumes), measures parity and scaling, and writes the report.
``gridmix report DIR`` rebuilds the report from the ledger alone.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gridmix.cli.app import BudgetName, DeviceName, ExecutorName, app, console, fail
from gridmix.report_format import fmt
from gridmix.report_types import Report


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
        from gridmix.plugins import load_registry

        load_registry(refresh=True)  # the plugins read the variables when the registry is built


def make_executor(executor: ExecutorName, *, jobs: int, address: str | None):
    """The executor ``--executor`` names, handing every run the idea's mechanism analysis after training."""
    from gridmix.analysis.mechanism import idea_mechanism
    from gridmix.executors import InProcessExecutor, WorkerPoolExecutor

    if executor is ExecutorName.local:
        if jobs == 1:
            return InProcessExecutor(after_training=idea_mechanism)
        return WorkerPoolExecutor(jobs, after_training=idea_mechanism)
    try:
        from gridmix.executors_ray import RayExecutor
    except ImportError as error:
        fail(f"--executor ray needs Ray: pip install 'gridmix[ray]' ({error})")
    return RayExecutor(address=address, after_training=idea_mechanism)


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
    fresh: bool = typer.Option(False, "--fresh", help="Start a fresh study in --out even if it holds results on "
                                                      "other data (they are kept, but no longer reported)."),
    data: Path = typer.Option(None, help="The data of image-folder (a folder) or sequence-csv (a CSV file)."),
    data_root: Path = typer.Option(None, help="Root holding torchvision data sets (mnist, cifar10, ...)."),
    download: bool = typer.Option(False, help="Let torchvision download a missing data set into --data-root."),
) -> None:
    """Compare the idea model with its baselines on a track: paired seeds, LR sweep, exact statistics."""
    set_data_env(track, data=data, data_root=data_root, download=download)
    from gridmix.budget import resolve_budget
    from gridmix.harness import Study, aa_study
    from gridmix.plugins import load_registry
    from gridmix.precision import resolve_precision
    from gridmix.store import Ledger
    from gridmix.train import resolve_device

    try:
        registry = load_registry()
        chosen_track = registry.track(track)
        chosen_grid = chosen_track.check_grid(grid if grid is not None else chosen_track.default_grid)
        chosen_budget = resolve_budget(budget.value, chosen_track, seeds=seeds,
                                       lrs=parse_floats(lrs, "--lrs") if lrs else None)
        resolved_device = resolve_device(device.value).type
        resolved_precision = resolve_precision(precision, resolved_device)
    except ValueError as error:
        fail(str(error))
    check_power(chosen_budget, underpowered=underpowered)
    names = _choose_models(chosen_track, chosen_grid, models)
    run_threads = threads or max(1, (os.cpu_count() or 1) // jobs)
    knobs = _match_knobs(chosen_track, chosen_grid, match_params) if match_params else {}
    study = Study(track=chosen_track.name, grid=str(chosen_grid), models=names, idea=chosen_track.idea.name,
                  matched_baseline=chosen_track.matched_baseline, metric_name=chosen_track.metric_name,
                  direction=chosen_track.direction, budget=chosen_budget, device=resolved_device,
                  threads=run_threads, knobs=knobs, precision=resolved_precision,
                  data=_fingerprint(chosen_track, chosen_grid, chosen_budget),
                  roles={name: chosen_track.model(name).role for name in names}, chance=chosen_track.chance,
                  ceiling=chosen_track.ceiling, fixed_split=chosen_track.fixed_split,
                  underpowered=underpowered and not chosen_budget.exploratory)
    if aa:
        study = aa_study(study)
        scaling = False  # the copy costs what its original does: nothing to measure
    out = out or Path("runs") / f"{study.track}-{study.grid}-{chosen_budget.name}{'-aa' if aa else ''}"
    ledger = None
    try:
        ledger = Ledger(out, lock=True)
        if fresh:
            ledger.start_fresh()
        ledger.set_study(study.to_dict())
    except (ValueError, OSError, sqlite3.Error) as error:
        if ledger is not None:
            ledger.close()
        fail(str(error) if isinstance(error, ValueError) else storage_error(error, out))
    chosen_executor = make_executor(executor, jobs=jobs, address=address)
    console.print(f"[bold]gridmix run[/] {study.track} {study.grid}: models {', '.join(names)}; budget "
                  f"{chosen_budget.name} ({chosen_budget.seeds} seeds, lrs {chosen_budget.lrs}); {resolved_device} "
                  f"{resolved_precision}, "
                  f"{run_threads} thread(s); data {study.data['hash']}; ledger {ledger.path}", highlight=False)
    try:
        report, paths, seconds = _run_study(study, ledger, chosen_executor, chosen_track, chosen_grid, knobs, out,
                                            scaling=scaling)
    except KeyboardInterrupt:
        console.print(f"interrupted: the finished runs are saved in {ledger.path}; re-run the same command to "
                      "resume where it stopped", highlight=False)
        raise typer.Exit(130) from None
    except (OSError, sqlite3.Error) as error:
        fail(storage_error(error, out))
    Console(width=None if sys.stdout.isatty() else 140).print(results_table(report))
    console.print(f"verdict: [bold]{report.verdict}[/]; report: {paths[1]} ({seconds:.0f} s)",
                  highlight=False)
    errors = analysis_errors(report)
    for line in errors:
        console.print(f"[red]{escape(line)}[/]", highlight=False)
    if errors:
        raise typer.Exit(1)


def check_power(budget, *, underpowered: bool) -> None:
    """Refuse, before any training, seeds with which the primary comparison can never reach α."""
    from gridmix.analysis.stats import min_attainable_p, seeds_needed
    from gridmix.report import ALPHA

    floor = min_attainable_p(budget.seeds)
    if floor < ALPHA or budget.exploratory:
        return
    needed = seeds_needed(ALPHA)
    if not underpowered:
        fail(f"with {budget.seeds} seeds the primary comparison cannot reach α = {ALPHA:g} (the exact sign-flip "
             f"test's smallest p is 2/2^{budget.seeds} = {floor:.3g}); it needs at least {needed} seeds: pass "
             f"--seeds {needed}, or --underpowered to run anyway")
    console.print(f"[yellow]--underpowered:[/] {budget.seeds} seeds cannot reach α = {ALPHA:g} (needs {needed}); "
                  "the report says so", highlight=False)


def _fingerprint(track, grid, budget) -> dict:
    """The study's data fingerprint; building the data here surfaces a plugin's data error before any run."""
    from gridmix.fingerprint import data_fingerprint

    try:
        return data_fingerprint(track, grid, budget.sizes)
    except Exception as error:  # the plugin's own message, in one line, at the command that needs the data
        message = str(error).strip().splitlines()[0] if str(error).strip() else ""
        fail(f"track {track.name!r} (plugin {track.plugin!r}) could not build its data on grid {grid}: "
             f"{type(error).__name__}: {message}")


def _run_study(study, ledger, chosen_executor, chosen_track, chosen_grid, knobs, out, *, scaling: bool):
    """Train what the ledger lacks, measure the analyses, write the report: (report, paths, seconds)."""
    from gridmix.harness import Runner
    from gridmix.report import build_report, write_report

    chosen_budget, started = study.budget, time.perf_counter()
    with ledger, _progress() as progress:
        overall = progress.add_task("runs", total=0)
        current = progress.add_task("current run", total=chosen_budget.epochs, visible=False)

        def on_plan(n):
            progress.update(overall, total=(progress.tasks[overall].total or 0) + n)

        def on_start(task):
            progress.update(current, description=task.label, completed=0, visible=True)

        def on_epoch(task, epoch, loss, val):
            progress.update(current, completed=epoch + 1, description=f"{task.label} val={val:.4g}")

        def on_done(task, row):
            progress.advance(overall)
            if not console.is_terminal:  # a log file: one plain line per finished run
                console.print(run_line(task, row, study.metric_name), highlight=False, markup=False)
            elif row.status != "ok":
                progress.console.print(f"[yellow]{escape(task.label)}: {row.status}[/] {escape(row.error)}",
                                       highlight=False)

        Runner(study, ledger, chosen_executor, on_plan=on_plan, on_start=on_start, on_epoch=on_epoch,
               on_done=on_done).run()
        progress.update(current, visible=False)
        _store_references(ledger, chosen_track, chosen_grid, chosen_budget)
        if scaling:
            _store_analyses(ledger, chosen_track, chosen_grid, study.models, chosen_budget, knobs, progress)
        report = build_report(ledger)
        paths = write_report(report, out)
    return report, paths, time.perf_counter() - started


def run_line(task, row, metric_name: str) -> str:
    """One finished run as a plain log line: model, learning rate, seed, status, metrics, seconds."""
    line = (f"done {task.label}: {row.status}, val {fmt(row.val_metric)}, {metric_name} {fmt(row.test_metric)}, "
            f"{row.wall_s:.1f} s")
    return line + (f"; {row.error}" if row.error else "")


def _match_knobs(track, grid, baseline: str) -> dict[str, dict]:
    """The idea's width knob set so its parameter count matches ``baseline``'s (within 2%)."""
    from gridmix.analysis.parity import count_parameters, match_parameters

    try:
        spec = track.model(baseline)
        target = count_parameters(spec.build(grid))
        match = match_parameters(track.idea, grid, target)
    except ValueError as error:
        fail(str(error))
    console.print(f"parity: {track.idea.name} {match.knob}={match.value:.4g} gives {match.params} parameters, "
                  f"{match.rel_error:.1%} off {baseline}'s {target}", highlight=False)
    return {track.idea.name: {match.knob: match.value}}


def _choose_models(track, grid, models: str | None) -> tuple[str, ...]:
    if models:
        names = [m.strip() for m in models.split(",") if m.strip()]
        for name in names:
            try:
                track.model(name)
            except ValueError as error:
                fail(str(error))
        if track.idea.name not in names:
            names.insert(0, track.idea.name)
        if len(names) < 2:
            fail(f"--models {models!r} leaves no baseline to compare with; track {track.name!r} offers "
                 f"{[m.name for m in track.baselines]}")
    else:
        names = list(track.default_models) or [m.name for m in track.models]
        if track.idea.name not in names:
            names.insert(0, track.idea.name)
    kept = []
    for name in names:
        reason = track.model(name).supports(grid)
        if reason:
            console.print(f"[yellow]skipping {name} on {grid}:[/] {reason}", highlight=False)
        else:
            kept.append(name)
    return tuple(kept)


def _progress() -> Progress:
    """Live bars on a terminal; elsewhere (a pipe, a log file) none: ``on_done`` prints a line per run."""
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, disable=not console.is_terminal)


def _store_analyses(ledger, track, grid, names, budget, knobs, progress) -> None:
    """Parity and scaling, measured once per study and kept in the ledger for `gridmix report`.

    A failing analysis is stored as ``{"error": …}`` and reported; the study's results are kept.
    """
    from gridmix.analysis.parity import parity_report
    from gridmix.analysis.scaling import ScalingConfig, scale_track, scaling_grids

    stored = ledger.fetch("analyses")
    if stored is not None and stored.get("parity", {}).get("knobs") == knobs:
        return  # measured by an earlier run of this study (a resumed sweep measures nothing twice)
    smoke = budget.name == "smoke"
    grids = [g for g in scaling_grids(grid, count=2 if smoke else 3) if track.supports(g) is None]
    config = ScalingConfig(repeats=2 if smoke else 3, warmup=1)
    task = progress.add_task("parity and scaling", total=None)
    analyses = {}
    for name, measure in (("parity", lambda: parity_report(track, grid, models=names, knobs=knobs)),
                          ("scaling", lambda: scale_track(track, grids, models=names, config=config).to_dict())):
        try:
            analyses[name] = measure()
        except Exception as error:  # recorded and reported; the finished runs stay valid
            analyses[name] = {"error": f"{type(error).__name__}: {error}"}
    ledger.put("analyses", analyses)
    progress.update(task, visible=False)


def _store_references(ledger, track, grid, budget) -> None:
    """The naive references (majority class, persistence, seasonal naive) on the test split, kept in the ledger."""
    from gridmix.analysis.references import naive_references

    try:
        ledger.put("references", naive_references(track, grid, budget.sizes))
    except Exception as error:  # recorded; the finished runs stay valid
        ledger.put("references", {"kind": "none", "values": {}, "error": f"{type(error).__name__}: {error}"})


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
    from gridmix.report import build_report, write_report
    from gridmix.store import Ledger

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
