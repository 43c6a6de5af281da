"""Measuring one training step honestly: wall-clock, FLOPs and peak memory (docs/design.md section
5, Scaling).

Three measurements, each usable on its own (the scaling study and the benchmarks both build on
them):

* :func:`time_fn`: wall-clock of a step, after a warm-up that lasts until the step's time has
  settled, as the median and quartiles of repeats, with the thread count set and recorded (CUDA is
  synchronised around every repeat).
* :func:`count_flops`: forward and backward FLOPs with ``torch.utils.flop_counter.FlopCounterMode``,
  plus
  :data:`FLOP_FORMULAS` for ops it does not count that gridmix's models run (attention on CPU, FFTs,
  the Householder product behind the mixer's orthonormal bases; the fused native kernel registers
  its own formula in :mod:`gridmix.mixers.concentration.ops.tucker_native`), and a list
  of any heavy op that still went uncounted, so an under-count is visible instead of silent.
  Optionally on fake tensors (shapes only).
* :func:`count_ops`: the compute ops (about one GPU kernel each) of a forward and a backward pass,
  by op name, on the torch-op path.
* peak memory, in a fresh process per measurement: :mod:`gridmix.analysis.memory`.
  :func:`estimate_peak_memory` predicts it beforehand from a fake-tensor dry run. docs/analysis.md
  states exactly what each figure includes and its caveats.

FLOP convention: FlopCounterMode counts matrix products and convolutions (2 FLOPs per multiply-add)
and nothing element-wise (norms, activations, softmax), so figures compare token mixers' GEMM work.
"""

from __future__ import annotations

import math
import os
import re
import time
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

from gridmix.core.records import pick

aten = torch.ops.aten
MB = 2**20

# ---------------------------------------------------------------- wall-clock


@dataclass(frozen=True)
class Timing:
    """Wall-clock seconds of one call of a step over ``repeats`` timed calls after ``warmup``
    untimed ones (the warm-up calls actually made: see :func:`time_fn`)."""

    median_s: float
    p25_s: float
    p75_s: float
    min_s: float
    repeats: int
    warmup: int
    threads: int  # torch.get_num_threads() while timing
    times_s: tuple[float, ...]

    def to_dict(self) -> dict:
        return asdict(self)


SETTLE = 0.1
"""Warm-up goes on until two successive untimed calls agree within this fraction."""
RESOLUTION_S = 1e-4
"""Two warm-up calls closer than this many seconds agree whatever their ratio (timer and scheduler
noise)."""
MAX_WARMUP = 20
"""At most this many warm-up calls in all, settled or not."""


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_fn(
    step: Callable[[], object],
    *,
    warmup: int = 2,
    repeats: int = 5,
    threads: int,
    device: str = "cpu",
) -> Timing:
    """Time ``step()`` with ``threads`` torch threads (restored afterwards); ``device="cuda"``
    synchronises.

    Warm-up: at least ``warmup`` untimed calls, then more until the last two agree within
    :data:`SETTLE` of the faster or :data:`RESOLUTION_S` (one-off costs such as first-call
    allocations, kernel selection or a thread pool starting are spent before the clock runs), at
    most :data:`MAX_WARMUP` in all.
    """
    if warmup < 0 or repeats < 1 or threads < 1:
        raise ValueError(
            f"warmup={warmup}, repeats={repeats}, threads={threads}; expected >= 0, >= 1, >= 1"
        )
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        warm = [_timed(step, device) for _ in range(warmup)]
        while len(warm) < MAX_WARMUP and not _settled(warm):
            warm.append(_timed(step, device))
        times = [_timed(step, device) for _ in range(repeats)]
        used = torch.get_num_threads()
    finally:
        torch.set_num_threads(previous)
    p25, median, p75 = np.percentile(times, [25, 50, 75])
    return Timing(
        median_s=float(median),
        p25_s=float(p25),
        p75_s=float(p75),
        min_s=min(times),
        repeats=repeats,
        warmup=len(warm),
        threads=used,
        times_s=tuple(times),
    )


