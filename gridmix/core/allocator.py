"""How a process's C allocator hands freed memory back: training runs keep it for reuse.

glibc's malloc serves large blocks (above an adaptive threshold of 128 KiB to 32 MiB) straight from
``mmap`` and returns them with ``munmap``, and trims the top of its heap once enough of it is free.
A training step frees and re-allocates the same activations every step, so by default the step maps
many of them afresh and page-faults them in again, zeroed by the kernel: thousands of minor faults a
step, a tenth to a quarter of a small model's step on one core (docs/benchmarks.md, "Freed memory
kept for reuse"). PyTorch's CPU performance guide gets the same effect by preloading jemalloc or
tcmalloc. The modes (:func:`keep_freed_memory`), each changing where memory comes from, never a
number computed with it:

- ``"reuse"`` (training runs): no trimming, and blocks up to 32 MiB (glibc's largest mmap threshold)
  from the heap, larger ones mapped afresh as glibc does by default. The process keeps its peak
  heap, but returns every block above 32 MiB when it is freed.
- ``"retain"`` (the benchmarks): no trimming and no block from ``mmap`` at all, so even a (8, 16384,
  64) float32 tensor (32 MiB plus malloc's header) is reused. Repeated large aligned allocations
  may then grow the heap to several times the block before freed neighbours merge and fit.
- ``"default"``: glibc as configured.
"""

from __future__ import annotations

import ctypes
import ctypes.util

MODES = ("reuse", "retain", "default")
# glibc's mallopt parameters (malloc.h) and the largest mmap threshold it accepts on 64-bit
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_MMAP_MAX = -1, -3, -4
_LARGEST_MMAP_THRESHOLD = 32 * 2**20


def keep_freed_memory(mode: str = "reuse") -> dict:
    """Set how this process's malloc returns freed memory (one of :data:`MODES`, see the module
    docstring); returns what was set, for a record: ``{"mode": mode, "applied": bool}``, and
    ``"error"`` where the C library is not glibc."""
    if mode not in MODES:
        raise ValueError(f"allocator={mode!r}; expected one of {MODES}")
    record = dict(mode=mode, applied=False)
    if mode == "default":
        return record
    second = (_M_MMAP_THRESHOLD, _LARGEST_MMAP_THRESHOLD) if mode == "reuse" else (_M_MMAP_MAX, 0)
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        record["applied"] = bool(libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)) and bool(
            libc.mallopt(*second)
        )
    except (OSError, AttributeError, TypeError) as error:  # not glibc: nothing to configure
        record["error"] = f"{type(error).__name__}: {error}"
    return record
