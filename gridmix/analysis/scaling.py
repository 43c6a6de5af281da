"""Scaling study: how parameters, FLOPs, wall-clock and peak memory of a training step grow with the
grid.

docs/design.md section 5 (Scaling). For a track, a list of grids and its models, every point (model,
grid) gets: parameters; forward+backward FLOPs of one batch
(:func:`gridmix.analysis.measure.count_flops`, on fake tensors, so even a point too large to run has
them); a memory estimate from a fake-tensor dry run, made *before* anything large is allocated;
then, if the estimate fits (and the time extrapolated from the model's previous grid is under a
cap), the wall-clock of a step in this process (:func:`~gridmix.analysis.measure.time_fn`) and its
peak memory in a fresh process (:class:`~gridmix.analysis.memory.MemoryProbe` running
:func:`memory_step`, which rebuilds the point from ``(track, model, grid)``). A point that is
unsupported, would not fit or fails is kept with the reason, never a crash.

Exponents: least squares of ``log y = a·log N + b`` per model and quantity (time, FLOPs, memory)
with its R² and the slope's 95% t-interval, only from three grids up (a line through two points
always fits them), over all measured grids and, where more were measured, over the largest ``tail``
grids only (small grids are dominated by per-call overhead, so the tail exponent is the asymptotic
one).

Busy machine: the 1-minute load average before and after, and the share of CPU time the hypervisor
stole meanwhile (``/proc/stat``), are recorded; :func:`busy_words` says when they show the timings
are not idle figures.

Shape legend:
    B: batch; N: tokens on the grid (n_1·…·n_d); inputs are the track's, e.g. (B, C, *grid)
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from scipy import stats
from torch import nn

from gridmix.analysis.measure import (
    MB,
    Flops,
    Timing,
    available_memory,
    count_flops,
    dry_run,
    time_fn,
)
from gridmix.analysis.memory import Memory, MemoryMeasurementError, MemoryProbe
from gridmix.core.grid import Grid, GridLike
from gridmix.core.records import pick
from gridmix.tracks import DataSizes, ModelSpec, Track

MEMORY_TARGET = "gridmix.analysis.scaling:memory_step"
MEMORY_PRELOAD = "gridmix.analysis.scaling:load_track"
QUANTITIES = ("time", "flops", "memory")
MIN_FIT_POINTS = 3  # a line through two points always fits them: no exponent, R² or interval
CONFIDENCE = 0.95  # of the exponent's t-interval


@dataclass
class ScalingPoint:
    """One model on one grid. ``skipped`` says why time and memory were not measured (None: they
    were)."""

    model: str
    grid: str
    tokens: int
    params: int | None = None
    flops: Flops | None = None  # forward + backward of one batch
    timing: Timing | None = None  # one forward + backward step
    memory: Memory | None = None
    memory_estimate_bytes: int | None = None
    skipped: str | None = None
    notes: list[str] = field(default_factory=list)

    def value(self, quantity: str) -> float | None:
        """The figure the exponent fits use: seconds, FLOPs or peak bytes (None when not
        measured)."""
        if quantity == "time":
            return self.timing.median_s if self.timing else None
        if quantity == "flops":
            return float(self.flops.total) if self.flops else None
        if quantity == "memory":
            return float(self.memory.peak_bytes) if self.memory else None
        raise ValueError(f"quantity={quantity!r}; expected one of {QUANTITIES}")

    def to_dict(self) -> dict:
        return dict(
            model=self.model,
            grid=self.grid,
            tokens=self.tokens,
            params=self.params,
            gflops=self.flops.total / 1e9 if self.flops else None,
            time_ms=self.timing.median_s * 1e3 if self.timing else None,
            peak_mb=self.memory.peak_mb if self.memory else None,
            memory_estimate_mb=self.memory_estimate_bytes / MB
            if self.memory_estimate_bytes is not None
            else None,
            skipped=self.skipped,
            notes=list(self.notes),
            flops=self.flops.to_dict() if self.flops else None,
            timing=self.timing.to_dict() if self.timing else None,
            memory=self.memory.to_dict() if self.memory else None,
        )


@dataclass(frozen=True)
class Fit:
    """``y ≈ e^intercept · N^exponent`` over ``points`` grids, with the exponent's 95% t-interval
    (``exponent_low`` … ``exponent_high``); ``tail_exponent`` over the largest ``tail_points``.
    Every slope needs :data:`MIN_FIT_POINTS` distinct grids (None below)."""

    model: str
    quantity: str
    exponent: float | None
    intercept: float | None
    r2: float | None
    points: int
    tail_exponent: float | None
    tail_points: int
    exponent_low: float | None = None
    exponent_high: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ScalingResult:
    """Every point and fit. ``load_average``: the 1-minute load before and after, next to
    ``cpu_count`` (timings taken while other processes compete for the cores are slower and
    noisier); ``cpu_steal``: the fraction of CPU time stolen by the hypervisor while measuring
    (None where /proc/stat is not readable)."""

    track: str
    device: str
    threads: int
    batch: int
    repeats: int
    warmup: int
    grids: list[str]
    models: list[str]
    points: list[ScalingPoint]
    fits: list[Fit]
    load_average: tuple[float | None, float | None] = (None, None)
    cpu_count: int | None = None
    cpu_steal: float | None = None
    roles: dict[str, str] = field(default_factory=dict)  # model -> its role in the track
    excluded_grids: dict[str, str] = field(default_factory=dict)  # grid -> why the track skips it

    def fit(self, model: str, quantity: str) -> Fit:
        for fit in self.fits:
            if fit.model == model and fit.quantity == quantity:
                return fit
        raise ValueError(
            f"no fit for model {model!r} and quantity {quantity!r}; models {self.models}"
        )

    def to_dict(self) -> dict:
        return dict(
            pick(
                self, "track", "device", "threads", "batch", "repeats", "warmup", "grids", "models"
            ),
            load_average=list(self.load_average),
            **pick(self, "cpu_count", "cpu_steal"),
            roles=dict(self.roles),
            excluded_grids=dict(self.excluded_grids),
            points=[p.to_dict() for p in self.points],
            fits=[f.to_dict() for f in self.fits],
        )


def fit_power_law(
    tokens: Sequence[float], values: Sequence[float]
) -> tuple[float, float, float, tuple[float, float]]:
    """Least squares of ``log y = a·log N + b`` over :data:`MIN_FIT_POINTS` or more distinct token
    counts: ``(a, b, R², (low, high))``, the last the :data:`CONFIDENCE` Student t-interval of
    ``a`` (``n − 2`` degrees of freedom); R² is 1 for a perfect fit."""
    if len(tokens) != len(values) or len(set(tokens)) < MIN_FIT_POINTS:
        raise ValueError(
            f"need >= {MIN_FIT_POINTS} distinct token counts with one value each; got "
            f"{list(tokens)}, {list(values)}"
        )
    if min(tokens) <= 0 or min(values) <= 0:
        raise ValueError(
            f"a log-log fit needs positive values; got tokens {list(tokens)}, values {list(values)}"
        )
    x, y = np.log(np.asarray(tokens, float)), np.log(np.asarray(values, float))
    slope, intercept = np.polyfit(x, y, 1)
    total = float(((y - y.mean()) ** 2).sum())
    residual = float(((y - (slope * x + intercept)) ** 2).sum())
    r2 = 1.0 - residual / total if total > 0 else 1.0
    half = float(
        stats.t.ppf((1 + CONFIDENCE) / 2, len(x) - 2)
        * np.sqrt(residual / (len(x) - 2) / ((x - x.mean()) ** 2).sum())
    )
    return float(slope), float(intercept), r2, (float(slope) - half, float(slope) + half)


def fit_exponents(points: Sequence[ScalingPoint], *, tail: int = MIN_FIT_POINTS) -> list[Fit]:
    """One :class:`Fit` per model and quantity over the points that have the quantity; the tail fit
    only where more grids than ``tail`` were measured (else it is the whole fit)."""
    if tail < MIN_FIT_POINTS:
        raise ValueError(f"tail={tail}; a slope needs at least {MIN_FIT_POINTS} grids")
    fits = []
    for model in dict.fromkeys(p.model for p in points):
        for quantity in QUANTITIES:
            pairs = sorted(
                (p.tokens, p.value(quantity))
                for p in points
                if p.model == model and p.value(quantity) is not None
            )
            exponent = intercept = r2 = tail_exponent = None
            interval = (None, None)
            if len({n for n, _ in pairs}) >= MIN_FIT_POINTS:
                exponent, intercept, r2, interval = fit_power_law(*zip(*pairs))
                ends = pairs[-tail:]
                if len(pairs) > tail and len({n for n, _ in ends}) >= MIN_FIT_POINTS:
                    tail_exponent = fit_power_law(*zip(*ends))[0]
            fits.append(
                Fit(
                    model=model,
                    quantity=quantity,
                    exponent=exponent,
                    intercept=intercept,
                    r2=r2,
                    points=len(pairs),
                    tail_exponent=tail_exponent,
                    tail_points=min(tail, len(pairs)),
                    exponent_low=interval[0],
                    exponent_high=interval[1],
                )
            )
    return fits


def scaling_grids(grid: GridLike, *, count: int = 3) -> list[Grid]:
    """``grid`` and up to ``count - 1`` successive halvings of every axis (never below 2), smallest
    first."""
    grid = Grid.parse(grid)
    if count < 1:
        raise ValueError(f"count={count}; expected >= 1")
    grids = [Grid(tuple(max(min(n, 2), n >> k) for n in grid)) for k in reversed(range(count))]
    return list(dict.fromkeys(grids))


def resolve_track(ref: str) -> Track:
    """A track from a registered name (through the plugin registry) or an importable
    ``"module:attribute"``.

    The attribute is a :class:`Track` or a function returning one; that is how the measuring process
    rebuilds a track that is not installed as a plugin (e.g. one defined in a test).
    """
    module, sep, name = ref.partition(":")
    if not sep:
        from gridmix.tracks.plugin_loader import load_registry

        return load_registry().track(ref)
    expected = (
        "expected a registered name or MODULE:ATTRIBUTE naming a Track or a function returning one"
    )
    # the module's import and the factory are user code: whatever they raise is the reference's
    # fault
    try:
        found = getattr(importlib.import_module(module), name)
        track = found if isinstance(found, Track) or not callable(found) else found()
    except Exception as error:
        raise ValueError(
            f"track {ref!r} cannot be loaded ({type(error).__name__}: {error}); {expected}"
        ) from None
    if not isinstance(track, Track):
        raise ValueError(f"{ref!r} gave an object of type {type(track).__name__}; {expected}")
    return track


def prepare(
    track: Track, spec: ModelSpec, grid: Grid, *, batch: int, seed: int, device: str, **build_kwargs
) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """The model (train mode) and one training batch ``(inputs, targets)`` for a point, on
    ``device``."""
    split = track.make_data(grid, seed, DataSizes(n_train=batch, n_val=1, n_test=1)).train
    torch.manual_seed(seed)
    model = spec.build(grid, **build_kwargs).to(device).train()
    return model, split.inputs[:batch].to(device), split.targets[:batch].to(device)


def train_step(
    model: nn.Module, loss: Callable, inputs: torch.Tensor, targets: torch.Tensor
) -> Callable[[], None]:
    """One forward+backward: ``loss(model(inputs), targets).backward()`` after clearing the
    gradients."""

    def step() -> None:
        model.zero_grad(set_to_none=True)
        loss(model(inputs), targets).backward()

    return step


def load_track(*, track: str, **point) -> Track:
    """:meth:`~gridmix.analysis.memory.MemoryProbe.measure` preload: the track's plugin imports are
    not the step's memory."""
    return resolve_track(track)


