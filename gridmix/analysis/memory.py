"""Peak memory of one training step, each measured in a fresh process (docs/analysis.md, "Peak
memory").

:func:`peak_memory` measures one step; a :class:`MemoryProbe` measures many (the scaling study's
points) from one warm server. The server is ``python -m gridmix.analysis.memory --serve``: it
imports torch, timm and the targets' modules once (about 5 s here), never runs a torch operation
itself, and forks a child per measurement, so every measurement still starts from a process that has
allocated nothing for any other point, for milliseconds instead of seconds of imports. Where there
is no ``fork`` (Windows) the server measures one request in itself and exits, and the probe starts a
new one for the next.

In the measuring process, on CPU the peak is Linux's ``VmHWM`` (the resident-set high-water mark),
reset through ``/proc/self/clear_refs`` right before the step; on CUDA it is
``torch.cuda.max_memory_allocated``.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from gridmix.analysis.measure import MB

_CAN_FORK = hasattr(os, "fork")  # else one request per server (module docstring)
_REPLY_MARK = "GRIDMIX_MEMORY "
# Imported by the server before its first fork: what every child would otherwise import again.
SERVER_MODULES = ("torch", "timm", "gridmix.tracks.plugin_loader")


@dataclass(frozen=True)
class Memory:
    """Peak memory of one step measured in a fresh process (see :func:`peak_memory`), in bytes.

    ``peak_bytes = setup_bytes + step_bytes``: everything the target allocated (model, data, its own
    warm-up) plus the step's growth above that. ``baseline_bytes`` (interpreter and imports) is not
    in it.
    """

    peak_bytes: int
    setup_bytes: int
    step_bytes: int
    baseline_bytes: int
    device: str
    method: str

    @property
    def peak_mb(self) -> float:
        return self.peak_bytes / MB

    def to_dict(self) -> dict:
        return dict(asdict(self), peak_mb=self.peak_mb)


class MemoryMeasurementError(RuntimeError):
    """The measuring process failed, timed out or was killed (for instance by the out-of-memory
    killer)."""


def peak_memory(target: str, kwargs: dict, **options) -> Memory:
    """Peak memory of ``step()`` where ``step = module.function(**kwargs)`` for
    ``target="module:function"``; ``options`` are :meth:`MemoryProbe.measure`'s: ``threads``,
    ``device`` (``"cpu"``), ``timeout_s`` (600) and ``preload`` (``None``).

    The target runs in a fresh process that sees this process's ``sys.path``; it must build
    everything on ``device`` and return a zero-argument callable that runs one step (a forward and
    backward pass). ``kwargs`` must be JSON-serialisable. ``preload``, another
    ``"module:function"``, is called with the same ``kwargs`` before the baseline is read: what it
    loads (plugin modules, a registry) counts as interpreter, not as the target's setup. Raises
    :class:`MemoryMeasurementError` when the measuring process fails, times out or is killed. For
    many measurements, one :class:`MemoryProbe` is faster.
    """
    with MemoryProbe() as probe:
        return probe.measure(target, kwargs, **options)


class MemoryProbe:
    """A warm measuring server (module docstring); use it as a context manager, which stops the
    server.

    ``modules`` are imported by the server before its first fork, besides :data:`SERVER_MODULES` and
    each target's module (the server imports those as they come).
    """

    def __init__(self, modules: Sequence[str] = ()) -> None:
        self.modules = tuple(dict.fromkeys((*SERVER_MODULES, *modules)))
        self._server: subprocess.Popen | None = None
        self._stderr = None
        self._pending = b""
        self._last_error_line = "no error output"

    def __enter__(self) -> MemoryProbe:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> MemoryProbe:
        """Start the server now, so that its imports overlap other work (else the first measurement
        starts it)."""
        self._started()
        return self

    def measure(
        self,
        target: str,
        kwargs: dict,
        *,
        threads: int,
        device: str = "cpu",
        timeout_s: float = 600.0,
        preload: str | None = None,
    ) -> Memory:
        """Peak memory of ``target``'s step in a fresh child of the server (:func:`peak_memory`
        says what the arguments are)."""
        _parse_target(target)
        if preload:
            _parse_target(preload)
        if threads < 1:
            raise ValueError(f"threads={threads}; expected >= 1")
        request = dict(
            target=target, kwargs=kwargs, threads=threads, device=device, preload=preload
        )
        server = self._started()
        try:
            server.stdin.write((json.dumps(request) + "\n").encode())
            server.stdin.flush()
        except BrokenPipeError:
            pass  # the server is gone: the read below reports why
        reply = self._read_reply(time.monotonic() + timeout_s)
        if reply is None:
            stopped = self.close()
            if stopped is None:
                raise MemoryMeasurementError(f"{target}({kwargs}) ran past {timeout_s:g} s")
            raise MemoryMeasurementError(
                f"{target}({kwargs}): the measuring server exited with {stopped}: "
                f"{self._last_error_line}"
            )
        if not _CAN_FORK:
            self.close()  # a one-shot server (module docstring)
        if "error" in reply:
            raise MemoryMeasurementError(f"{target}({kwargs}) {reply['error']}")
        return Memory(**reply["memory"])

    def close(self) -> int | None:
        """Stop the server; returns its exit code, or ``None`` if it was still running (and is now
        killed)."""
        server, self._server, self._pending = self._server, None, b""
        self._last_error_line = "no error output"
        if server is None:
            return 0
        code = server.poll()
        if code is None:
            self._kill(server)
        self._stderr.seek(0)
        lines = self._stderr.read().decode(errors="replace").strip().splitlines()
        self._last_error_line = lines[-1] if lines else "no error output"
        self._stderr.close()
        for pipe in (server.stdin, server.stdout):
            pipe.close()
        return code

    @staticmethod
    def _kill(server: subprocess.Popen) -> None:
        """Kill the server and the child it is waiting for (its own process group, where there are
        groups)."""
        if hasattr(os, "killpg"):
            try:
                os.killpg(server.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        server.kill()
        server.wait()

    def _started(self) -> subprocess.Popen:
        if self._server is None or self._server.poll() is not None:
            self.close()
            self._stderr = tempfile.TemporaryFile()
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
            self._server = subprocess.Popen(
                [sys.executable, "-m", "gridmix.analysis.memory", "--serve", *self.modules],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env=env,
                start_new_session=hasattr(os, "killpg"),
            )
        return self._server

    def _read_reply(self, deadline: float) -> dict | None:
        """The server's next reply line, or ``None`` if it closed its output or the deadline
        passed."""
        out = self._server.stdout.fileno()
        while True:
            head, sep, rest = self._pending.partition(b"\n")
            if sep:
                self._pending = rest
                text = head.decode(errors="replace")
                if text.startswith(_REPLY_MARK):
                    return json.loads(text[len(_REPLY_MARK) :])
                continue  # a line the target printed
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([out], [], [], remaining)[0]:
                return None
            chunk = os.read(out, 65536)
            if not chunk:
                return None
            self._pending += chunk


# ---------------------------------------------------------------- the measuring side


def _parse_target(target: str) -> tuple[str, str]:
    module, sep, name = target.partition(":")
    if not sep or not module or not name.isidentifier():
        raise ValueError(
            f"target {target!r}; expected an importable 'module:function', e.g. "
            "'gridmix.analysis.scaling:memory_step'"
        )
    return module, name


def _load_target(target: str) -> Callable:
    module, name = _parse_target(target)
    return getattr(importlib.import_module(module), name)


def _proc_status_bytes(key: str) -> int | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024  # kB
    except OSError:
        return None
    return None


def _ru_maxrss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, kB on Linux


def _reset_rss_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # Linux >= 4.0: reset VmHWM to the current RSS
        return True
    except OSError:
        return False


def _measure_in_this_process(
    target: str, kwargs: dict, *, threads: int, device: str, preload: str | None
) -> Memory:
    """One measurement in this process, which must have run nothing else (see
    :func:`peak_memory`)."""
    import torch

    torch.set_num_threads(threads)
    make_step = _load_target(target)  # imports the target's module: part of the baseline
    if preload:
        _load_target(preload)(**kwargs)
    cuda = device.startswith("cuda")
    gc.collect()
    if cuda:
        torch.cuda.synchronize()
        baseline = torch.cuda.memory_allocated()
        step = make_step(**kwargs)
        torch.cuda.synchronize()
        gc.collect()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        method = (
            "torch.cuda.max_memory_allocated (tensors only, not the CUDA context or "
            "allocator cache)"
        )
    elif _proc_status_bytes("RssAnon") is not None:
        baseline = _proc_status_bytes("RssAnon")
        step = make_step(**kwargs)
        gc.collect()
        before, resident = _proc_status_bytes("RssAnon"), _proc_status_bytes("VmRSS")
        reset = _reset_rss_peak()
        step()
        # the step's growth, on top of the anonymous setup
        peak = before + _proc_status_bytes("VmHWM") - resident
        method = (
            "anonymous memory (RssAnon) for the setup, then VmHWM reset via /proc/self/clear_refs "
            "before the step"
            if reset
            else "anonymous memory (RssAnon) for the setup, then VmHWM over setup and step "
            "(clear_refs unavailable: step_bytes may include setup transients)"
        )
    else:
        baseline = _ru_maxrss_bytes()
        step = make_step(**kwargs)
        gc.collect()
        before = _ru_maxrss_bytes()
        step()
        peak = _ru_maxrss_bytes()
        method = (
            "ru_maxrss lifetime peak (no /proc: baseline and setup are peaks, not current sizes)"
        )
    peak = max(peak, before)
    return Memory(
        peak_bytes=peak - baseline,
        setup_bytes=before - baseline,
        step_bytes=peak - before,
        baseline_bytes=baseline,
        device=device,
        method=method,
    )


def _answer(request: dict) -> dict:
    try:
        return {"memory": asdict(_measure_in_this_process(**request))}
    except Exception as error:  # the probe raises it as a MemoryMeasurementError
        return {"error": f"failed: {type(error).__name__}: {error}"}


def _answer_in_a_child(request: dict) -> dict:
    """Forks; the child measures and writes its answer to a pipe. A child killed midway is reported
    by signal."""
    module, _ = _parse_target(request["target"])
    # the server keeps it for the next child: imports are not the measurement
    importlib.import_module(module)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        with os.fdopen(write_end, "w") as answer:
            answer.write(json.dumps(_answer(request)))
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as answer:
        text = answer.read()
    _, status = os.waitpid(pid, 0)
    if text:
        return json.loads(text)
    if os.WIFSIGNALED(status):
        signal = os.WTERMSIG(status)
        return {
            "error": f"was killed by signal {signal}" + (" (out of memory?)" if signal == 9 else "")
        }
    return {"error": f"exited with {os.WEXITSTATUS(status)} before it measured"}


def _serve(modules: Sequence[str]) -> None:
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            # a module that is not installed (timm without the image tracks) is simply not preloaded
            pass
    for line in sys.stdin:
        request = json.loads(line)
        reply = _answer_in_a_child(request) if _CAN_FORK else _answer(request)
        print(_REPLY_MARK + json.dumps(reply), flush=True)
        if not _CAN_FORK:
            return


def _main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="The measuring server of gridmix.analysis.memory.MemoryProbe."
    )
    parser.add_argument(
        "--serve", nargs="*", metavar="MODULE", required=True, help="modules to import first"
    )
    _serve(parser.parse_args(argv).serve)


if __name__ == "__main__":
    _main()