def _timed(step: Callable[[], object], device: str) -> float:
    """Seconds of one call of ``step`` (the device synchronised before and after)."""
    _synchronize(device)
    start = time.perf_counter()
    step()
    _synchronize(device)
    return time.perf_counter() - start


def _settled(times: list[float]) -> bool:
    """Whether the last two calls agree within :data:`SETTLE` of the faster (or
    :data:`RESOLUTION_S`)."""
    if len(times) < 2:
        return False
    a, b = times[-2:]
    return abs(a - b) <= max(SETTLE * min(a, b), RESOLUTION_S)


# ---------------------------------------------------------------- FLOPs
# Formulas receive shapes (FlopCounterMode's shape wrapper) and return FLOPs, 2 per multiply-add.


def _sdpa_forward_flops(query, key, value, *args, out_shape=None, **kwargs) -> int:
    """``S = Q Kᵀ`` then ``O = P V``: ``2·b·h·s_q·s_k·(d_qk + d_v)``; 4·B·h·N²·c for
    self-attention."""
    heads, s_q, d_qk = math.prod(query[:-2]), query[-2], query[-1]
    return 2 * heads * s_q * key[-2] * (d_qk + value[-1])


def _sdpa_backward_flops(grad_out, query, key, value, *args, out_shape=None, **kwargs) -> int:
    """Recompute ``S``, then ``dP = dO Vᵀ``, ``dV = Pᵀ dO``, ``dQ = dS K``, ``dK = dSᵀ Q`` (torch's
    CUDA convention)."""
    heads, s_q, d_qk = math.prod(query[:-2]), query[-2], query[-1]
    return 2 * heads * s_q * key[-2] * (3 * d_qk + 2 * value[-1])


def _fft_flops(signal_shape, dim) -> int:
    """``5·n·log2(n)`` per transform of length ``n`` (the radix-2 count; real transforms do about
    half)."""
    n = math.prod(signal_shape[d] for d in dim)
    transforms = math.prod(signal_shape) // max(n, 1)
    return int(transforms * 5 * n * math.log2(n)) if n > 1 else 0


def _fft_r2c_flops(x, dim, *args, out_shape=None, **kwargs) -> int:
    return _fft_flops(x, dim)  # the real input holds the signal length


def _fft_c2r_flops(x, dim, *args, out_shape=None, **kwargs) -> int:
    return _fft_flops(out_shape, dim)  # the real output holds the signal length


def _fft_c2c_flops(x, dim, *args, out_shape=None, **kwargs) -> int:
    return _fft_flops(x, dim)


def _householder_product_flops(a, tau, *args, out_shape=None, **kwargs) -> int:
    """LAPACK ``orgqr`` on an ``m×n`` matrix with ``k`` reflectors: ``4mnk − 2(m+n)k² + 4k³/3`` per
    matrix."""
    m, n, k = a[-2], a[-1], tau[-1]
    return math.prod(a[:-2]) * int(4 * m * n * k - 2 * (m + n) * k * k + 4 * k**3 / 3)


def _solve_triangular_flops(a, b, *args, out_shape=None, **kwargs) -> int:
    """Back-substitution of an ``n×n`` triangular system for ``k`` right-hand sides: ``n²·k`` per
    matrix."""
    return math.prod(b[:-2]) * a[-1] ** 2 * b[-1]