def memory_step(
    *, track: str, model: str, grid: str, batch: int, seed: int = 0, device: str = "cpu"
) -> Callable[[], None]:
    """:meth:`~gridmix.analysis.memory.MemoryProbe.measure` target: builds the point and returns its
    step.

    A one-sample step runs here, during setup, so that kernels, thread pools and lazily initialised
    libraries are part of the setup figure and the measured step is the batch's own memory.
    """
    resolved = resolve_track(track)
    net, inputs, targets = prepare(
        resolved,
        resolved.model(model),
        resolved.check_grid(grid),
        batch=batch,
        seed=seed,
        device=device,
    )
    train_step(net, resolved.loss, inputs[:1], targets[:1])()
    net.zero_grad(set_to_none=True)
    return train_step(net, resolved.loss, inputs, targets)


@dataclass(frozen=True)
class ScalingConfig:
    """How :func:`scale_track` measures every point.

    Attributes:
        batch: samples per timed step.
        threads: torch threads for timing and memory (``None``: the current
            ``torch.get_num_threads()``).
        repeats, warmup: timed and untimed steps per point.
        seed: the point's data and initialisation.
        device: ``"cpu"`` or ``"cuda"``.
        memory: measure peak memory (a fresh process per point, forked from one warm server).
        track_ref: how the measuring process finds the track (``None``: its registered name), see
            :func:`resolve_track`.
        memory_fraction: skip a point whose estimated peak exceeds this fraction of the available
            memory.
        time_cap_s: skip a point whose warm-up and repeats, extrapolated from the model's previous
            grid at that grid's FLOP throughput, would take longer.
        timeout_s: the limit of one point's memory measurement.
        tail: the tail exponent fits the largest ``tail`` grids.
    """

    batch: int = 8
    threads: int | None = None
    repeats: int = 5
    warmup: int = 2
    seed: int = 0
    device: str = "cpu"
    memory: bool = True
    track_ref: str | None = None
    memory_fraction: float = 0.8
    time_cap_s: float = 300.0
    timeout_s: float = 600.0
    tail: int = MIN_FIT_POINTS

    def __post_init__(self) -> None:
        if self.batch < 1 or not 0 < self.memory_fraction <= 1:
            raise ValueError(
                f"batch={self.batch}, memory_fraction={self.memory_fraction}; expected >= 1 and "
                "in (0, 1]"
            )
        if self.repeats < 1 or self.warmup < 0 or self.tail < MIN_FIT_POINTS:
            raise ValueError(
                f"repeats={self.repeats}, warmup={self.warmup}, tail={self.tail}; expected >= 1, "
                f">= 0, >= {MIN_FIT_POINTS}"
            )


