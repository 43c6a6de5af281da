"""Running a paired-seed study (docs/design.md section 5): :func:`execute` trains one
:class:`~gridmix.study.spec.RunTask` anywhere (in-process, a process pool, Ray) into its ledger row,
and :class:`Runner` takes a :class:`~gridmix.study.spec.Study` through its phases (the sweep, then
the comparison at each model's chosen rate), skipping the runs the ledger holds. What a study plans
(its tasks, seeds, chosen rates and progress) is :mod:`gridmix.study.spec`, which needs no torch.
"""

from __future__ import annotations

import dataclasses
import functools
import platform
from collections.abc import Callable
from typing import Protocol

import numpy as np
import torch

from gridmix.core.allocator import keep_freed_memory
from gridmix.core.grid import Grid
from gridmix.core.version import __version__
from gridmix.mixers.concentration.ops.native_build import cpu_facts, cpu_line
from gridmix.study.ledger import Ledger, RunRow
from gridmix.study.spec import (
    Phase,
    RunTask,
    Study,
    choose_learning_rates,
    comparison_phase_purpose,
    study_progress,
    sweep_phase_purpose,
)
from gridmix.study.train import resolve_device, train_run
from gridmix.tracks import DataSizes, ModelSpec, TrackData


class TaskExecutor(Protocol):
    """What :class:`Runner` needs of an executor (``study/executors.py``'s, which run each task
    through this module's :func:`execute`)."""

    def run(
        self,
        tasks: list[RunTask],
        *,
        on_done: Callable[[RunTask, RunRow], None],
        on_start: Callable[[RunTask], None] | None = None,
        on_epoch: Callable[[RunTask, int, float, float], None] | None = None,
    ) -> None: ...


def versions() -> dict:
    import timm

    return dict(
        gridmix=__version__,
        torch=torch.__version__,
        timm=timm.__version__,
        numpy=np.__version__,
        python=platform.python_version(),
    )


def track_data(task: RunTask, grid: str | None = None) -> TrackData:
    """The data of ``task``'s track (with its settings) on ``grid`` (default: the task's), for its
    seed and sizes."""
    return _track_data(
        task.track,
        grid or task.grid,
        task.seed,
        task.budget.sizes,
        task.data,
        tuple(sorted(task.settings.items())),
    )


@functools.lru_cache(maxsize=4)
def _track_data(
    track_name: str,
    grid: str,
    seed: int,
    sizes: DataSizes,
    fingerprint: str = "",
    settings: tuple = (),
) -> TrackData:
    """The track's data, cached per process; ``fingerprint`` keeps data of a changed source
    apart."""
    from gridmix.tracks.plugin_loader import load_registry, validate_data

    track = load_registry().track(track_name, dict(settings))
    data = track.make_data(Grid.parse(grid), seed, sizes)
    validate_data(track, data, Grid.parse(grid))
    return data


# what train_run takes from the task as it is, under the task's names
_TASK_TRAINING_FIELDS = (
    "lr",
    "seed",
    "init_seed",
    "budget",
    "model_kwargs",
    "precision",
    "stop_at",
    "compile",
)

# (spec, trained model, data) -> extras
AfterTraining = Callable[[ModelSpec, torch.nn.Module, TrackData], dict]


def lacks_transfer(task: RunTask, row: RunRow) -> bool:
    """Whether a finished row misses the evaluation at one of the task's ``eval_grids`` (a run from
    before they were asked for): it is run again, with the same numbers, to be evaluated there."""
    done = row.extras.get("transfer", {})
    return row.status == "ok" and any(grid not in done for grid in task.eval_grids)


