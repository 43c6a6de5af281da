"""Where runs execute: in this process, or in a pool of worker processes (``--jobs N``).

Every executor has one method, ``run(tasks, *, on_done, on_start=None, on_epoch=None)``: it executes
each :class:`gridmix.harness.RunTask` with :func:`gridmix.harness.execute` and calls
``on_done(task, row)`` in the driver as each finishes, so the driver alone writes the ledger. A worker
that dies mid-task loses only that task: it is recorded as failed (and retried by the next re-run).
The Ray executor (:mod:`gridmix.executors_ray`) has the same interface. docs/design.md section 8.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from gridmix.harness import RunTask, execute, versions
from gridmix.store import RunRow


def failed_row(task: RunTask, error: str) -> RunRow:
    """The ledger row of a task whose worker died or could not run it."""
    return RunRow(key=task.key, track=task.track, model=task.model, grid=task.grid, lr=task.lr, seed=task.seed,
                  config=task.config, status="failed", val_metric=None, test_metric=None, train_loss=[],
                  val_curve=[], epochs_done=0, wall_s=0.0, threads=task.threads, device=task.device,
                  versions=versions(), error=error, extras={})


class InProcessExecutor:
    """Runs tasks one after another in this process (per-epoch progress is available)."""

    def run(self, tasks: list[RunTask], *, on_done, on_start=None, on_epoch=None) -> None:
        for task in tasks:
            if on_start:
                on_start(task)
            epoch_hook = (lambda epoch, loss, val, task=task: on_epoch(task, epoch, loss, val)) if on_epoch else None
            on_done(task, execute(task, on_epoch=epoch_hook))


class ProcessPoolRunner:
    """Runs tasks in ``jobs`` spawned worker processes; each task carries its own thread count."""

    def __init__(self, jobs: int) -> None:
        if jobs < 1:
            raise ValueError(f"jobs={jobs}; expected >= 1")
        self.jobs = jobs

    def run(self, tasks: list[RunTask], *, on_done, on_start=None, on_epoch=None) -> None:
        queue = list(tasks)
        while queue:  # a broken pool (a worker killed) is replaced; only the tasks in flight are lost
            queue = self._run_pool(queue, on_done=on_done, on_start=on_start)

    def _run_pool(self, tasks: list[RunTask], *, on_done, on_start) -> list[RunTask]:
        context = multiprocessing.get_context("spawn")  # fork after torch threads start is unsafe
        with ProcessPoolExecutor(max_workers=self.jobs, mp_context=context) as pool:
            futures = {}
            for task in tasks:
                futures[pool.submit(execute, task)] = task
                if on_start:
                    on_start(task)
            pending = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                broken = []
                for future in done:
                    try:
                        row = future.result()
                    except BrokenProcessPool:
                        broken.append(futures[future])
                        continue
                    on_done(futures[future], row)
                if broken:  # the pool is gone: charge the death to one task, retry the rest in a new pool
                    on_done(broken[0], failed_row(broken[0], "worker process died while running this task"))
                    return broken[1:] + [futures[f] for f in pending]
        return []