def _convolution_backward_flops(
    grad_out,
    x,
    weight,
    bias,
    stride,
    padding,
    dilation,
    transposed,
    output_padding,
    groups,
    output_mask,
    *args,
    out_shape=None,
    **kwargs,
) -> int:
    """Each gradient asked for (of the input, of the weight) costs the forward's ``2·(outputs)·
    (weights per output)`` (inputs for a transposed convolution). FlopCounterMode's own formula
    leaves ``groups`` out of the weight's gradient, which counts a depthwise convolution as dense:
    ``C`` times too many."""
    per_output = math.prod(weight[1:])  # (C_in / groups) · kernel, or C_out / groups transposed
    forward = 2 * math.prod(x if transposed else grad_out) * per_output
    return forward * (int(output_mask[0]) + int(output_mask[1]))


FLOP_FORMULAS: dict = {
    # CPU scaled_dot_product_attention (flash kernel): FlopCounterMode 2.x counts only the CUDA
    # kernels.
    aten._scaled_dot_product_flash_attention_for_cpu: _sdpa_forward_flops,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: _sdpa_backward_flops,
    aten._fft_r2c: _fft_r2c_flops,
    aten._fft_c2r: _fft_c2r_flops,
    aten._fft_c2c: _fft_c2c_flops,
    aten.convolution_backward: _convolution_backward_flops,  # with groups (depthwise)
    # the mixer's orthogonal parametrisation
    aten.linalg_householder_product: _householder_product_flops,
    aten.linalg_solve_triangular: _solve_triangular_flops,  # its WY-form backward
}
"""Formulas gridmix adds to FlopCounterMode's registry (passed as its ``custom_mapping``)."""

# Op names that do real arithmetic (products, transforms, factorisations); one without a formula is
# reported.
_HEAVY_OP = re.compile(
    r"mm|\bmv|addmv|\bdot|vdot|conv|attention|fft|householder|orgqr|ormqr|geqrf|svd|eig|"
    r"cholesky|solve|lu_factor|matmul|einsum|tensordot|bilinear|tucker"
)


@dataclass(frozen=True)
class Flops:
    """FLOPs of one forward (+ backward) pass; ``per_op`` sums both; ``uncounted`` names heavy ops
    left out."""

    forward: int
    backward: int
    per_op: dict[str, int]
    # op name -> calls seen without a formula
    uncounted: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.forward + self.backward

    def to_dict(self) -> dict:
        return pick(self, "forward", "backward", "total", "per_op", "uncounted")


class _OpLog(TorchDispatchMode):
    """Counts every op that reaches the dispatcher, by overload packet; with ``compute_only``, only
    the ops :func:`is_compute_op` admits."""

    def __init__(self, *, compute_only: bool = False) -> None:
        super().__init__()
        self.calls: Counter = Counter()
        self.compute_only = compute_only

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.compute_only or is_compute_op(func):
            self.calls[func._overloadpacket] += 1
        return func(*args, **(kwargs or {}))


def _as_tuple(inputs: torch.Tensor | Sequence[torch.Tensor]) -> tuple:
    return (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)


def _default_loss(out) -> torch.Tensor:
    return sum(t.float().sum() for t in tree_leaves(out) if isinstance(t, torch.Tensor))


def _fake_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode(allow_non_fake_inputs=True)  # real parameters become fake on first use


# ---------------------------------------------------------------- tracing: FLOPs and the memory
# estimate


class _LiveBytes(TorchDispatchMode):
    """Peak bytes of live tensor storages created by ops (views and in-place results share one
    storage)."""

    def __init__(self) -> None:
        super().__init__()
        self.live = self.peak = 0
        self._refs: dict[int, weakref.ref] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in tree_leaves(out):
            if isinstance(tensor, torch.Tensor):
                storage = tensor.untyped_storage()
                key = id(storage)
                if key not in self._refs:
                    nbytes = storage.nbytes()
                    self._refs[key] = weakref.ref(
                        storage, lambda _, key=key, nbytes=nbytes: self._free(key, nbytes)
                    )
                    self.live += nbytes
                    self.peak = max(self.peak, self.live)
        return out

    def _free(self, key: int, nbytes: int) -> None:
        self.live -= nbytes
        self._refs.pop(key, None)


