"""``--compile``: a run's model compiled with ``torch.compile`` before training, or trained eager
when it cannot be compiled.

Compilation happens at a compiled model's first calls, so :func:`compile_model` makes them before
training, in a warm-up (a training step's forward and backward, an evaluation forward) whose effects
it undoes. When the warm-up raises (no C compiler, an op the backend cannot handle), the run trains
the eager model instead, from its first step, and its ledger row says why; a failure that shows
only later (a shape the warm-up did not meet) fails that run, as any error in training does.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from gridmix.core.defaults import COMPILE_BACKEND


def one_line(error: BaseException) -> str:
    """``Type: first line of the message``, compiler errors running to pages; a backend's failure
    (dynamo's ``BackendCompilerFailed``) names the error the backend raised."""
    inner = getattr(error, "inner_exception", None)
    if isinstance(inner, BaseException):
        return f"{type(error).__name__}: {one_line(inner)}"
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def compile_model(
    model: torch.nn.Module,
    warm_up: Callable[[torch.nn.Module], None],
    device: torch.device,
) -> tuple[torch.nn.Module, dict]:
    """``model`` compiled with ``torch.compile`` (:data:`COMPILE_BACKEND`; graph breaks allowed)
    and warmed up by ``warm_up(compiled)``, with what the run records: ``{"backend", "seconds"}``
    (the warm-up's time, compiling included). When the warm-up raises, ``model`` itself and the
    record with ``"fallback"``, the error in one line.

    The warm-up leaves no trace: the model's buffers (batch-norm statistics), its gradients and the
    random number generators are as they were. Dynamo's caches are emptied first, so a run compiles
    afresh and its numbers do not depend on what this process compiled before.
    """
    backend = COMPILE_BACKEND
    record: dict = {"backend": getattr(backend, "__name__", str(backend))}
    buffers = [buffer.detach().clone() for buffer in model.buffers()]
    start = time.perf_counter()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=backend)
    try:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            warm_up(compiled)
    except Exception as error:  # the run trains eager instead: recorded, never raised
        record["fallback"] = one_line(error)
        compiled = model
    finally:
        with torch.no_grad():
            for buffer, saved in zip(model.buffers(), buffers):
                buffer.copy_(saved)
        model.zero_grad(set_to_none=True)
    record["seconds"] = time.perf_counter() - start
    return compiled, record
