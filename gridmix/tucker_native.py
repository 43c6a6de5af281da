"""The fused native Tucker kernel (``tucker_native.c``): built on first use, loaded, exposed as torch custom ops.

:func:`gridmix.tucker.tucker` with library GEMMs runs each mode product over the whole batch, so every
stage streams the full tensor through memory and pays the GEMM's packing of its large operand. The C
kernel runs the whole chain (project, scale, expand; and the backward) on one batch element at a time
while it is in cache, vectorised along the contiguous heads·channels dimension, threading over the batch
(OpenMP, ``torch.get_num_threads()`` threads). It computes the same function; the tests compare it with
the library-GEMM path and with float64, values and gradients.

The ops ``gridmix::tucker_chain`` and ``gridmix::tucker_chain_backward`` have fake (shape-only)
implementations, so FLOP counting, memory estimates and ``torch.compile`` see them; gridmix.tucker
registers their autograd formula. ``chain_flops`` is their FLOP count for ``FlopCounterMode``.

The kernel is compiled once per machine and source with the system C compiler (``$CC``, default ``cc``;
``-O3 -march=native -fopenmp``) into ``$GRIDMIX_CACHE_DIR`` (default ``~/.cache/gridmix``), in about a
second. Without a working compiler gridmix warns once and uses the library-GEMM path (the same results
to float32 rounding, slower); ``GRIDMIX_NATIVE=0`` chooses that path without a warning.

Shape legend:
    B: batch, n_k: axis length, r_k: rank, R: Π r_k (core size), h: heads, c: channels per head,
    S0 = h·c: the contiguous trailing dimension of one batch element
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import math
import os
import platform
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch

_SOURCE = Path(__file__).with_name("tucker_native.c")
_FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=gnu11")
_MAX_AXES = 8  # MAX_AXES in the C source


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
    """Compile the kernel into the cache (atomically: concurrent builders each rename a finished file)."""
    source = _SOURCE.read_bytes()
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=True).stdout
    key = hashlib.sha256(b"\0".join([source, " ".join(_FLAGS).encode(), version.encode(), _cpu_flags().encode()]))
    cache = Path(os.environ.get("GRIDMIX_CACHE_DIR") or Path.home() / ".cache" / "gridmix")
    target = cache / f"tucker_native-{key.hexdigest()[:16]}.so"
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        built = Path(tmp) / target.name
        result = subprocess.run([compiler, *_FLAGS, str(_SOURCE), "-o", str(built)], capture_output=True, text=True)
        if result.returncode != 0:
            first = (result.stderr.strip().splitlines() or ["no output"])[0]
            raise RuntimeError(f"{compiler} exited with {result.returncode}: {first}")
        os.replace(built, target)
    return target


@functools.cache
def native_library() -> ctypes.CDLL | None:
    """The compiled kernel, or ``None`` (with one warning saying why) when it cannot be built or is disabled."""
    if os.environ.get("GRIDMIX_NATIVE", "1") == "0":
        return None
    compiler = os.environ.get("CC", "cc")
    try:
        if shutil.which(compiler) is None:
            raise RuntimeError(f"no C compiler {compiler!r} on PATH")
        library = ctypes.CDLL(str(_build(compiler)))
    except (OSError, RuntimeError, subprocess.CalledProcessError) as error:
        warnings.warn(f"gridmix: the fused native Tucker kernel is unavailable ({error}); "
                      "using library GEMMs (same results, slower)", RuntimeWarning, stacklevel=2)
        return None
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    ptrs, i64s = ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64)
    head = [ctypes.c_int, i64, i64s, i64s, i64s, i64, i64]  # d, B, axes, n, r, S0, heads
    library.gm_tucker_forward.argtypes = [*head, ptr, ptrs, ptr, ptrs, ptr, ptr, ptrs, ptr, ctypes.c_int]
    library.gm_tucker_backward.argtypes = [*head, ptr, ptr, ptrs, ptr, ptrs, ptr, ptr, ptrs, ptr, ptrs, ptr, ptr, i64,
                                           ctypes.c_int]
    library.gm_tucker_forward.restype = library.gm_tucker_backward.restype = None
    return library


@torch.compiler.assume_constant_result  # torch.compile takes the verdict as a constant instead of tracing the build
def native_available() -> bool:
    """Whether the kernel is built and loaded (building it on the first call)."""
    return native_library() is not None


def native_applies(x: torch.Tensor, bases: Sequence[torch.Tensor], axes: Sequence[int]) -> bool:
    """Whether the fused kernel covers this call: float32 on the CPU, and every grid axis is a Tucker axis."""
    d = len(axes)
    return (
        all(t.device.type == "cpu" and t.dtype == torch.float32 for t in (x, *bases))
        and 0 < d <= _MAX_AXES
        and x.dim() == d + 3
        and sorted(axes) == list(range(1, d + 1))
        and native_available()
    )


def _pointer(tensor: torch.Tensor) -> ctypes.c_void_p:
    assert tensor.is_contiguous() and tensor.dtype == torch.float32  # the kernel reads raw row-major float32
    return ctypes.c_void_p(tensor.data_ptr())


def _pointers(tensors: Sequence[torch.Tensor]):
    return (ctypes.c_void_p * max(len(tensors), 1))(*(_pointer(t).value for t in tensors))


def _int64s(values: Sequence[int]):
    return (ctypes.c_int64 * len(values))(*values)


def _plan(x_shape: Sequence[int], axes: Sequence[int], ranks: Sequence[int]):
    """The per-step arguments of the C entry points: 0-based grid axes, lengths, ranks; and S0."""
    grid_axes = [a - 1 for a in axes]
    return grid_axes, [x_shape[a] for a in axes], list(ranks), x_shape[-2] * x_shape[-1]


def _chain_shapes(x_shape: Sequence[int], axes: Sequence[int], ranks: Sequence[int]):
    """Shapes of the forward's intermediates (``gm_tucker_forward`` in the C source): proj, core, expd."""
    d, shape = len(axes), list(x_shape)
    proj = []
    for t in range(d):
        if t:
            proj.append(tuple(shape))  # before step t's projection
        shape[axes[t]] = ranks[t]
    core = tuple(shape)
    expd = []
    for t in range(d - 1, 0, -1):
        shape[axes[t]] = x_shape[axes[t]]
        expd.append(tuple(shape))  # before step t-1's expansion
    return proj, core, expd[::-1]