def count_flops(
    model: nn.Module,
    inputs: torch.Tensor | Sequence[torch.Tensor],
    *,
    backward: bool = True,
    loss: Callable[[object], torch.Tensor] | None = None,
    fake: bool = False,
) -> Flops:
    """FLOPs of ``model(*inputs)`` and, with ``backward``, of the gradient of ``loss(output)``
    (default: sum).

    The backward pass is taken with ``torch.autograd.grad`` with respect to the parameters that
    require gradients, so ``.grad`` is left untouched. ``fake=True`` runs on fake tensors: shapes
    only, nothing computed or allocated, the same counts (a model that branches on tensor values
    cannot run this way).
    """
    return _trace(model, inputs, backward=backward, loss=loss, fake=fake)[0]


def estimate_peak_memory(
    model: nn.Module,
    inputs: torch.Tensor | Sequence[torch.Tensor],
    *,
    loss: Callable[[object], torch.Tensor] | None = None,
) -> int:
    """Predicted peak bytes of one forward+backward, from a fake-tensor dry run (nothing is
    allocated).

    The estimate is the bytes of the parameters and buffers, one gradient per trainable parameter
    and the inputs, plus the peak of live tensors the ops create (activations saved for backward,
    temporaries, gradients). It leaves out what no op returns: kernels' internal workspaces,
    allocator fragmentation, the interpreter. Raises whatever the model raises on fake tensors.
    """
    return dry_run(model, inputs, loss=loss)[1]


def dry_run(
    model: nn.Module,
    inputs: torch.Tensor | Sequence[torch.Tensor],
    *,
    loss: Callable[[object], torch.Tensor] | None = None,
) -> tuple[Flops, int]:
    """``count_flops(..., fake=True)`` and :func:`estimate_peak_memory` of a forward+backward in one
    fake pass."""
    flops, live_peak = _trace(model, inputs, backward=True, loss=loss, fake=True, live_bytes=True)
    params = [p for p in model.parameters() if p.requires_grad]
    resident = sum(
        t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers(), *params]
    )
    resident += sum(x.numel() * x.element_size() for x in _as_tuple(inputs))
    return flops, resident + live_peak


def _trace(
    model: nn.Module, inputs, *, backward: bool, loss, fake: bool, live_bytes: bool = False
) -> tuple[Flops, int]:
    """Run the model (and the loss's gradient) under the FLOP counter; with ``live_bytes``, the peak
    of op outputs."""
    inputs, loss = _as_tuple(inputs), loss or _default_loss
    params = [p for p in model.parameters() if p.requires_grad]
    counters = []
    tracker = _LiveBytes() if live_bytes else nullcontext()
    with _fake_mode() if fake else nullcontext(), _OpLog() as log, tracker:
        with FlopCounterMode(display=False, custom_mapping=FLOP_FORMULAS) as forward:
            value = loss(model(*inputs))
        counters.append(forward)
        if backward and params:
            with FlopCounterMode(display=False, custom_mapping=FLOP_FORMULAS) as grads:
                torch.autograd.grad(value, params, allow_unused=True)
            counters.append(grads)
        del value
    per_op: Counter = Counter()
    for counter in counters:
        per_op.update({str(op): n for op, n in counter.get_flop_counts().get("Global", {}).items()})
    registry = counters[0].flop_registry
    uncounted = {
        str(op): n
        for op, n in log.calls.items()
        if op not in registry and _HEAVY_OP.search(str(op))
    }
    flops = Flops(
        forward=counters[0].get_total_flops(),
        backward=counters[1].get_total_flops() if len(counters) > 1 else 0,
        per_op=dict(per_op),
        uncounted=uncounted,
    )
    return flops, tracker.peak if live_bytes else 0


# ---------------------------------------------------------------- compute ops (kernel launches)

