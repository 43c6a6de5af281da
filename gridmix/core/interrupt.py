"""One way to stop a long command: SIGINT (Ctrl-C), SIGTERM and SIGHUP all raise
:class:`Interrupted` in the driver's main thread, wherever it is (training in-process, waiting on
worker processes, writing the report).

The exception unwinds the command like Ctrl-C does: the executors end their worker processes, the
ledger keeps every finished run, and the command prints how to resume and exits with ``128 + signal
number`` (:attr:`status`). Only the first signal raises; those that arrive while the command winds
up are ignored, so that the clean-up (ending the workers, closing the ledger) finishes. A signal the
process was started ignoring (``nohup``, a background job's SIGINT) stays ignored. docs/guide.md,
"Resume" and "Exit status".
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


class Interrupted(KeyboardInterrupt):
    """The command was asked to stop by ``signum`` (a ``KeyboardInterrupt``, so no ``except
    Exception`` keeps it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        """The signal's name, e.g. ``SIGTERM``."""
        return signal.Signals(self.signum).name

    @property
    def status(self) -> int:
        """The exit status of a process ended by this signal, as shells report it: 128 + its
        number."""
        return 128 + self.signum


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block, SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` (the first of them;
    later ones are ignored); the previous handlers return after it. Outside the main thread (where
    handlers cannot be set) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised = False

    def handle(signum: int, frame) -> None:
        nonlocal raised
        if not raised:
            raised = True
            raise Interrupted(signum)

    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    for signum, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(signum, handle)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
