"""What the grid mixers do alike with their grid: read the causal axes they are given, mix the grid
tokens in at least float32 with the prefix tokens left as they are (their layers applied in that
dtype), and copy themselves onto another grid of the same rank (the first step of every ``regrid_*``
function)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from gridmix.core.grid import Grid, GridLike


def causal_set(causal_axes: Sequence[int], grid: Grid) -> tuple[int, ...]:
    """``causal_axes`` as sorted non-negative axes of ``grid`` (negative indices allowed);
    ``ValueError`` for an axis it does not have."""
    d, found = grid.ndim, set()
    for axis in causal_axes:
        if isinstance(axis, bool) or not isinstance(axis, int) or not -d <= axis < d:
            raise ValueError(
                f"causal axis {axis!r} for the {d}-d grid {grid}; expected an integer in [{-d}, "
                f"{d - 1}]"
            )
        found.add(axis % d)
    return tuple(sorted(found))


def same_rank_copy(
    module: nn.Module,
    grid: GridLike,
    kinds: type | tuple[type, ...],
    *,
    caller: str,
    expected: str,
    described: str,
) -> nn.Module:
    """A deep copy of ``module`` whose ``grid`` is ``grid``, of the same rank as the module's own;
    the caller then adapts what depends on the grid. ``ValueError`` in one line when ``module`` is
    none of ``kinds`` (``caller`` got it; ``expected`` names them) or the ranks differ
    (``described``: the module, a format of its class ``name``, its grid's rank ``d`` and its
    ``grid``, e.g. ``"the {d}-d S4ND mixer on {grid}"``)."""
    if not isinstance(module, kinds):
        raise ValueError(f"{caller} got a {type(module).__name__}; expected {expected}")
    grid = Grid.parse(grid)
    if grid.ndim != module.grid.ndim:
        what = described.format(name=type(module).__name__, d=module.grid.ndim, grid=module.grid)
        raise ValueError(
            f"cannot regrid {what} to the {grid.ndim}-d grid {grid}; expected a "
            f"{module.grid.ndim}-d grid"
        )
    other = copy.deepcopy(module)
    other.grid = grid
    return other


def mix_grid_tokens(
    x: torch.Tensor,
    grid: Grid,
    prefix: int,
    mix: Callable[[torch.Tensor], torch.Tensor],
    then: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """``x`` (B, P + N, C) with its ``prefix`` tokens unchanged and its grid tokens replaced by
    ``mix`` of them as (B, *grid, C), run in at least float32 with autocast off, its result back in
    ``x``'s dtype and then passed through ``then`` (in that dtype, as (B, N, C)) where given."""
    B, _, C = x.shape
    work = torch.promote_types(x.dtype, torch.float32)
    with torch.autocast(x.device.type, enabled=False):
        y = mix(x[:, prefix:].reshape(B, *grid, C).to(work))  # (B, *grid, C)
    y = y.reshape(B, grid.numel, C).to(x.dtype)  # (B, N, C)
    if then is not None:
        y = then(y)  # (B, N, C)
    return torch.cat([x[:, :prefix], y], dim=1) if prefix else y  # (B, P + N, C)


def linear(layer: nn.Linear, t: torch.Tensor) -> torch.Tensor:
    """``layer`` applied in ``t``'s dtype (its parameters cast): (…, in) → (…, out)."""
    bias = None if layer.bias is None else layer.bias.to(t.dtype)
    return F.linear(t, layer.weight.to(t.dtype), bias)
