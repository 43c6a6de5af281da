"""What the grid mixers do alike with their grid: read the causal axes they are given, mix the grid
tokens in at least float32 with the prefix tokens left as they are (their layers applied in that
dtype), and copy themselves onto another grid of the same rank (the first step of every ``regrid_*``
function); :class:`GridTokenMixer` and :class:`GridMixer`, the bases of the per-channel mixers."""

from __future__ import annotations

import abc
import copy
from collections.abc import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from gridmix.core.grid import Grid, GridLike
from gridmix.mixers.contract import check_arguments, check_mixer_input, keywords_of


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


class GridTokenMixer(nn.Module):
    """A per-channel mixer of the grid tokens that passes its prefix tokens through (the token MLP,
    and every :class:`GridMixer`); timm's ``attn_layer`` contract.

    The constructor checks ``dim``, the mixer's own ``counts`` (positive integers by name),
    ``num_prefix_tokens`` and ``dtype`` (:func:`~gridmix.mixers.contract.check_arguments`), then
    keeps ``grid``, ``dim`` and ``num_prefix_tokens``; ``device`` and ``dtype`` say where and in
    which dtype the subclass builds its parameters (:func:`factory_kwargs`). The repr names
    :meth:`repr_parts` between the grid and the prefix.
    """

    def __init__(
        self,
        dim: int,
        grid: GridLike,
        counts: Mapping[str, int],
        *,
        num_prefix_tokens: int = 0,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        check_arguments(dim, num_prefix_tokens, dtype, **counts)
        self.grid = Grid.parse(grid)
        self.dim, self.num_prefix_tokens = dim, num_prefix_tokens

    @classmethod
    def keywords(cls) -> frozenset[str]:
        """The keyword arguments ``cls`` takes, its own and its bases': what its builder passes on
        (:func:`~gridmix.mixers.contract.taken`)."""
        bases = [base for base in cls.__mro__ if issubclass(base, GridTokenMixer)]
        return frozenset().union(*map(keywords_of, bases))

    def repr_parts(self) -> tuple[str, ...]:
        """The ``name=value`` parts of the repr between the grid and the prefix."""
        return ()

    def extra_repr(self) -> str:
        return ", ".join(
            [
                f"dim={self.dim}",
                f"grid={self.grid}",
                *self.repr_parts(),
                f"prefix={self.num_prefix_tokens} (identity)",
            ]
        )


class GridMixer(GridTokenMixer, metaclass=abc.ABCMeta):
    """A :class:`GridTokenMixer` that mixes in at least float32, causal along ``causal_axes``, and
    changes resolution (Hyena, S4ND, Mamba, the global filter).

    The constructor keeps ``causal_axes`` (:func:`causal_set`) besides the base's arguments.
    ``forward`` runs :meth:`mix` on the grid tokens (:func:`mix_grid_tokens`); :meth:`regrid`
    copies the mixer onto another grid of the same rank (:meth:`copy_onto`).
    """

    expected = "a GridMixer"  # the class in a regrid error, with its article
    described = "the {d}-d grid mixer on {grid}"  # the mixer in a regrid error (same_rank_copy)

    def __init__(
        self,
        dim: int,
        grid: GridLike,
        counts: Mapping[str, int],
        *,
        causal_axes: Sequence[int] = (),
        **token_kwargs,
    ) -> None:
        super().__init__(dim, grid, counts, **token_kwargs)
        self.causal_axes = causal_set(causal_axes, self.grid)

    @abc.abstractmethod
    def mix(self, u: torch.Tensor) -> torch.Tensor:
        """The mixer on the grid tokens: (B, *grid, C) → (B, *grid, C), in ``u``'s dtype."""

    def forward(
        self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool = False
    ) -> torch.Tensor:
        """``x``: (B, P + N, C) with P prefix tokens first, then the grid in row-major order;
        returns its shape.

        Causal along ``causal_axes`` whatever ``is_causal`` says. :meth:`mix` runs in at least
        float32 with autocast off; the result comes back in ``x``'s dtype.
        """
        check_mixer_input(self, x, attn_mask, is_causal)
        return mix_grid_tokens(x, self.grid, self.num_prefix_tokens, self.mix)  # (B, P + N, C)

    @classmethod
    def copy_onto(cls, module: nn.Module, grid: GridLike, caller: str) -> GridMixer:
        """``module``, one of ``cls``, on another grid of the same rank: a copy with the same
        parameters (:func:`same_rank_copy`, ``caller`` the function given ``module``), then
        :meth:`fit_grid` of the copy."""
        other = same_rank_copy(
            module, grid, cls, caller=caller, expected=cls.expected, described=cls.described
        )
        other.fit_grid(module)
        return other

    def fit_grid(self, source: GridMixer) -> None:
        """Adapt what depends on the grid's lengths after the copy of ``source`` onto this grid:
        nothing where no parameter does, the same grid giving the same mixer bit for bit."""

    def regrid(self, grid: GridLike) -> GridMixer:
        """This mixer on another grid of the same rank (:meth:`copy_onto`)."""
        return self.copy_onto(self, grid, caller=f"{type(self).__name__}.regrid")


def factory_kwargs(grid_kwargs: Mapping[str, object]) -> dict:
    """``device`` and ``dtype`` of a :class:`GridTokenMixer`'s keyword arguments (``None`` where not
    given), for the parameters its subclass builds."""
    return {name: grid_kwargs.get(name) for name in ("device", "dtype")}