NOT_COMPUTE = frozenset(
    {
        aten.detach,
        aten.alias,
        aten.lift_fresh,
        aten._unsafe_view,
        aten.empty,
        aten.empty_like,
        aten.empty_strided,
        aten.new_empty,
        aten.new_empty_strided,
        aten.promote_types,
        aten.result_type,
        aten.is_same_size,
        aten.sym_size,
        aten.sym_stride,
        aten.sym_numel,
        aten.sym_storage_offset,
    }
)
"""Ops that reach the dispatcher but do no arithmetic and move no data: aliases, bare allocations,
dtype and metadata queries."""


def is_compute_op(func) -> bool:
    """Whether an aten op does arithmetic or moves data (a GPU launches about one kernel for it):
    every op but the views (``func.is_view``: ``view``, ``transpose``, ``expand``, ``unbind`` …) and
    :data:`NOT_COMPUTE`. Copies (``clone``, ``copy_``, ``_to_copy``), fills (``zeros``, ``eye``,
    ``ones_like``) and reductions all count."""
    return not func.is_view and func._overloadpacket not in NOT_COMPUTE


@dataclass(frozen=True)
class OpCount:
    """Compute ops (:func:`is_compute_op`) of one forward and one backward pass, by aten op name."""

    forward: dict[str, int]
    backward: dict[str, int]

    def __post_init__(self) -> None:
        for name, part in (("forward", self.forward), ("backward", self.backward)):
            bad = {op: n for op, n in part.items() if not isinstance(n, int) or n < 1}
            if bad:
                raise ValueError(f"OpCount.{name} has counts {bad}; expected positive integers")

    @property
    def total(self) -> int:
        return sum(self.forward.values()) + sum(self.backward.values())

    def to_dict(self) -> dict:
        return dict(
            forward=sum(self.forward.values()),
            backward=sum(self.backward.values()),
            total=self.total,
            forward_ops=self.forward,
            backward_ops=self.backward,
        )


def count_ops(
    model: nn.Module, inputs: torch.Tensor | Sequence[torch.Tensor], *, backward: bool = True
) -> OpCount:
    """Compute ops (:func:`is_compute_op`) that ``model(*inputs)`` dispatches, and with
    ``backward`` those of its backward pass as a training step runs it: ``backward()`` from
    all-ones output gradients (made outside the count, so no loss is counted) into the ``.grad`` of
    every input and parameter that requires one, each starting from ``None`` (as after
    ``zero_grad()``), so gradients that autograd must copy into place count too. The ``.grad`` held
    before is put back afterwards.

    gridmix's fused native kernels are switched off while counting (:func:`gridmix.set_native`):
    the count is of the torch-op path, the one a GPU runs. Ops that a kernel calls internally (an
    implementation's own copies) are not seen.
    """
    from gridmix.mixers.switches import native_switched_off

    inputs = _as_tuple(inputs)
    calls = Counter()
    with native_switched_off():
        with _OpLog(compute_only=True) as forward:
            out = model(*inputs)
        outputs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor) and t.grad_fn]
        wrt = [t for t in [*inputs, *model.parameters()] if t.requires_grad]
        if backward and outputs and wrt:
            seeds = [torch.ones_like(t) for t in outputs]
            held = [t.grad for t in wrt]
            for t in wrt:
                t.grad = None
            try:
                with _OpLog(compute_only=True) as grads:
                    torch.autograd.backward(outputs, seeds, inputs=wrt)
            finally:
                for t, grad in zip(wrt, held):
                    t.grad = grad
            calls = grads.calls
    return OpCount(
        forward={str(op): n for op, n in forward.calls.most_common()},
        backward={str(op): n for op, n in calls.most_common()},
    )


def available_memory(device: str = "cpu") -> int:
    """Bytes free for a new process: ``MemAvailable`` of /proc/meminfo on Linux, free CUDA memory on
    a GPU."""
    if device.startswith("cuda"):
        return torch.cuda.mem_get_info(torch.device(device))[0]
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
