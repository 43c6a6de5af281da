"""The leak check: is a mixer built with causal axes really causal? Checked numerically before it trains.

On a small grid of the same rank, the mixer (built with ``causal_axes``) maps a random input ``x`` (1, N, C); for
every output token ``i`` a backward pass of ``⟨r_i, y_i⟩`` (``r_i`` random, so no gradient cancels by chance) gives
the gradient with respect to every input token ``j``. A token ``j`` is *later* than ``i`` when it is further along
any causal axis; its gradient must be zero. The check runs in float64 (float32 where the mixer cannot), and a
gradient counts as a leak above ``1e-10`` (float32: ``1e-5``) of the largest one, so FFT rounding is not a leak
but any real dependence is. :func:`first_leak` names the first leaking position; ``None`` when there is none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from gridmix.grid import Grid

CHECK_SIDE = 6  # tokens per axis of the check grid (fewer where the model's grid is smaller)
TOLERANCE = {torch.float64: 1e-10, torch.float32: 1e-5}


@dataclass(frozen=True)
class Leak:
    """Output token ``output`` (grid coordinates) depends on the later input token ``later`` by ``gradient``
    (its largest absolute entry, relative to the largest of all: ``relative``)."""

    output: tuple[int, ...]
    later: tuple[int, ...]
    gradient: float
    relative: float


def check_grid(grid: Grid) -> Grid:
    """The grid the check runs on: ``grid``'s rank, at most :data:`CHECK_SIDE` tokens per axis."""
    return Grid(tuple(min(n, CHECK_SIDE) for n in Grid.parse(grid)))


def first_leak(build: Callable[[torch.dtype], nn.Module], grid: Grid, causal_axes: Sequence[int], *, dim: int,
               seed: int = 0) -> Leak | None:
    """The first leak of the mixer ``build(dtype)`` on ``grid`` (its own grid: (1, N, dim) in and out), or ``None``.

    ``build`` returns a fresh mixer in that dtype; float64 is tried first, float32 if building or running in float64
    fails. Output tokens are visited in row-major order, the later inputs of each likewise.
    """
    grid, causal_axes = Grid.parse(grid), tuple(causal_axes)
    try:
        gradients, dtype = _token_gradients(build, grid, dim, torch.float64, seed), torch.float64
    except (RuntimeError, TypeError, NotImplementedError):  # a mixer without float64 (a float32-only kernel)
        gradients, dtype = _token_gradients(build, grid, dim, torch.float32, seed), torch.float32
    scale = float(gradients.max())
    limit = TOLERANCE[dtype] * scale if scale > 0 else 0.0
    coords = [tuple(int(c) for c in torch.unravel_index(torch.tensor(i), grid.shape)) for i in range(grid.numel)]
    for i, here in enumerate(coords):
        for j, there in enumerate(coords):
            later = any(there[axis] > here[axis] for axis in causal_axes)
            if later and float(gradients[i, j]) > limit:
                value = float(gradients[i, j])
                return Leak(output=here, later=there, gradient=value, relative=value / scale if scale else float("inf"))
    return None


def _token_gradients(build: Callable[[torch.dtype], nn.Module], grid: Grid, dim: int, dtype: torch.dtype,
                     seed: int) -> torch.Tensor:
    """``G[i, j] = max_c |∂⟨r_i, y_i⟩ / ∂x_j,c|`` over one random input: (N, N)."""
    generator = torch.Generator().manual_seed(seed)
    mixer = build(dtype)
    x = torch.randn(1, grid.numel, dim, generator=generator, dtype=dtype).requires_grad_()  # (1, N, C)
    y = mixer(x)  # (1, N, C)
    if y.shape != x.shape:
        raise ValueError(f"the mixer maps {tuple(x.shape)} to {tuple(y.shape)}; expected the same shape")
    weights = torch.randn(grid.numel, dim, generator=generator, dtype=dtype)  # (N, C): r_i
    rows = []
    for i in range(grid.numel):
        (grad,) = torch.autograd.grad((y[0, i] * weights[i]).sum(), x, retain_graph=True)  # (1, N, C)
        rows.append(grad[0].abs().amax(dim=-1))  # (N,)
    return torch.stack(rows).detach()  # (N, N)


def describe(name: str, leak: Leak, causal_axes: Sequence[int], grid: Grid) -> str:
    """The refusal, in one line."""
    return (f"mixer {name!r} leaks the future on causal axes {tuple(causal_axes)}: on the check grid {grid} its output "
            f"at {leak.output} has gradient {leak.gradient:.3g} ({leak.relative:.2g} of the largest) with respect to "
            f"the later input at {leak.later}; a causal mixer must give later inputs zero gradient")
