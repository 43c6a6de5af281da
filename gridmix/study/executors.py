"""Where runs execute: in this process, or in a pool of worker processes (``--jobs N``).

Every executor is an :class:`Executor`: ``run(tasks, *, on_done, on_start=None, on_epoch=None)``
executes each :class:`gridmix.study.spec.RunTask` with :func:`gridmix.study.harness.execute` and
calls ``on_done(task, row)`` in the driver as each finishes, so the driver alone writes the ledger;
``close()`` releases what the runs held. The worker pool keeps its workers from one ``run`` to the
next (a study's sweep and comparison, a sweep's points), so their start (about 5 s for two workers
on two cores) is paid once. A worker that dies mid-task loses only that task: it is recorded as
failed (and retried by the next re-run). Workers leave SIGINT and SIGHUP to the driver
(:mod:`gridmix.core.interrupt`): a driver interrupted while it waits on them ends them itself
(:meth:`WorkerPoolExecutor.run`), and a driver killed outright takes them with it (the kernel's
parent-death signal on Linux, else a watchdog thread). Each worker imports the main module first, as
every spawned process does; one that calls the front door while it does (a script without ``if
__name__ == "__main__":``) exits at once with :data:`MAIN_RERUN_EXIT` (:func:`refuse_main_rerun`),
and the driver raises :data:`MAIN_RERUN` instead of recording runs that never ran. The Ray executor
(:mod:`gridmix.study.executors_ray`) has the same interface. The study driver that hands tasks to an
executor is :class:`gridmix.study.harness.Runner`. docs/design.md section 8.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from gridmix.study.harness import AfterTraining, execute, versions
from gridmix.study.ledger import RunRow
from gridmix.study.spec import RunTask

MAIN_RERUN = (
    "gridmix.run or gridmix.sweep was called while a worker process imported the main module; put "
    "the "
    'call under `if __name__ == "__main__":`'
)
MAIN_RERUN_EXIT = (
    78  # a worker's exit status when it refused to start the study again (refuse_main_rerun)
)

OnDone = Callable[[RunTask, RunRow], None]
OnStart = Callable[[RunTask], None]
# task, epoch, mean training loss, validation metric
OnEpoch = Callable[[RunTask, int, float, float], None]


class Executor(ABC):
    """A place where runs execute; what the study driver needs from it. :meth:`run` is the same for
    every executor; each says how it executes the tasks (:meth:`_run`) and what it releases
    (:meth:`close`)."""

    def run(
        self,
        tasks: list[RunTask],
        *,
        on_done: OnDone,
        on_start: OnStart | None = None,
        on_epoch: OnEpoch | None = None,
    ) -> None:
        """Execute every task; call ``on_done(task, row)`` in this process as each finishes (in any
        order), ``on_start(task)`` when one is handed out, and ``on_epoch`` per epoch where the
        executor can observe it (in-process only). A task that cannot run is still reported, as a
        failed row. No tasks: nothing starts."""
        if tasks:
            self._run(list(tasks), on_done, on_start or _ignore, on_epoch)

    @abstractmethod
    def _run(
        self, tasks: list[RunTask], on_done: OnDone, on_start: OnStart, on_epoch: OnEpoch | None
    ) -> None:
        """:meth:`run` for at least one task, ``on_start`` always a function."""

    @abstractmethod
    def close(self) -> None:
        """Release the workers (a later ``run`` starts new ones)."""


def _ignore(task: RunTask) -> None:
    """The ``on_start`` of a caller that does not follow the tasks."""


class InProcessExecutor(Executor):
    """Runs tasks one after another in this process (per-epoch progress is available).

    ``after_training`` is handed to :func:`gridmix.study.harness.execute` for every task (every
    executor takes it).
    """

    def __init__(self, *, after_training: AfterTraining | None = None) -> None:
        self.after_training = after_training

    def _run(
        self, tasks: list[RunTask], on_done: OnDone, on_start: OnStart, on_epoch: OnEpoch | None
    ) -> None:
        for task in tasks:
            on_start(task)
            epoch_hook = (
                (lambda epoch, loss, val, task=task: on_epoch(task, epoch, loss, val))
                if on_epoch
                else None
            )
            on_done(task, execute(task, on_epoch=epoch_hook, after_training=self.after_training))

    def close(self) -> None:
        """Nothing to release: the runs executed in this process."""


def _importing_main() -> bool:
    """Whether this call comes from the main module's top level run as ``__mp_main__``: what a
    process started by ``multiprocessing`` (spawn or forkserver) does first, before it is told its
    task (so before ``multiprocessing.parent_process()`` is set)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__mp_main__":
            return True
        frame = frame.f_back
    return False


