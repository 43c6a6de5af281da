"""The leak check: is a mixer or a model built with causal axes really causal? Checked numerically
before it trains.

**The grid.** A mixer is checked on :func:`check_grid`: its causal axes keep the study grid's full
length, its other axes shrink to at most :data:`CHECK_SIDE` tokens, and where that still holds more
than :data:`MAX_CHECK_TOKENS` tokens the longest causal axis is cut until it fits (the record names
the grid, so what was seen is known). A whole model is checked on the study grid itself, or not at
all above :data:`MAX_CHECK_TOKENS` tokens.

**Threshold probes.** A probe is a causal axis ``a`` and a threshold ``p``: every output token at
coordinate ``<= p`` on ``a`` may depend on no input token at coordinate ``> p`` on ``a``. One probe
tests all those outputs at once, so a leak from output ``i`` to a later input ``j`` (``j_a > i_a``)
is seen by every probe with ``i_a <= p < j_a``. :func:`thresholds` chooses at most
:data:`MAX_PROBES` probes over all causal axes: every threshold where the axis is short enough (the
check is then exhaustive), else the first half of the budget at ``0, 1, 2, …`` and the rest evenly
spread to the end. So a leak at *any* offset is seen from the early outputs, a leak whose offset is
at least the spread's gap is seen wherever it occurs, and a leak confined to late positions with a
short offset is seen only if it straddles a threshold.

**A mixer** (:func:`first_leak`) maps a random input ``x`` (1, N, C) to ``y``; each probe is one
backward pass of ``⟨r, y⟩`` over its outputs (``r`` random, so no gradient cancels by chance),
giving the gradient with respect to every input token; a later input's must be zero. A leak is then
traced to its first output token by bisection (at most ``log2 N + 2`` more backward passes). **A
whole model** (:func:`first_model_leak`) is checked by perturbation, since its inputs may be token
ids: its predictions must keep the grid's axes first, ``(B, *grid, …)``; each probe replaces the
inputs later than ``p`` by other values (ids drawn from those the data holds, or the input plus
noise), and its predictions at ``<= p`` must not change. A model whose predictions pool the tokens
(a classifier) cannot be checked token-wise: :class:`Uncheckable` says so.

**Cost.** A mixer: one forward and at most ``MAX_PROBES + log2 N + 2`` backward passes of one layer,
batch 1, at :data:`~gridmix.orchestrate.leak_check.CHECK_DIM` channels, on at most
``MAX_CHECK_TOKENS`` tokens. A model: forward passes only (no gradient), of at most ``MAX_PROBES +
1`` samples, fewer on long grids (:func:`model_probes`: the probes perturb at most
:data:`MODEL_TOKENS` tokens, half a training batch of 32 at 1,024 tokens), in batches of at most
``MAX_CHECK_TOKENS`` tokens.

**Tolerance.** The checks run in float64 (float32 where the mixer or model cannot), and a gradient
or change counts as a leak above ``1e-10`` (float32: ``1e-5``) of the largest one the probes saw, so
FFT rounding is not a leak but any real dependence is. When nothing the probes saw depends on the
input at all, the check cannot tell and says so (:class:`Uncheckable`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import torch
from torch import nn

from gridmix.core.grid import Grid

CHECK_SIDE = (
    6  # tokens per non-causal axis of a mixer's check grid (fewer where the study grid is smaller)
)
MAX_CHECK_TOKENS = 2048  # tokens of a check grid (a mixer's) or a check batch (a model's), at most
MAX_PROBES = 32  # threshold probes per check, over all causal axes
MODEL_TOKENS = (
    16384  # tokens a model's probes perturb, at most (fewer probes on long grids, at least 4)
)
TOLERANCE = {torch.float64: 1e-10, torch.float32: 1e-5}
FAILURES = (RuntimeError, TypeError, NotImplementedError)  # what a mixer without float64 raises


class Uncheckable(ValueError):
    """The check cannot tell whether this mixer or model is causal, and says why in one line."""


@dataclass(frozen=True)
class Leak:
    """Output token ``output`` (grid coordinates) depends on the later input token ``later`` by
    ``gradient`` (its largest absolute entry, relative to the largest of all: ``relative``)."""

    output: tuple[int, ...]
    later: tuple[int, ...]
    gradient: float
    relative: float


@dataclass(frozen=True)
class ModelLeak:
    """The model's prediction at ``output`` changes by ``change`` (``relative`` to the largest
    change the probes saw) when only the inputs later than ``threshold`` on causal axis ``axis``
    change."""

    output: tuple[int, ...]
    axis: int
    threshold: int
    change: float
    relative: float


@dataclass(frozen=True)
class Probe:
    """Causal axis ``axis`` at threshold ``threshold``: outputs at ``<= threshold`` see no input
    beyond it."""

    axis: int
    threshold: int


def check_grid(grid: Grid, causal_axes: Sequence[int]) -> Grid:
    """The grid a mixer is checked on (module docstring): ``grid``'s causal axes at full length, the
    others at most :data:`CHECK_SIDE` tokens, the longest causal axis cut while it holds more than
    :data:`MAX_CHECK_TOKENS`."""
    grid = Grid.parse(grid)
    causal = {axis % grid.ndim for axis in causal_axes}
    shape = [n if axis in causal else min(n, CHECK_SIDE) for axis, n in enumerate(grid)]
    while math.prod(shape) > MAX_CHECK_TOKENS:
        longest = max(causal, key=lambda axis: shape[axis])
        shape[longest] = max(1, shape[longest] * MAX_CHECK_TOKENS // math.prod(shape))
    return Grid(tuple(shape))


def thresholds(
    grid: Grid, causal_axes: Sequence[int], budget: int = MAX_PROBES
) -> tuple[Probe, ...]:
    """The probes (module docstring): per causal axis of ``n`` tokens an equal share of ``budget``,
    every threshold ``0 … n − 2`` when they fit, else the first half of the share at ``0, 1, …`` and
    the rest evenly to ``n − 2``."""
    grid = Grid.parse(grid)
    axes = sorted({axis % grid.ndim for axis in causal_axes})
    share = max(4, budget // max(1, len(axes)))
    probes = []
    for axis in axes:
        last = grid[axis] - 2  # the last threshold with a later input
        if last + 1 <= share:
            chosen = range(last + 1)
        else:
            head = share // 2
            spread = [
                head + round(k * (last - head) / (share - head - 1)) for k in range(share - head)
            ]
            chosen = sorted({*range(head), *spread})
        probes += [Probe(axis, p) for p in chosen]
    return tuple(probes)


def model_probes(grid: Grid) -> int:
    """The probe budget of a whole model on ``grid``: :data:`MAX_PROBES`, fewer where they would
    perturb more than :data:`MODEL_TOKENS` tokens in all, never fewer than 4."""
    return min(MAX_PROBES, max(4, MODEL_TOKENS // Grid.parse(grid).numel))


def first_leak(
    build: Callable[[torch.dtype], nn.Module],
    grid: Grid,
    causal_axes: Sequence[int],
    *,
    dim: int,
    seed: int = 0,
) -> Leak | None:
    """The first leak of the mixer ``build(dtype)`` on ``grid`` (its own grid: (1, N, dim) in and
    out), or ``None``.

    ``build`` returns a fresh mixer in that dtype; float64 is tried first, float32 if building or
    running in float64 fails. Probes run in :func:`thresholds`' order; the leak names the first
    later input (row-major) the first leaking probe sees, and the first output token (row-major)
    that depends on it. :class:`Uncheckable` when no output depends on any input.
    """
    grid = Grid.parse(grid)
    probes = thresholds(grid, causal_axes)
    if not probes:  # every causal axis holds one token: there is nothing later to leak from
        return None
    try:
        return _first_leak(build, grid, probes, dim, torch.float64, seed)
    except FAILURES:  # a mixer without float64 (a float32-only kernel)
        return _first_leak(build, grid, probes, dim, torch.float32, seed)


def _coordinates(grid: Grid) -> torch.Tensor:
    """Every token's grid coordinates, in row-major order: (N, d)."""
    return torch.stack(torch.unravel_index(torch.arange(grid.numel), grid.shape), dim=-1)  # (N, d)