def execute(
    task: RunTask,
    *,
    on_epoch: Callable[[int, float, float], None] | None = None,
    after_training: AfterTraining | None = None,
) -> RunRow:
    """Run one task where this process is (a worker, or the driver) and return its ledger row.

    ``after_training(spec, model, data)`` analyses every successfully trained model; what it returns
    joins the row's extras (``gridmix run`` hands in
    :func:`gridmix.analysis.idea_mechanism.idea_mechanism`). For a worker process it must be
    picklable: a module-level function. After it, a task with ``eval_grids`` tests the trained model
    on each of them (:func:`gridmix.study.transfer.evaluate_transfer`, the row's
    ``extras["transfer"]``).

    The process keeps freed memory for reuse from then on (:mod:`gridmix.core.allocator`; the row's
    ``extras["allocator"]`` says whether it could).
    """
    from gridmix.study.transfer import evaluate_transfer
    from gridmix.tracks.plugin_loader import load_registry

    torch.set_num_threads(task.threads)
    # freed activations kept for reuse, not mapped and page-faulted in afresh every step
    allocator = keep_freed_memory("reuse")
    error, result = "", None
    try:
        track = load_registry().track(task.track, task.settings)
        spec = track.model(task.spec_name)
        # the study's role (--idea), for the analysis after training
        if task.role and task.role != spec.role:
            spec = dataclasses.replace(spec, role=task.role)
        data = track_data(task)
    except Exception as exc:  # a broken plugin or bad data is this run's recorded failure
        error = f"{type(exc).__name__}: {exc}"
    if not error:

        def analyse(model: torch.nn.Module, data: TrackData) -> dict:
            extras = after_training(spec, model, data) if after_training else {}
            if task.eval_grids:
                extras = dict(
                    extras,
                    transfer=evaluate_transfer(
                        track,
                        spec,
                        model,
                        grid=task.grid,
                        eval_grids=task.eval_grids,
                        model_kwargs=task.model_kwargs,
                        data_at=lambda grid: track_data(task, grid),
                        batch_size=task.budget.batch_size * 2,
                        precision=task.precision,
                    ),
                )
            return extras

        result = train_run(
            track,
            spec,
            Grid.parse(task.grid),
            data=data,
            device=resolve_device(task.device),
            on_epoch=on_epoch,
            after_training=analyse,
            **{name: getattr(task, name) for name in _TASK_TRAINING_FIELDS},
        )
    if result is None:
        return task.failed_row(error, threads=torch.get_num_threads(), versions=versions())
    # the CPU its wall_s was measured on (the report's timings), and whether freed memory was reused
    result.extras["machine"] = cpu_line(cpu_facts())
    result.extras["allocator"] = allocator["mode"] if allocator["applied"] else "default"
    return task.row(result, threads=torch.get_num_threads(), versions=versions())


@dataclasses.dataclass(eq=False)
class Runner:
    """Drives a study through an executor, writing each finished run into the ledger at once.

    ``on_resume(done, total)`` (the ledger already holds ``done`` of the ``total`` runs, once, when
    it holds any), ``on_phase(phase)`` (a :class:`Phase` starts), ``on_plan(n)`` (n more runs are
    coming), ``on_start(task)``, ``on_epoch(task, epoch, loss, val)`` and ``on_done(task, row)`` let
    a front end draw progress; ``run`` returns the chosen learning rates.
    """

    study: Study
    ledger: Ledger
    executor: TaskExecutor
    _: dataclasses.KW_ONLY
    on_plan: Callable[[int], None] | None = None
    on_start: Callable[[RunTask], None] | None = None
    on_epoch: Callable[[RunTask, int, float, float], None] | None = None
    on_done: Callable[[RunTask, RunRow], None] | None = None
    on_phase: Callable[[Phase], None] | None = None
    on_resume: Callable[[int, int], None] | None = None
    record_study: bool = True  # False: one point of a sweep, whose spec the sweep's document holds

    def pending(self, tasks: list[RunTask]) -> list[RunTask]:
        """Tasks without a finished row (failed rows are retried: a crash may not recur), and
        finished ones not yet tested on the grids they ask for (:func:`lacks_transfer`)."""
        todo = []
        for task in tasks:
            row = self.ledger.get(task.key)
            if row is None or row.status == "failed" or lacks_transfer(task, row):
                todo.append(task)
        return todo

    def _record(self, task: RunTask, row: RunRow) -> None:
        self.ledger.record(row)
        if self.on_done:
            self.on_done(task, row)

    def _phase(self, name: str, purpose: str, tasks: list[RunTask]) -> None:
        todo = self.pending(tasks)
        if self.on_phase:
            self.on_phase(Phase(name=name, purpose=purpose, runs=len(tasks), pending=len(todo)))
        if self.on_plan:
            self.on_plan(len(todo))
        self.executor.run(
            todo, on_done=self._record, on_start=self.on_start, on_epoch=self.on_epoch
        )

    def run(self) -> dict[str, float | None]:
        if self.record_study:
            self.ledger.set_study(self.study.to_dict())
        progress = study_progress(self.study, {row.key: row for row in self.ledger.rows()})
        done = sum(phase["ok"] + phase["diverged"] for phase in progress.values())
        if done and self.on_resume:
            self.on_resume(done, sum(phase["planned"] for phase in progress.values()))
        if self.study.sweep_seeds:
            self._phase("sweep", sweep_phase_purpose(self.study), self.study.sweep_tasks())
        chosen, _ = choose_learning_rates(self.study, {row.key: row for row in self.ledger.rows()})
        self._phase(
            "comparison", comparison_phase_purpose(self.study), self.study.final_tasks(chosen)
        )
        return chosen