def memory_probe() -> MemoryProbe:
    """The measuring server :func:`scale_track` measures peak memory with (not started yet)."""
    return MemoryProbe(modules=[MEMORY_TARGET.partition(":")[0]])


def scale_track(
    track: Track,
    grids: Sequence[GridLike],
    *,
    models: Sequence[str] | None = None,
    config: ScalingConfig | None = None,
    on_start: Callable[[str, Grid], None] | None = None,
    on_point: Callable[[ScalingPoint], None] | None = None,
    probe: MemoryProbe | None = None,
    **options,
) -> ScalingResult:
    """Measure every (model, grid) point of ``track``; see the module docstring.

    ``models``: model names (default: all the track offers); grids are measured smallest first, and
    a grid the track does not run (its ``supports``) is kept in ``excluded_grids`` with the track's
    reason. ``config`` (or its fields as keyword ``options``) says how; ``on_start(model name,
    grid)`` and ``on_point(point)`` are called before and after each point (progress bars).
    ``probe``: a :func:`memory_probe` the caller started early and closes itself (default: one
    started here, at the first memory measurement, and closed at the end).
    """
    if config is None:
        config = ScalingConfig(**options)
    elif options:
        raise TypeError(
            f"pass either config or its fields, not both (got config and {sorted(options)})"
        )
    excluded = {
        str(g): reason
        for g in map(Grid.parse, grids)
        if g.ndim == track.ndim and (reason := track.supports(g)) is not None
    }
    parsed = sorted(
        (track.check_grid(g) for g in grids if str(Grid.parse(g)) not in excluded),
        key=lambda g: g.numel,
    )
    if not parsed:
        raise ValueError(
            f"no grid to measure (given {[str(g) for g in grids]}; the track skips {excluded}); "
            "expected at least one grid it runs, e.g. ['16x16', '32x32']"
        )
    specs = [track.model(name) for name in models] if models else list(track.models)
    config = dataclasses.replace(
        config,
        threads=config.threads or torch.get_num_threads(),
        track_ref=config.track_ref or track.name,
    )
    load_before, steal_before, points = _load_average(), cpu_times(), []
    with contextlib.nullcontext(probe) if probe is not None else memory_probe() as probe:
        for spec in specs:
            throughput = None  # FLOP/s of this model's largest measured grid so far
            for grid in parsed:
                if on_start:
                    on_start(spec.name, grid)
                point = _measure_point(
                    track, spec, grid, config, throughput=throughput, probe=probe
                )
                if point.timing and point.flops:
                    throughput = point.flops.total / point.timing.median_s
                points.append(point)
                if on_point:
                    on_point(point)
    return ScalingResult(
        track=track.name,
        device=config.device,
        threads=config.threads,
        batch=config.batch,
        repeats=config.repeats,
        warmup=config.warmup,
        grids=[str(g) for g in parsed],
        models=[s.name for s in specs],
        points=points,
        fits=fit_exponents(points, tail=config.tail),
        load_average=(load_before, _load_average()),
        cpu_count=os.cpu_count(),
        cpu_steal=steal_fraction(steal_before, cpu_times()),
        roles={s.name: s.role for s in specs},
        excluded_grids=excluded,
    )