def _seeded(
    build: Callable[[torch.dtype], nn.Module], dtype: torch.dtype, seed: int
) -> tuple[nn.Module, torch.Generator]:
    """``build(dtype)`` under ``torch.manual_seed(seed)`` with the global RNG restored after, and a
    generator seeded with ``seed`` for the probes' inputs."""
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build(dtype), generator


def _first_leak(
    build: Callable[[torch.dtype], nn.Module],
    grid: Grid,
    probes: Sequence[Probe],
    dim: int,
    dtype: torch.dtype,
    seed: int,
) -> Leak | None:
    mixer, generator = _seeded(build, dtype, seed)
    # (1, N, C)
    x = torch.randn(1, grid.numel, dim, generator=generator, dtype=dtype).requires_grad_()
    y = mixer(x)  # (1, N, C)
    if y.shape != x.shape:
        raise ValueError(
            f"the mixer maps {tuple(x.shape)} to {tuple(y.shape)}; expected the same shape"
        )
    weights = torch.randn(grid.numel, dim, generator=generator, dtype=dtype)  # (N, C): r

    def gradient(outputs: torch.Tensor) -> torch.Tensor:
        """``max_c |∂⟨r, y⟩ / ∂x_j,c|`` over the outputs the mask ``outputs`` (N,) keeps: (N,)."""
        (grad,) = torch.autograd.grad(
            (y[0] * weights * outputs[:, None]).sum(), x, retain_graph=True
        )  # (1, N, C)
        return grad[0].abs().amax(dim=-1).detach()  # (N,)

    coords = _coordinates(grid)  # (N, d)
    seen = [
        (probe, gradient((coords[:, probe.axis] <= probe.threshold).to(dtype))) for probe in probes
    ]
    scale = max((float(g.max()) for _, g in seen), default=0.0)
    if scale == 0.0:
        raise Uncheckable(
            f"no output of the mixer depends on its input on the check grid {grid}, so a leak "
            "could not be seen"
        )
    limit = TOLERANCE[dtype] * scale
    for probe, grads in seen:
        later = (coords[:, probe.axis] > probe.threshold) & (grads > limit)  # (N,)
        if later.any():
            j = int(later.nonzero()[0])
            # (M,) row-major
            candidates = (coords[:, probe.axis] <= probe.threshold).nonzero()[:, 0]
            i = int(candidates[_first_source(gradient, candidates, j, limit, grid.numel, dtype)])
            value = float(
                gradient(torch.nn.functional.one_hot(torch.tensor(i), grid.numel).to(dtype))[j]
            )
            return Leak(
                output=tuple(coords[i].tolist()),
                later=tuple(coords[j].tolist()),
                gradient=value,
                relative=value / scale,
            )
    return None


