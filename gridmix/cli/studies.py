"""``gridmix budgets``, ``gridmix runs``, ``gridmix status`` and ``gridmix export``: what a budget
spends, the studies under a directory, how far one study is (and which process runs it), and its
per-seed results as CSV.

``budgets`` without ``--track`` and every ``--help`` need no torch; the others import the study's
modules when they run."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import sqlite3
import sys
from datetime import datetime
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from gridmix.cli.app import app, console, fail
from gridmix.cli.tables import Column, TextTable
from gridmix.core.files import write_atomic
from gridmix.report.format import fmt
from gridmix.tracks.budget import BUDGETS

BUDGET_FIELDS = (
    "seeds",
    "sweep_seeds",
    "lrs",
    "epochs",
    "patience",
    "batch_size",
    "n_train",
    "n_val",
    "n_test",
    "weight_decay",
    "warmup_frac",
    "exploratory",
)


def _cell(value) -> str:
    if isinstance(value, tuple):
        return ", ".join(f"{v:g}" for v in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return fmt(value)


@app.command("budgets")
def budgets(
    track: str = typer.Option(
        None,
        help="Show the budgets as this track runs them, its changes marked * "
        "(default: the built-in budgets).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON, not a table."),
) -> None:
    """What each budget spends: seeds, sweep seeds, learning rates, epochs, batch, split sizes,
    regularisation."""
    if track is None:
        chosen, title, owner = (
            dict(BUDGETS),
            "gridmix budgets (built in; a track may change them)",
            None,
        )
    else:
        from gridmix.tracks.plugin_loader import load_registry

        try:
            owner = load_registry().track(track)
        except ValueError as error:
            fail(str(error))
        chosen, title = (
            {name: owner.budget(name) for name in BUDGETS},
            f"budgets of track {owner.name}",
        )
    if as_json:
        typer.echo(
            json.dumps(
                {name: dataclasses.asdict(budget) for name, budget in chosen.items()}, indent=2
            )
        )
        return
    rows = []
    for name, budget in chosen.items():
        changed = set(owner.budget_overrides.get(name, {})) if owner is not None else set()
        rows.append(
            (
                name,
                *(_cell(getattr(budget, f)) + ("*" if f in changed else "") for f in BUDGET_FIELDS),
            )
        )
    caption = (
        "seeds: paired comparison seeds 0 … seeds − 1; sweep_seeds: seeds of their own (1000, …) "
        "that choose the learning rate; patience: early stopping (– : none, train every epoch); "
        "exploratory: a plumbing check whose seeds are too few for a verdict. `gridmix run` "
        "changes seeds, lrs, epochs and n_train with --seeds, --lrs, --epochs and --n-train"
        + ("; *: changed by the track" if owner is not None else "")
    )
    TextTable(
        title=title,
        caption=caption,
        rows=rows,
        columns=(Column("budget", "name"), *(Column(f, "number") for f in BUDGET_FIELDS)),
    ).print(Console())


def _study_line(spec: dict) -> tuple[str, str, str]:
    budget = spec.get("budget") or {}
    changed = spec.get("overrides") or {}
    name = budget.get("name", "?") + (
        f" ({', '.join(f'{k} {_cell(v)}' for k, v in changed.items())})" if changed else ""
    )
    return spec.get("track", "?"), spec.get("grid", "?"), name


@app.command("runs")
def runs(
    directory: Path = typer.Argument(
        Path("runs"), help="Where to look for studies (every folder below it holding a ledger)."
    ),
) -> None:
    """List the studies under a directory: track, grid, budget, verdict, runs in the ledger, when
    last written."""
    from gridmix.study.ledger import Ledger, find_ledgers, lock_holder

    if not directory.exists():
        fail(
            f"there is no folder {directory}: no study was run here yet (`gridmix run` writes "
            "each into runs/TRACK-GRID-BUDGET unless --out says where); name the folder holding "
            "yours: gridmix runs DIR"
        )
    if not directory.is_dir():
        fail(f"{directory} is a file; expected a folder holding `gridmix run` output folders")
    rows = []
    for out in find_ledgers(directory):
        try:
            with Ledger(out, create=False) as ledger:
                spec, count = ledger.study(), len(ledger.rows())
        except (ValueError, OSError, sqlite3.Error) as error:
            rows.append((escape(str(out)), "–", "–", "–", escape(f"unreadable: {error}"), "–", "–"))
            continue
        if spec is None:
            continue
        verdict = _verdict(out)
        holder = lock_holder(out)
        if holder is not None:
            verdict = f"running (pid {holder})"
        when = datetime.fromtimestamp((out / "ledger.sqlite").stat().st_mtime).strftime(
            "%Y-%m-%d %H:%M"
        )
        track, grid, budget = _study_line(spec)
        rows.append(
            (
                escape(str(out)),
                escape(track),
                grid,
                escape(budget),
                escape(verdict),
                fmt(count),
                when,
            )
        )
    if not rows:
        console.print(
            f"no study under {escape(str(directory))} (no ledger.sqlite below it)", highlight=False
        )
        return
    TextTable(
        title=f"studies under {directory}",
        rows=rows,
        columns=(
            Column("directory", "name"),
            Column("track", "name"),
            Column("grid", "name"),
            Column("budget"),
            Column("verdict"),
            Column("runs", "number"),
            Column("when", "name"),
        ),
        caption="verdict: the primary comparison's, from the last report written "
        "(bench_report.json); runs: rows in the ledger; when: the ledger's last write",
    ).print(Console())


def _verdict(out: Path) -> str:
    try:
        return json.loads((out / "bench_report.json").read_text())["comparison"]["verdict"]
    except FileNotFoundError:
        return "– (no report yet)"
    except (OSError, ValueError, KeyError, TypeError):
        return "– (unreadable report)"


def _open_study(directory: Path):
    """The ledger of ``directory``, opened read-only in spirit (no lock, nothing created); exits 2
    when there is none."""
    from gridmix.study.ledger import Ledger

    try:
        return Ledger(directory, create=False)
    except (ValueError, OSError, sqlite3.Error) as error:
        fail(str(error))


@app.command("status")
def status(
    directory: Path = typer.Argument(..., help="An output directory of `gridmix run`."),
) -> None:
    """How far a study is: per phase the runs done, failed and still to run, and the process running
    it (its pid)."""
    from gridmix.study.ledger import lock_holder
    from gridmix.study.spec import (
        Study,
        comparison_phase_purpose,
        study_progress,
        sweep_phase_purpose,
    )
    from gridmix.tracks.budget import describe

    with _open_study(directory) as ledger:
        spec = ledger.study()
        if spec is None:
            fail(f"the ledger in {directory} holds no study yet; `gridmix run` writes it")
        try:
            study = Study.from_dict(spec)
        except (KeyError, TypeError) as error:
            fail(
                f"the study spec in {directory} is incomplete or foreign ({type(error).__name__}: "
                f"{error})"
            )
        progress = study_progress(study, {row.key: row for row in ledger.rows()})
    out = Console(soft_wrap=True)
    track, grid, budget = _study_line(spec)
    out.print(
        f"{track} {grid}: models {', '.join(study.models)}; budget {budget}: "
        f"{describe(study.budget)}",
        highlight=False,
        markup=False,
    )
    purposes = {
        "sweep": sweep_phase_purpose(study) if study.sweep_seeds else "one learning rate: none",
        "comparison": comparison_phase_purpose(study),
    }
    for name, counts in progress.items():
        parts = [
            f"{counts[key]} {word}"
            for key, word in (
                ("ok", "done"),
                ("diverged", "diverged"),
                ("failed", "failed"),
                ("missing", "to run"),
            )
            if counts[key]
        ]
        out.print(
            f"{name} ({purposes[name]}): {counts['planned']} runs"
            + (f": {', '.join(parts)}" if parts else ""),
            highlight=False,
            markup=False,
        )
    done = sum(c["ok"] + c["diverged"] for c in progress.values())
    total = sum(c["planned"] for c in progress.values())
    failed = sum(c["failed"] for c in progress.values())
    holder = lock_holder(directory)
    running = (
        f"running: pid {holder} holds the lock"
        if holder not in (None, -1)
        else "running: a process holds the lock (its pid is unreadable)"
        if holder == -1
        else "not running: no process holds the lock"
    )
    out.print(
        f"{done} of {total} runs done, {failed} failed; {running}", highlight=False, markup=False
    )


@app.command("export")
def export(
    directory: Path = typer.Argument(..., help="An output directory of `gridmix run`."),
    as_csv: bool = typer.Option(
        True,
        "--csv/--json",
        help="CSV (one header line, one line per run) or JSON (a list of objects).",
    ),
    out: Path = typer.Option(
        None, help="Where to write, '-' for stdout (default: DIR/results.csv or DIR/results.json)."
    ),
) -> None:
    """Write a study's per-seed results (every run: phase, model, role, lr, seed, status, metrics,
    seconds)."""
    from gridmix.report.export import COLUMNS, export_rows

    with _open_study(directory) as ledger:
        try:
            _, rows = export_rows(ledger)
        except ValueError as error:
            fail(str(error))
    if as_csv:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: ("" if v is None else v) for k, v in row.items()} for row in rows)
        text = buffer.getvalue()
    else:
        text = json.dumps(rows, indent=2) + "\n"
    if out is not None and str(out) == "-":
        sys.stdout.write(text)
        return
    target = out or directory / ("results.csv" if as_csv else "results.json")
    try:
        write_atomic(target, text)
    except OSError as error:
        fail(f"{target}: {error.strerror or error} ({type(error).__name__})")
    console.print(f"wrote {len(rows)} runs to {escape(str(target))}", highlight=False)
