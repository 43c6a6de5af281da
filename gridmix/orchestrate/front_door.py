"""The front door: :func:`run` (``gridmix.run``, what ``gridmix run`` does) and :func:`sweep`
(``gridmix.sweep``, what ``gridmix sweep`` does), each plan → ledger → executor → runs → report, in
one place for Python and the command line alike.

Both return the report and tell their progress through
:class:`~gridmix.orchestrate.callbacks.Callbacks`. What can go wrong is said the same way for every
caller: a user mistake is a ``ValueError`` in one line (before any training where it can be);
SIGINT, SIGTERM and SIGHUP while the runs go on raise :class:`gridmix.core.interrupt.Interrupted`
once the workers are ended and the finished runs kept (re-running resumes); a file system or SQLite
error on the ledger or the report is a :class:`StorageError` naming the path.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from gridmix.core.interrupt import stop_on_signals
from gridmix.orchestrate.callbacks import QUIET, Callbacks
from gridmix.orchestrate.execute import make_executor, open_ledger, run_study
from gridmix.orchestrate.plan import plan_study
from gridmix.orchestrate.sweeping import open_sweep_ledger, plan_sweep, run_sweep
from gridmix.report.sweep_report import SweepReport
from gridmix.report.types import Report
from gridmix.study.executors import refuse_main_rerun


class StorageError(OSError):
    """The file system or SQLite refused the ledger or the report; the message is one line naming
    the path."""


def storage_error(error: OSError | sqlite3.Error, path: Path) -> str:
    """One line naming the path an ``OSError`` or SQLite error is about."""
    if isinstance(error, OSError):
        where = error.filename if error.filename is not None else path
        return f"{where}: {error.strerror or error} ({type(error).__name__})"
    return f"{path}: SQLite error: {error}"


@contextlib.contextmanager
def _storage_errors(out: Path) -> Iterator[None]:
    """Within the block, an ``OSError`` or ``sqlite3.Error`` becomes a :class:`StorageError` in one
    line."""
    try:
        yield
    except StorageError:
        raise
    except (OSError, sqlite3.Error) as error:
        raise StorageError(storage_error(error, out)) from error


def _drive(
    planner: Callable,
    opener: Callable,
    runner: Callable,
    track: str,
    first,
    *,
    out: str | Path | None = None,
    fresh: bool = False,
    executor: str = "local",
    address: str | None = None,
    callbacks: Callbacks = QUIET,
    **options,
):
    """Plan ``track`` with ``planner(track, first, **options)`` (an unguarded main module refused
    first), open its ledger in ``out`` (``None``: the plan's default; ``fresh`` starts afresh there)
    with ``opener``, make the ``executor`` (``local`` or ``ray`` at ``address``) and run it with
    ``runner``, signals stopping the runs, ``callbacks`` told the progress; the report."""
    refuse_main_rerun()
    planned = planner(track, first, note=callbacks.note, **options)
    out = Path(out) if out is not None else planned.default_out
    with _storage_errors(out):
        ledger = opener(out, planned, fresh=fresh)
        try:
            chosen = make_executor(executor, jobs=planned.jobs, address=address)
        except BaseException:
            ledger.close()
            raise
        with stop_on_signals():
            return runner(planned, ledger, chosen, out, callbacks=callbacks).report


def run(track: str = "image", grid: str | None = None, **options) -> Report:
    """A paired-seed study, as ``gridmix run`` runs it: planned by
    :func:`~gridmix.orchestrate.plan.plan_study` with ``options`` (its keyword arguments:
    ``budget``, ``seeds``, ``models``, ``idea``, ``scaling``, ``jobs``, ``threads``, …), trained
    into the ledger in ``out`` (default ``runs/TRACK-GRID-BUDGET``; ``fresh=True`` starts afresh
    there) by the ``executor`` (``"local"``, the default, or ``"ray"`` at ``address``), its
    progress told to ``callbacks`` (default: none), its report written there and returned. A worker
    process importing an unguarded main module that calls it exits at once, and the caller gets a
    ``RuntimeError`` saying so (docs/guide.md "From Python")."""
    return _drive(plan_study, open_ledger, run_study, track, grid, **options)


def sweep(
    track: str = "mqar", over: Sequence[tuple[str, Sequence[object]]] = (), **options
) -> SweepReport:
    """One study per point of ``over`` (``[("grid", ["8", "16"]), ("dim", [4, 8])]``: the swept
    names, ``grid`` or the track's settings, with their values), as ``gridmix sweep`` runs it:
    planned by :func:`~gridmix.orchestrate.sweeping.plan_sweep` with ``options`` (``grid``,
    ``settings`` and :func:`~gridmix.orchestrate.plan.plan_study`'s), all in one ledger in ``out``
    (default ``runs/TRACK-sweep-NAMES-BUDGET``), the sweep's report written there and returned;
    ``fresh``, ``executor``, ``address``, ``callbacks`` and an unguarded main module are as for
    :func:`run`."""
    return _drive(plan_sweep, open_sweep_ledger, run_sweep, track, over, **options)