def refuse_main_rerun() -> None:
    """In a spawned process importing the main module, say :data:`MAIN_RERUN` in one line on stderr
    and exit with :data:`MAIN_RERUN_EXIT` (the worker cannot start; the driver reads the status);
    elsewhere nothing."""
    if not _importing_main():
        return
    print(f"gridmix: {MAIN_RERUN}", file=sys.stderr)
    raise SystemExit(MAIN_RERUN_EXIT)


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
WORKER_END_S = 2.0  # how long ended workers get to exit on SIGTERM before they are killed


def _die_with_parent() -> bool:
    """Ask the Linux kernel to SIGKILL this process when its parent ends
    (``prctl(PR_SET_PDEATHSIG)``); ``False`` where that is unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        # the process's own symbols, the C library's prctl among them
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _exit_with_driver(driver: int, poll_s: float = 0.25) -> None:
    """Worker initialiser: leave SIGINT and SIGHUP to the driver (a Ctrl-C or a closed terminal
    reaches the whole process group; the driver ends its workers itself), and end this worker as
    soon as the driver that started it is gone (killed with SIGKILL, say), which a pool's worker
    does not notice on its own: it would stay, holding its memory, for good. On Linux the kernel
    kills it with its parent (strictly, with the driver's thread that started it: the one that hands
    out the runs, which outlives the pool); elsewhere a thread polls the parent's pid every
    ``poll_s`` seconds."""
    for signum in (signal.SIGINT, getattr(signal, "SIGHUP", None)):
        if signum is not None:
            signal.signal(signum, signal.SIG_IGN)
    if _die_with_parent():
        if os.getppid() != driver:  # the driver ended before the request took effect
            os._exit(1)
        return

    def watch() -> None:
        while os.getppid() == driver:
            time.sleep(poll_s)
        os._exit(1)

    threading.Thread(target=watch, name="gridmix-driver-watch", daemon=True).start()


class WorkerPoolExecutor(Executor):
    """Runs tasks in ``jobs`` spawned worker processes, kept until :meth:`close`; each task carries
    its own thread count."""

    def __init__(self, jobs: int, *, after_training: AfterTraining | None = None) -> None:
        if jobs < 1:
            raise ValueError(f"jobs={jobs}; expected >= 1")
        self.jobs, self.after_training = (
            jobs,
            after_training,
        )  # a module-level function: it is pickled
        self._pool: ProcessPoolExecutor | None = None

    def _run(
        self, tasks: list[RunTask], on_done: OnDone, on_start: OnStart, on_epoch: OnEpoch | None
    ) -> None:
        queue = tasks
        try:
            # a broken pool (a worker killed) is replaced; only the tasks in flight are lost
            while queue:
                queue = self._run_in_pool(queue, on_done=on_done, on_start=on_start)
        # interrupted (core.interrupt) or failed in the driver: the runs in flight are lost
        except BaseException:
            self.end_workers()
            raise

    def close(self) -> None:
        """Stop the workers once their runs end; a later ``run`` starts new ones."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.shutdown()

    def end_workers(self) -> None:
        """End the workers now, their runs unfinished (SIGTERM, then SIGKILL after
        :data:`WORKER_END_S`), and drop the tasks not yet started; a later ``run`` starts new
        ones."""
        if self._pool is None:
            return
        pool, self._pool = self._pool, None
        # the pool's worker processes (no public handle)
        processes = list(getattr(pool, "_processes", {}).values())
        for process in processes:
            process.terminate()
        for process in processes:
            process.join(WORKER_END_S)
            if process.is_alive():
                process.kill()
                process.join()
        pool.shutdown(wait=True, cancel_futures=True)

    def _exit_statuses(self) -> set[int | None]:
        """The exit statuses of a broken pool's worker processes, each awaited up to
        :data:`WORKER_END_S` (the pool ends the survivors; ``None`` for one still running)."""
        # the pool's worker processes (no public handle)
        processes = getattr(self._pool, "_processes", None) or {}
        for process in processes.values():
            process.join(WORKER_END_S)
        return {process.exitcode for process in processes.values()}

    def _workers(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # fork after torch threads start is unsafe
            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(
                max_workers=self.jobs,
                mp_context=context,
                initializer=_exit_with_driver,
                initargs=(os.getpid(),),
            )
        return self._pool

    def _run_in_pool(
        self, tasks: list[RunTask], *, on_done: OnDone, on_start: OnStart
    ) -> list[RunTask]:
        pool = self._workers()
        futures = {}
        for task in tasks:
            futures[pool.submit(execute, task, after_training=self.after_training)] = task
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
            # the pool is gone: charge the death to one task, retry the rest in a new pool
            if broken:
                # no task can ever run: say why, record nothing
                if MAIN_RERUN_EXIT in self._exit_statuses():
                    raise RuntimeError(MAIN_RERUN)
                self.close()
                died = broken[0].failed_row(
                    "worker process died while running this task", versions=versions()
                )
                on_done(broken[0], died)
                return broken[1:] + [futures[f] for f in pending]
        return []
