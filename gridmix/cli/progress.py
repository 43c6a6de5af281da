"""What ``gridmix run`` and ``gridmix sweep`` share around the front door (:func:`gridmix.run`,
:func:`gridmix.sweep`): :func:`drive` calls it with a live progress display (:class:`StudyProgress`)
and turns what it raises into the command line's conventions (one line and exit status 2 for a user
mistake or a storage error; the resume line and 128 + the signal's number when a signal stops the
runs; docs/guide.md, "Exit status").
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from gridmix.cli.app import console, fail
from gridmix.core.interrupt import Interrupted
from gridmix.orchestrate.callbacks import Callbacks
from gridmix.report.format import fmt


def print_note(message: str) -> None:
    """A note of the study's planning (a model skipped, an underpowered run, the parity match), its
    head in yellow."""
    head, sep, rest = message.partition(": ")
    console.print(
        f"[yellow]{escape(head + sep.rstrip())}[/]{' ' if sep else ''}{escape(rest)}",
        highlight=False,
    )


def run_line(task, row, metric_name: str) -> str:
    """One finished run as a plain log line: model, learning rate, seed, status, metrics,
    seconds."""
    line = (
        f"done {task.label}: {row.status}, val {fmt(row.val_metric)}, {metric_name} "
        f"{fmt(row.test_metric)}, {fmt(row.wall_s)} s"
    )
    return line + (f"; {row.error}" if row.error else "")


def stop_interrupted(error: KeyboardInterrupt, ledger: Path) -> NoReturn:
    """End a command that SIGINT, SIGTERM or SIGHUP stopped (:mod:`gridmix.core.interrupt`): one
    line saying so and how to resume, exit status 128 + the signal's number (130 for Ctrl-C)."""
    name, status = (error.name, error.status) if isinstance(error, Interrupted) else ("SIGINT", 130)
    console.print(
        f"interrupted by {name}: the finished runs are saved in {ledger}; re-run the same command "
        "to resume where it stopped",
        highlight=False,
    )
    raise typer.Exit(status) from None


class StudyProgress:
    """A study's (or a sweep's) progress on the console: ``header(planned, ledger)`` once it begins,
    then a bar over all runs (with the time left once a run has finished: :mod:`gridmix.study.eta`)
    and one for the current run's epochs on a terminal; elsewhere (a pipe, a log file) a plain line
    per finished run. Keeps the ledger's path (``ledger``, once begun) and the finished study's
    ``outcome``."""

    def __init__(self, header: Callable[[object, object], None]) -> None:
        self.header, self.ledger, self.outcome = header, None, None
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=not console.is_terminal,
        )

    def __enter__(self) -> StudyProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.__exit__(*exc)

    def callbacks(self) -> Callbacks:
        """The front door's callbacks drawing this display."""
        return Callbacks(
            note=print_note,
            begin=self.begin,
            point=self.point,
            plan=self.plan,
            start=self.start,
            epoch=self.epoch,
            done=self.done,
            analysis=self.analyse,
            phase=self.phase,
            resume=self.resume,
            finished=self.finished,
        )

    def begin(self, planned, ledger) -> None:
        from gridmix.study.eta import RunClock
        from gridmix.study.spec import pending_models

        self.header(planned, ledger)
        self.ledger, self.metric = ledger.path, planned.studies[0].metric_name
        rows, studies = {row.key: row for row in ledger.rows()}, planned.studies
        self.pending = [model for each in studies for model in pending_models(each, rows)]
        self.clock = RunClock(jobs=planned.jobs)
        models = {model for each in studies for model in each.models}
        # the studies' runs resumed from the ledger count with their recorded times
        for row in rows.values():
            if row.model in models and row.status != "failed":
                self.clock.record(row.model, row.wall_s)
        self.overall = self.progress.add_task("runs", total=0)
        self.current = self.progress.add_task(
            "current run", total=studies[0].budget.epochs, visible=False
        )
        self.analysis = self.progress.add_task("", total=None, visible=False)

    def point(self, point) -> None:
        console.print(f"point {point.label}", highlight=False, markup=False)

    def plan(self, n: int) -> None:
        self.progress.update(self.overall, total=(self.progress.tasks[self.overall].total or 0) + n)

    def start(self, task) -> None:
        self.progress.update(self.current, description=task.label, completed=0, visible=True)

    def epoch(self, task, epoch: int, loss: float, val: float) -> None:
        self.progress.update(
            self.current, completed=epoch + 1, description=f"{task.label} val={fmt(val)}"
        )

    def done(self, task, row) -> None:
        from gridmix.study.eta import time_left

        self.clock.record(task.model, row.wall_s)
        if task.model in self.pending:
            self.pending.remove(task.model)
        left = self.clock.remaining_s(self.pending)
        estimate = time_left(left) if left is not None and self.pending else ""
        if estimate and (untimed := self.clock.untimed(self.pending)):
            estimate += f" ({', '.join(untimed)} not timed yet: counted at the median run so far)"
        self.progress.update(self.overall, description=f"runs ({estimate})" if estimate else "runs")
        self.progress.advance(self.overall)
        if not console.is_terminal:  # a log file: one plain line per finished run
            line = run_line(task, row, self.metric) + (f"; {estimate}" if estimate else "")
            console.print(line, highlight=False, markup=False)
        elif row.status != "ok":
            self.progress.console.print(
                f"[yellow]{escape(task.label)}: {row.status}[/] {escape(row.error)}",
                highlight=False,
            )

    def analyse(self, name: str) -> None:
        self.progress.update(self.current, visible=False)
        self.progress.update(self.analysis, description=name, visible=name != "references")

    def phase(self, phase) -> None:
        self.progress.console.print(str(phase), highlight=False, markup=False)

    def resume(self, done: int, total: int) -> None:
        self.progress.console.print(
            f"{done} of {total} runs already in the ledger", highlight=False, markup=False
        )

    def finished(self, outcome) -> None:
        self.outcome = outcome


def drive(front_door: Callable, header: Callable[[object, object], None], arguments: dict):
    """Call ``front_door`` (:func:`gridmix.run` or :func:`gridmix.sweep`) once with ``arguments``
    and a :class:`StudyProgress` (``header`` printed as it begins); its outcome (the report, the
    files, the seconds)."""
    from gridmix.orchestrate.front_door import StorageError

    display = StudyProgress(header)
    try:
        with display:
            front_door(callbacks=display.callbacks(), **arguments)
    except (ValueError, StorageError) as error:
        fail(str(error))
    except KeyboardInterrupt as error:
        if display.ledger is None:  # stopped before the ledger opened: nothing to resume
            raise
        stop_interrupted(error, display.ledger)
    return display.outcome
