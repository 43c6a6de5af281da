"""How a study reports its progress to whoever runs it: :class:`Callbacks`, a set of optional
functions that :func:`gridmix.run`, :func:`gridmix.sweep` and the steps below them call as the study
goes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gridmix.study.ledger import Ledger, RunRow
    from gridmix.study.spec import Phase, RunTask


def _ignore(*args) -> None:
    return None


@dataclass(frozen=True)
class Callbacks:
    """How a study reports its progress; every one is optional.

    ``note(message)``: a line worth showing (a model skipped on this grid, an underpowered run),
    also while the study is planned. ``begin(planned, ledger)``: the study (a
    :class:`~gridmix.orchestrate.plan.PlannedStudy`) or the sweep (a
    :class:`~gridmix.orchestrate.sweeping.PlannedSweep`) is planned, its ledger open and its
    executor made; no run has started. ``point(point)``: a sweep's point (its
    :class:`~gridmix.orchestrate.sweeping.PlannedPoint`) starts. ``resume(done, total)``: the ledger
    already holds ``done`` of the study's ``total`` runs (called once, only when it holds some).
    ``phase(phase)``: the sweep or the comparison starts (:class:`gridmix.study.spec.Phase`;
    ``str(phase)`` is its log line). ``plan(n)``: n more runs are planned. ``start(task)``,
    ``epoch(task, epoch, train_loss, val_metric)``, ``done(task, row)``: a run starts, finishes an
    epoch, is in the ledger. ``analysis(name)``: an analysis (``"references"``, ``"parity and
    scaling"``) starts. ``finished(outcome)``: the report is written (an
    :class:`~gridmix.orchestrate.execute.Outcome` or a
    :class:`~gridmix.orchestrate.sweeping.SweepOutcome`: the report, the files, the seconds since
    ``begin``).
    """

    note: Callable[[str], None] = _ignore
    begin: Callable[[Any, Ledger], None] = _ignore
    point: Callable[[Any], None] = _ignore
    resume: Callable[[int, int], None] = _ignore
    phase: Callable[[Phase], None] = _ignore
    plan: Callable[[int], None] = _ignore
    start: Callable[[RunTask], None] = _ignore
    epoch: Callable[[RunTask, int, float, float], None] = _ignore
    done: Callable[[RunTask, RunRow], None] = _ignore
    analysis: Callable[[str], None] = _ignore
    finished: Callable[[Any], None] = _ignore

    def run_hooks(self) -> dict[str, Callable]:
        """The callbacks every study's runs report to, as :class:`gridmix.study.harness.Runner`'s
        keyword arguments (``on_plan``, ``on_start``, ``on_epoch``, ``on_done``)."""
        return dict(on_plan=self.plan, on_start=self.start, on_epoch=self.epoch, on_done=self.done)


QUIET = Callbacks()  # no progress reported
