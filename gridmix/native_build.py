"""Build and load the fused native kernels (``tucker_native.c``, ``semiseparable_native.c``), and their one switch.

The kernels are compiled once per machine and source with the system C compiler (``$CC``, default ``cc``;
``-O3 -march=native -fopenmp``) into one library in ``$GRIDMIX_CACHE_DIR`` (default ``~/.cache/gridmix``),
in about a second. Without a working compiler gridmix warns once and uses the torch-op paths (the same results
to float32 rounding, slower). The kernels are used unless ``GRIDMIX_NATIVE=0`` is set or :func:`set_native` says
otherwise (as timm's ``set_fused_attn``); :mod:`gridmix.tucker_native` and :mod:`gridmix.semiseparable_native`
define the ops that call them.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

import torch

_SOURCES = tuple(Path(__file__).with_name(name) for name in ("tucker_native.c", "semiseparable_native.c"))
_FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=gnu11")
MAX_AXES = 8  # MAX_AXES in the C source
_choice: bool | None = None  # set_native's choice; None: GRIDMIX_NATIVE decides


def set_native(enabled: bool | None) -> None:
    """Use the fused kernels (``True``), the torch ops (``False``), or what ``GRIDMIX_NATIVE`` says (``None``).

    Takes effect on the next call; a function already compiled by ``torch.compile`` keeps the choice it
    was traced with (recompile it, or choose before compiling).
    """
    global _choice
    if enabled is not None and not isinstance(enabled, bool):
        raise TypeError(f"set_native(enabled={enabled!r}); expected True, False or None")
    _choice = enabled


def native_enabled() -> bool:
    """Whether the kernels are switched on: :func:`set_native`'s choice, else ``GRIDMIX_NATIVE`` (default ``1``)."""
    return _choice if _choice is not None else os.environ.get("GRIDMIX_NATIVE", "1") != "0"


def _cpu_flags() -> str:
    """The host's CPU feature flags (``-march=native`` code is only valid on a CPU that has them)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return line
    except OSError:
        pass
    return platform.processor()


def _build(compiler: str) -> Path:
    """Compile the kernels into the cache (atomically: concurrent builders each rename a finished file)."""
    source = b"\0".join(path.read_bytes() for path in _SOURCES)
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=True).stdout
    key = hashlib.sha256(b"\0".join([source, " ".join(_FLAGS).encode(), version.encode(), _cpu_flags().encode()]))
    cache = Path(os.environ.get("GRIDMIX_CACHE_DIR") or Path.home() / ".cache" / "gridmix")
    target = cache / f"gridmix_native-{key.hexdigest()[:16]}.so"
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        built = Path(tmp) / target.name
        command = [compiler, *_FLAGS, *map(str, _SOURCES), "-o", str(built)]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            first = (result.stderr.strip().splitlines() or ["no output"])[0]
            raise RuntimeError(f"{compiler} exited with {result.returncode}: {first}")
        os.replace(built, target)
    return target


@functools.cache
def native_library() -> ctypes.CDLL | None:
    """The compiled kernels, or ``None`` (with one warning saying why) when it cannot be built; ignores the switch."""
    compiler = os.environ.get("CC", "cc")
    try:
        if shutil.which(compiler) is None:
            raise RuntimeError(f"no C compiler {compiler!r} on PATH")
        library = ctypes.CDLL(str(_build(compiler)))
    except (OSError, RuntimeError, subprocess.CalledProcessError) as error:
        warnings.warn(f"gridmix: the fused native kernels are unavailable ({error}); "
                      "using torch ops (same results, slower)", RuntimeWarning, stacklevel=2)
        return None
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    ptrs, i64s = ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64)
    head = [ctypes.c_int, i64, i64s, i64s, i64s, i64, i64]  # d, B, axes, n, r, S0, heads
    library.gm_tucker_forward.argtypes = [*head, ptr, ptrs, ptr, ptrs, ptr, ptr, ptrs, ptr, ctypes.c_int]
    library.gm_tucker_backward.argtypes = [*head, ptr, ptr, ptrs, ptr, ptrs, ptr, ptr, ptrs, ptr, ptrs, ptr, ptr, i64,
                                           ctypes.c_int]
    library.gm_tucker_forward.restype = library.gm_tucker_backward.restype = None
    scan = [i64, i64, i64, i64, ctypes.c_int, i64, i64]  # P, n, Q, C, r, groups, parts
    library.gm_semiseparable_forward.argtypes = [*scan, ptr, ptr, ptr, ptr, ctypes.c_int]
    library.gm_semiseparable_backward.argtypes = [*scan, i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, i64, ctypes.c_int]
    library.gm_semiseparable_forward.restype = library.gm_semiseparable_backward.restype = None
    return library


def pointer(tensor: torch.Tensor) -> ctypes.c_void_p:
    """The address of a contiguous float32 tensor, as the kernels take it (they read raw row-major float32)."""
    assert tensor.is_contiguous() and tensor.dtype == torch.float32
    return ctypes.c_void_p(tensor.data_ptr())


@torch.compiler.assume_constant_result  # torch.compile takes the verdict as a constant instead of tracing the build
def native_available() -> bool:
    """Whether the kernels are switched on (:func:`native_enabled`) and built and loaded (building it on first call)."""
    return native_enabled() and native_library() is not None
