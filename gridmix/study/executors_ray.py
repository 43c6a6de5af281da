"""Runs on an existing Ray cluster (``--executor ray --address HOST:PORT``): one Ray task per run.

Each :class:`gridmix.study.spec.RunTask` becomes a Ray task asking for ``task.threads`` CPUs (and
one GPU when the device is ``cuda``); the worker executes it with
:func:`gridmix.study.harness.execute`, which sets and records the torch thread count. Results come
back to the driver, which alone writes the SQLite ledger, so resume and reports behave exactly as
locally. A worker that dies mid-task is retried by Ray (``max_retries``); if it keeps dying, only
that task is recorded as failed. Every node needs the same gridmix (and plugins) installed.
docs/design.md section 8; docs/ray.md says how to start a cluster.
"""

from __future__ import annotations

try:
    import ray
except ImportError as error:  # the CLI turns this into "pip install 'gridmix[ray]'"
    raise ImportError("Ray is not installed") from error

from gridmix.study.executors import Executor, OnDone, OnEpoch, OnStart
from gridmix.study.harness import AfterTraining, execute, versions
from gridmix.study.spec import RunTask


class RayExecutor(Executor):
    """An :class:`gridmix.study.executors.Executor` on the cluster at ``address`` (``None``: start a
    local Ray), connected on first use."""

    def __init__(
        self,
        *,
        address: str | None,
        max_retries: int = 2,
        after_training: AfterTraining | None = None,
    ) -> None:
        self.address, self.max_retries, self.after_training = address, max_retries, after_training

    def _connect(self) -> None:
        if not ray.is_initialized():
            ray.init(address=self.address, log_to_driver=False, configure_logging=False)

    def _run(
        self, tasks: list[RunTask], on_done: OnDone, on_start: OnStart, on_epoch: OnEpoch | None
    ) -> None:
        self._connect()
        refs = {}
        for task in tasks:
            remote = ray.remote(execute).options(
                num_cpus=task.threads,
                num_gpus=1 if task.device == "cuda" else 0,
                max_retries=self.max_retries,
                retry_exceptions=False,
            )
            refs[remote.remote(task, after_training=self.after_training)] = task
            on_start(task)
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                task = refs[ref]
                try:
                    row = ray.get(ref)
                # the worker or its node died, retries exhausted
                except ray.exceptions.RayError as error:
                    why = f"ray task failed: {type(error).__name__}: {str(error).splitlines()[0]}"
                    row = task.failed_row(why, versions=versions())
                on_done(task, row)

    def close(self) -> None:
        """Nothing to release: the cluster keeps its workers, and this process stays connected for
        the next run."""