def _first_source(
    gradient: Callable[[torch.Tensor], torch.Tensor],
    candidates: torch.Tensor,
    j: int,
    limit: float,
    n: int,
    dtype: torch.dtype,
) -> int:
    """The first of ``candidates`` (output tokens, row-major) whose gradient at input ``j`` is above
    ``limit``, by bisection over prefixes of ``candidates`` (all of them together are known to
    leak)."""
    low, high = 0, len(candidates) - 1  # the first leaking candidate lies in [low, high]
    while low < high:
        middle = (low + high) // 2
        mask = torch.zeros(n, dtype=dtype)
        mask[candidates[: middle + 1]] = 1
        if float(gradient(mask)[j]) > limit:
            high = middle
        else:
            low = middle + 1
    return low


def first_model_leak(
    build: Callable[[torch.dtype], nn.Module],
    sample: torch.Tensor,
    grid: Grid,
    causal_axes: Sequence[int],
    *,
    values: torch.Tensor | None = None,
    seed: int = 0,
) -> ModelLeak | None:
    """The first leak of the model ``build(dtype)`` (in eval mode) on one input ``sample`` (1, …,
    *grid), or ``None``.

    ``values``: for integer inputs, the values an input may take (those the data holds); each probe
    replaces the inputs later than its threshold with values drawn from them (float inputs: the
    input plus unit-scaled noise). :class:`Uncheckable` when the predictions do not keep the grid's
    axes first, the grid holds more than :data:`MAX_CHECK_TOKENS` tokens, or no prediction changes
    with the inputs.
    """
    grid = Grid.parse(grid)
    if grid.numel > MAX_CHECK_TOKENS:
        raise Uncheckable(
            f"the grid {grid} holds {grid.numel} tokens, more than the check's {MAX_CHECK_TOKENS}"
        )
    probes = thresholds(grid, causal_axes, model_probes(grid))
    if not probes:
        return None
    try:
        return _first_model_leak(build, sample, grid, probes, values, torch.float64, seed)
    except FAILURES:
        return _first_model_leak(build, sample, grid, probes, values, torch.float32, seed)