@torch.library.custom_op("gridmix::tucker_chain", mutates_args=())
def tucker_chain(x: torch.Tensor, bases: list[torch.Tensor], scale: torch.Tensor,
                 axes: list[int]) -> list[torch.Tensor]:
    """Project ``x`` onto ``bases[t]`` along ``axes[t]`` in turn, scale the core by ``scale`` (R, h), expand back.

    Returns ``[y, core, scaled core, *projection inputs after the first, *expansion inputs but the last]``;
    all but ``y`` are kept for the backward (and count in memory estimates, as they are allocated).
    """
    x, bases, scale = x.contiguous(), [u.contiguous() for u in bases], scale.contiguous()
    ax, n, r, S0 = _plan(x.shape, axes, [u.shape[1] for u in bases])
    proj_shapes, core_shape, expd_shapes = _chain_shapes(x.shape, axes, r)
    proj, expd = [x.new_empty(s) for s in proj_shapes], [x.new_empty(s) for s in expd_shapes]
    core, scaled, y = x.new_empty(core_shape), x.new_empty(core_shape), x.new_empty(x.shape)
    native_library().gm_tucker_forward(
        len(axes), x.shape[0], _int64s(ax), _int64s(n), _int64s(r), S0, x.shape[-2], _pointer(x), _pointers(bases),
        _pointer(scale), _pointers(proj), _pointer(core), _pointer(scaled), _pointers(expd), _pointer(y),
        torch.get_num_threads())
    return [y, core, scaled, *proj, *expd]


@tucker_chain.register_fake
def _(x, bases, scale, axes):
    proj_shapes, core_shape, expd_shapes = _chain_shapes(x.shape, axes, [u.shape[1] for u in bases])
    return [x.new_empty(x.shape), x.new_empty(core_shape), x.new_empty(core_shape),  # contiguous, as the kernel's
            *(x.new_empty(s) for s in [*proj_shapes, *expd_shapes])]


@torch.library.custom_op("gridmix::tucker_chain_backward", mutates_args=())
def tucker_chain_backward(grad: torch.Tensor, x: torch.Tensor, bases: list[torch.Tensor], scale: torch.Tensor,
                          axes: list[int], intermediates: list[torch.Tensor]) -> list[torch.Tensor]:
    """``[∂x, *∂bases, ∂scale]`` of :func:`tucker_chain` from its intermediates."""
    grad, x, bases, scale = grad.contiguous(), x.contiguous(), [u.contiguous() for u in bases], scale.contiguous()
    ax, n, r, S0 = _plan(x.shape, axes, [u.shape[1] for u in bases])
    B, heads = x.shape[0], x.shape[-2]
    core, scaled, *rest = intermediates
    proj, expd = rest[: len(axes) - 1], rest[len(axes) - 1 :]
    proj_shapes, core_shape, expd_shapes = _chain_shapes((1, *x.shape[1:]), axes, r)  # of one element
    work_size = max(math.prod(s) for s in [*proj_shapes, core_shape, *expd_shapes])  # the largest intermediate
    threads = torch.get_num_threads()
    work = x.new_empty(2 * threads * work_size)  # two ping-pong buffers per thread
    gx = x.new_empty(x.shape)
    basis_parts = [x.new_empty(B, nt, rt) for nt, rt in zip(n, r)]  # per batch element: summed in a fixed order
    scale_part = x.new_empty(B, *scale.shape)
    native_library().gm_tucker_backward(
        len(axes), B, _int64s(ax), _int64s(n), _int64s(r), S0, heads, _pointer(grad), _pointer(x), _pointers(bases),
        _pointer(scale), _pointers(proj), _pointer(core), _pointer(scaled), _pointers(expd), _pointer(gx),
        _pointers(basis_parts), _pointer(scale_part), _pointer(work), work_size, threads)
    return [gx, *(part.sum(0) for part in basis_parts), scale_part.sum(0)]


@tucker_chain_backward.register_fake
def _(grad, x, bases, scale, axes, intermediates):
    return [x.new_empty(x.shape), *(u.new_empty(u.shape) for u in bases), scale.new_empty(scale.shape)]


def chain_flops(x_shape: Sequence[int], axes: Sequence[int], ranks: Sequence[int]) -> int:
    """Multiply-add FLOPs (×2) of the Tucker chain on ``x_shape``: each of ``axes`` down in turn, then back up.

    The fused kernel's forward runs exactly these (:func:`tucker_chain`); :func:`gridmix.tucker_flops` is
    this count in the cheapest projection order, per batch element.
    """
    flops, shape = 0, list(x_shape)
    for axis, rank in zip(axes, ranks):
        flops += 2 * math.prod(shape) * rank  # (Π shape / n) · n · r multiply-adds
        shape[axis] = rank
    return 2 * flops