def load_averages() -> list[float] | None:
    """The machine's 1, 5 and 15 minute load averages (None where the system keeps none)."""
    try:
        return list(os.getloadavg())
    except (
        AttributeError,
        OSError,
    ):  # no getloadavg on this platform, or the value is unobtainable
        return None


def _load_average() -> float | None:
    averages = load_averages()
    return averages[0] if averages else None


STEAL_BUSY = 0.05
"""A share of stolen CPU time above which the machine counts as busy."""


def cpu_times() -> tuple[int, int] | None:
    """``(steal, total)`` jiffies of all CPUs since boot from /proc/stat (None where unreadable)."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal [guest guest_nice]: guests are inside user
    return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])


def steal_fraction(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The share of CPU time stolen between two :func:`cpu_times` readings (None without both)."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def busy_words(scaling: dict) -> str | None:
    """``the machine was busy (load average 2.1 on 2 cores): timings are not idle figures`` when a
    recorded 1-minute load average exceeds the CPU count or more than :data:`STEAL_BUSY` of the CPU
    time was stolen; None otherwise (or when nothing was recorded)."""
    loads = [load for load in scaling.get("load_average") or () if load is not None]
    cores, steal = scaling.get("cpu_count"), scaling.get("cpu_steal")
    reasons = []
    if loads and cores and max(loads) > cores:
        reasons.append(f"load average {max(loads):.3g} on {cores} cores")
    if steal is not None and steal > STEAL_BUSY:
        reasons.append(f"{steal:.0%} of the CPU time stolen by the hypervisor")
    if not reasons:
        return None
    return f"the machine was busy ({'; '.join(reasons)}): timings are not idle figures"


def _measure_point(
    track: Track,
    spec: ModelSpec,
    grid: Grid,
    config: ScalingConfig,
    *,
    throughput: float | None,
    probe: MemoryProbe,
) -> ScalingPoint:
    point = ScalingPoint(model=spec.name, grid=str(grid), tokens=grid.numel)
    reason = spec.supports(grid)
    if reason:
        point.skipped = f"unsupported: {reason}"
        return point
    try:
        _count_and_time(point, track, spec, grid, config, throughput=throughput)
        gc.collect()  # the timed model is gone before the memory is measured
        if config.memory and not point.skipped:
            kwargs = dict(
                track=config.track_ref,
                model=spec.name,
                grid=str(grid),
                batch=config.batch,
                seed=config.seed,
                device=config.device,
            )
            try:
                point.memory = probe.measure(
                    MEMORY_TARGET,
                    kwargs,
                    threads=config.threads,
                    device=config.device,
                    timeout_s=config.timeout_s,
                    preload=MEMORY_PRELOAD,
                )
            except MemoryMeasurementError as error:
                point.notes.append(f"memory not measured: {error}")
    # a broken model is this point's recorded failure, not a crashed study
    except Exception as error:
        point.skipped = f"failed: {type(error).__name__}: {error}"
    return point


def _count_and_time(
    point: ScalingPoint,
    track: Track,
    spec: ModelSpec,
    grid: Grid,
    config: ScalingConfig,
    *,
    throughput: float | None,
) -> None:
    """Fill in parameters, FLOPs and the memory estimate; then, unless the point is too big, its
    timing."""
    net, inputs, targets = prepare(
        track, spec, grid, batch=config.batch, seed=config.seed, device=config.device
    )
    point.params = sum(p.numel() for p in net.parameters())

    def loss(out):
        return track.loss(out, targets)

    try:
        point.flops, point.memory_estimate_bytes = dry_run(net, inputs, loss=loss)
    except Exception as error:  # a model that branches on values cannot run on fake tensors
        point.notes.append(
            f"no fake-tensor dry run ({type(error).__name__}: {error}); memory not estimated"
        )
    point.skipped = _too_big(point, config, throughput=throughput)
    if point.skipped:
        return
    if point.flops is None:
        point.flops = count_flops(net, inputs, loss=loss)
    point.timing = time_fn(
        train_step(net, track.loss, inputs, targets),
        warmup=config.warmup,
        repeats=config.repeats,
        threads=config.threads,
        device=config.device,
    )


def _too_big(point: ScalingPoint, config: ScalingConfig, *, throughput: float | None) -> str | None:
    memory_fraction, steps = config.memory_fraction, config.warmup + config.repeats
    if point.memory_estimate_bytes is not None:
        available = available_memory(config.device)
        if point.memory_estimate_bytes > memory_fraction * available:
            return (
                f"too big: estimated peak {point.memory_estimate_bytes / MB:.0f} MB > "
                f"{memory_fraction:.0%} of {available / MB:.0f} MB available"
            )
    if throughput and point.flops:
        seconds = steps * point.flops.total / throughput
        if seconds > config.time_cap_s:
            return (
                f"too slow: estimated {seconds:.0f} s for {steps} steps > {config.time_cap_s:g} s "
                f"cap (at {throughput / 1e9:.2g} GFLOP/s, the previous grid's)"
            )
    return None