def _first_model_leak(
    build: Callable[[torch.dtype], nn.Module],
    sample: torch.Tensor,
    grid: Grid,
    probes: Sequence[Probe],
    values: torch.Tensor | None,
    dtype: torch.dtype,
    seed: int,
) -> ModelLeak | None:
    model, generator = _seeded(build, dtype, seed)
    model.eval()
    base = sample if not sample.is_floating_point() else sample.to(dtype)  # (1, …, *grid)
    if base.is_floating_point():
        other = base + torch.randn(base.shape, generator=generator, dtype=dtype)  # (1, …, *grid)
    else:
        pool = values if values is not None and values.numel() > 1 else base.unique()
        other = pool[torch.randint(len(pool), base.shape, generator=generator)]  # (1, …, *grid)
    coords = _coordinates(grid).reshape(*grid.shape, grid.ndim)  # (*grid, d)
    # each (*grid): the inputs replaced
    masks = [coords[..., probe.axis] > probe.threshold for probe in probes]
    # (K + 1, …, *grid)
    inputs = torch.cat([base] + [torch.where(mask, other, base) for mask in masks])
    per_batch = max(1, MAX_CHECK_TOKENS // grid.numel)
    with torch.no_grad():
        out = torch.cat([model(part) for part in inputs.split(per_batch)])  # (K + 1, *grid, …)
    if out.ndim < 1 + grid.ndim or tuple(out.shape[1 : 1 + grid.ndim]) != grid.shape:
        raise Uncheckable(
            f"its predictions {tuple(out.shape)} do not keep the grid's axes first (B, "
            f"{', '.join(map(str, grid))}, …), so one token's prediction cannot be told from "
            "another's"
        )
    # (K, *grid)
    change = (out[1:] - out[:1]).abs().reshape(len(probes), *grid.shape, -1).amax(dim=-1)
    scale = float(change.max())
    if scale == 0.0:
        raise Uncheckable(
            f"no prediction changes with the inputs on grid {grid}, so a leak could not be seen"
        )
    limit = TOLERANCE[dtype] * scale
    for probe, seen in zip(probes, change):
        early = (coords[..., probe.axis] <= probe.threshold) & (seen > limit)  # (*grid)
        if early.any():
            where = tuple(int(c) for c in early.nonzero()[0])
            value = float(seen[where])
            return ModelLeak(
                output=where,
                axis=probe.axis,
                threshold=probe.threshold,
                change=value,
                relative=value / scale,
            )
    return None


_REFUSALS = {  # what leaked, the evidence, the rule
    Leak: "mixer {name!r} leaks the future on causal axes {axes}: on the check grid {grid} its"
    " output at {output} has gradient {gradient:.3g} ({relative:.2g} of the largest) with respect"
    " to the later input at {later}; a causal mixer must give later inputs zero gradient",
    ModelLeak: "model {name!r} leaks the future on causal axes {axes}: on grid {grid} its"
    " prediction at {output} changes by {change:.3g} ({relative:.2g} of the largest change) when"
    " only the inputs after position {threshold} on axis {axis} change; a causal model's"
    " predictions must not depend on later inputs",
}


def describe(name: str, leak: Leak | ModelLeak, causal_axes: Sequence[int], grid: Grid) -> str:
    """The refusal of a leaking mixer or model, in one line."""
    return _REFUSALS[type(leak)].format(
        name=name, axes=tuple(causal_axes), grid=grid, **asdict(leak)
    )
