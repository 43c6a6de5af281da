"""The mixer contract and its registry: what a token mixer declares so that any track can train it
in its backbone.

**The contract.** A token mixer is timm's ``attn_layer``: a module that maps ``x`` (B, P + N, C) to
the same shape, where the first P tokens are prefix (class or register) tokens and the N grid tokens
follow in row-major order (the last axis fastest), with ``forward(x, attn_mask=None,
is_causal=False)``. A :class:`MixerSpec` registers one under a name with its builder

    build(dim, grid, *, num_heads, causal_axes, num_prefix_tokens, **mixer_kwargs) -> nn.Module

where ``grid`` is a :class:`~gridmix.core.grid.Grid`, ``causal_axes`` the grid axes on which no
token may see a later one (exactly: a later input has zero gradient), ``num_prefix_tokens`` is P,
and ``mixer_kwargs`` are the builder's own keyword arguments (a track sets them per mixer, e.g.
``rank=16``). timm's ``Block`` also passes ``qkv_bias``, ``qk_norm``, ``attn_drop``, ``proj_drop``,
``norm_layer``, ``device``, ``dtype`` and others: a builder accepts them all (``**kwargs``), builds
its parameters on ``device``/``dtype`` where given, and may ignore the rest.

**Capabilities.** A spec declares what it can serve, and a track refuses a mixer that cannot serve
it before any training (:meth:`MixerSpec.unfit`): the grid ranks it takes (``None``: any), its
causal form (:data:`CAUSAL`: ``"none"`` sees every token, ``"first"`` is exactly causal along the
first grid axis, ``"any"`` along any set of axes), whether it takes prefix tokens, a token limit,
and whether it changes resolution (``regrid``: the same parameters on another grid). Optionally it
names its ablation (another registered mixer, the idea with its mechanism removed) and a mechanism
analysis (``mechanism(model, inputs) -> dict`` of a trained model), with the hook that merges every
seed's analysis into the study's (``combine_mechanism(per_seed) -> dict``): the report reaches a
mixer's own analysis only through these two.

**The one construction path.** :meth:`MixerSpec.layer` is the only way from a registered mixer to a
model: it checks the capabilities, binds the grid and the builder's keyword arguments, and returns
timm's ``attn_layer``; every module it builds carries the mixer's name in :data:`MIXER_TAG`, which
is how a trained model's mixers are found again (:mod:`gridmix.models.regrid`). A track's
:class:`~gridmix.tracks.contract.Backbone` puts that layer in its network.

**The registry.** Mixers reach gridmix through the ``gridmix_mixers`` hook
(:mod:`gridmix.tracks.hookspecs`), the built-in ones too (:mod:`gridmix.mixers.builtin`);
:class:`MixerTable` is what the plugin registry keeps of them.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from gridmix.core.grid import Grid
from gridmix.core.suggest import did_you_mean

CAUSAL = ("none", "first", "any")
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]*$")
MIXER_TAG = "gridmix_mixer"  # the registered mixer a module was built as (MixerSpec.layer sets it)


def check_input(
    x: torch.Tensor, attn_mask, is_causal: bool, *, causal: bool, prefix: int, grid: Grid, dim: int
) -> None:
    """What a mixer's ``forward`` checks against the contract: no ``attn_mask`` (causality is the
    built causal axes), ``is_causal`` only on a causal mixer, and ``x`` of shape (B, ``prefix`` +
    grid tokens, ``dim``)."""
    if attn_mask is not None:
        raise ValueError(
            f"attn_mask of shape {tuple(attn_mask.shape)}; expected None (causality is causal_axes)"
        )
    if is_causal and not causal:
        raise ValueError(
            "is_causal=True on a mixer built with causal_axes=(); expected causal_axes at build"
        )
    if x.ndim != 3 or x.shape[1] != prefix + grid.numel or x.shape[2] != dim:
        raise ValueError(token_count_error(tuple(x.shape), prefix=prefix, grid=grid, dim=dim))


def token_count_error(shape: tuple[int, ...], *, prefix: int, grid: Grid, dim: int) -> str:
    """The one-line error for a mixer input of ``shape`` that is not (B, ``prefix`` + grid tokens,
    ``dim``); when it holds k > 0 tokens beyond the grid's and the mixer was built for another
    number of prefix tokens, it says how to build the two alike (timm's ViT has ``class_token=True``
    by default: one prefix token the mixer must be told of)."""
    message = (
        f"x has shape {shape}; expected (B, {prefix} prefix + {grid.numel} grid tokens = "
        f"{prefix + grid.numel}, {dim})"
    )
    extra = shape[1] - grid.numel if len(shape) == 3 else 0
    if extra > 0 and extra != prefix:
        tokens, vit = (
            ("token", "class_token=False")
            if extra == 1
            else ("tokens", "class_token=False and reg_tokens=0")
        )
        message += (
            f"; the model has {extra} prefix (class) {tokens}: build the mixer with "
            f"num_prefix_tokens={extra} or the ViT with {vit}"
        )
    return message


def check_mixer_input(mixer: nn.Module, x: torch.Tensor, attn_mask, is_causal: bool) -> None:
    """:func:`check_input` against what ``mixer`` was built with: its ``grid``, ``dim``,
    ``num_prefix_tokens`` (0 where it has none) and ``causal_axes`` (none where it has none)."""
    check_input(
        x,
        attn_mask,
        is_causal,
        causal=bool(getattr(mixer, "causal_axes", ())),
        prefix=getattr(mixer, "num_prefix_tokens", 0),
        grid=mixer.grid,
        dim=mixer.dim,
    )


def check_prefix_tokens(num_prefix_tokens: int) -> None:
    """``num_prefix_tokens`` an integer >= 0; ``ValueError`` otherwise."""
    if (
        isinstance(num_prefix_tokens, bool)
        or not isinstance(num_prefix_tokens, int)
        or num_prefix_tokens < 0
    ):
        raise ValueError(f"num_prefix_tokens={num_prefix_tokens!r}; expected an integer >= 0")


def check_positive(name: str, value, what: str = "") -> None:
    """``value`` (the argument ``name``) a positive integer; ``ValueError`` otherwise, saying
    ``what`` it counts where given."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}={value!r}; expected a positive integer{what and f' ({what})'}")


def check_arguments(dim: int, num_prefix_tokens: int, dtype, **positive: int) -> None:
    """What a per-channel mixer's constructor checks of the contract's arguments: ``dim`` a positive
    integer, then each of ``positive`` (the mixer's own counts, by name), ``num_prefix_tokens`` an
    integer >= 0, ``dtype`` ``None`` or a real floating-point dtype."""
    check_positive("dim", dim, "channels")
    for name, value in positive.items():
        check_positive(name, value)
    check_prefix_tokens(num_prefix_tokens)
    if dtype is not None and not dtype.is_floating_point:
        raise ValueError(f"dtype={dtype}; expected a real floating-point dtype")


def refuse_causal(causal_axes: Sequence[int], mixer: str, how: str) -> None:
    """``ValueError`` for any causal axis of a builder whose ``mixer`` sees every token (``how``:
    why)."""
    causal_axes = tuple(causal_axes)
    if causal_axes:
        raise ValueError(
            f"{mixer} sees every token ({how}); got causal_axes={causal_axes}, expected ()"
        )


def keywords_of(module_class: type) -> frozenset[str]:
    """The keyword-only parameters of ``module_class``'s constructor: what a builder passes on to
    it (:func:`taken`)."""
    parameters = inspect.signature(module_class).parameters.values()
    return frozenset(p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY)


def taken(kwargs: Mapping[str, object], names: Collection[str]) -> dict:
    """The entries of a builder's ``kwargs`` named in ``names`` (the keyword arguments its module
    takes); timm's others are dropped."""
    return {name: value for name, value in kwargs.items() if name in names}


@dataclass(frozen=True)
class MixerSpec:
    """A registered token mixer: its name, builder and declared capabilities (module docstring).

    ``description`` says what it is in one line, ``reference`` which paper it follows.
    ``grid_ranks``: the grid dimensionalities it takes (``None``: any). ``causal``: one of
    :data:`CAUSAL`. ``prefix_tokens``: whether it takes prefix tokens. ``max_tokens``: the most grid
    tokens it is built for (``None``: no limit). ``regrid``: ``regrid(module, grid) -> module``
    gives the same mixer (its parameters) on another grid; ``None`` when it cannot change
    resolution. ``ablation``: another mixer's name. ``mechanism``: an analysis of a trained model
    holding the mixer; ``combine_mechanism``: every seed's analysis (``{seed: analysis}``) merged
    into the study's, required with ``mechanism``. ``plugin`` and ``plugin_version`` are filled in
    by the plugin registry.
    """

    name: str
    build: Callable[..., nn.Module]
    description: str = ""
    reference: str = ""
    grid_ranks: tuple[int, ...] | None = None
    causal: str = "none"
    prefix_tokens: bool = False
    max_tokens: int | None = None
    regrid: Callable[[nn.Module, Grid], nn.Module] | None = None
    ablation: str | None = None
    mechanism: Callable[..., dict] | None = None
    combine_mechanism: Callable[[Mapping[int, dict]], dict] | None = None
    plugin: str = ""
    plugin_version: str = ""

    def __post_init__(self) -> None:
        where = f"mixer {self.name!r}"
        if not isinstance(self.name, str) or not NAME_PATTERN.match(self.name):
            raise ValueError(
                f"{where}: name {self.name!r}; expected lower-case letters, digits and '-'"
            )
        if not callable(self.build):
            raise ValueError(f"{where}: build is {self.build!r}; expected a callable")
        if self.grid_ranks is not None and (
            not isinstance(self.grid_ranks, tuple)
            or not self.grid_ranks
            or any(not isinstance(d, int) or d < 1 for d in self.grid_ranks)
        ):
            raise ValueError(
                f"{where}: grid_ranks {self.grid_ranks!r}; expected None or a tuple of ranks >= 1"
            )
        if self.causal not in CAUSAL:
            raise ValueError(f"{where}: causal {self.causal!r}; expected one of {CAUSAL}")
        if self.max_tokens is not None and (
            not isinstance(self.max_tokens, int) or self.max_tokens < 1
        ):
            raise ValueError(
                f"{where}: max_tokens {self.max_tokens!r}; expected None or a positive integer"
            )
        for name in ("regrid", "mechanism", "combine_mechanism"):
            if getattr(self, name) is not None and not callable(getattr(self, name)):
                raise ValueError(
                    f"{where}: {name} is {getattr(self, name)!r}; expected None or a callable"
                )
        if (self.mechanism is None) != (self.combine_mechanism is None):
            raise ValueError(
                f"{where}: mechanism {self.mechanism!r} with combine_mechanism "
                f"{self.combine_mechanism!r}; expected both or neither"
            )
        if self.ablation is not None and (
            not isinstance(self.ablation, str) or self.ablation == self.name
        ):
            raise ValueError(
                f"{where}: ablation {self.ablation!r}; expected None or another mixer's name"
            )

    def unfit(
        self, grid: Grid, *, causal_axes: Sequence[int] = (), num_prefix_tokens: int = 0
    ) -> str | None:
        """Why this mixer cannot serve a model on ``grid`` with these causal axes and prefix tokens,
        or ``None``."""
        grid = Grid.parse(grid)
        if self.grid_ranks is not None and grid.ndim not in self.grid_ranks:
            ranks = " or ".join(f"{d}-d" for d in self.grid_ranks)
            return f"mixer {self.name!r} takes {ranks} grids; got the {grid.ndim}-d grid {grid}"
        if causal_axes and self.causal == "none":
            return (
                f"mixer {self.name!r} sees every token (not causal); this model needs causal axes "
                f"{tuple(causal_axes)}"
            )
        if self.causal == "first" and tuple(causal_axes) not in ((), (0,)):
            return (
                f"mixer {self.name!r} is causal along the first grid axis only; this model needs "
                f"causal axes {tuple(causal_axes)}"
            )
        if num_prefix_tokens and not self.prefix_tokens:
            return f"mixer {self.name!r} takes no prefix tokens; this model has {num_prefix_tokens}"
        if self.max_tokens is not None and grid.numel > self.max_tokens:
            return (
                f"mixer {self.name!r} is built for at most {self.max_tokens} tokens; got "
                f"{grid.numel} on {grid}"
            )
        return None

    def layer(
        self,
        grid: Grid,
        *,
        causal_axes: Sequence[int] = (),
        num_prefix_tokens: int = 0,
        **mixer_kwargs,
    ) -> type[nn.Module]:
        """timm's ``attn_layer`` for ``grid``: a class whose call ``cls(dim, num_heads=…,
        **timm_kwargs)`` builds this mixer (``mixer_kwargs`` given here win over timm's keyword
        arguments of the same name); every module it builds carries this mixer's name in its
        :data:`MIXER_TAG` attribute."""
        grid, causal_axes, spec = Grid.parse(grid), tuple(causal_axes), self
        reason = self.unfit(grid, causal_axes=causal_axes, num_prefix_tokens=num_prefix_tokens)
        if reason:
            raise ValueError(reason)

        def __new__(cls, dim: int, num_heads: int = 8, **timm_kwargs) -> nn.Module:
            module = spec.build(
                dim,
                grid,
                num_heads=num_heads,
                causal_axes=causal_axes,
                num_prefix_tokens=num_prefix_tokens,
                **{**timm_kwargs, **mixer_kwargs},
            )
            # how a trained model's mixers are found again (regrid)
            setattr(module, MIXER_TAG, spec.name)
            return module

        # __new__ returns the built module (not an instance of the class), so this class is never
        # instantiated itself
        return type(
            f"{self.name}@{grid}", (nn.Module,), {"__new__": __new__, "__module__": __name__}
        )

    def capabilities(self) -> dict:
        """The declared capabilities as plain data (what ``gridmix mixers --json`` prints)."""
        return dict(
            grid_ranks=list(self.grid_ranks) if self.grid_ranks else "any",
            causal=self.causal,
            prefix_tokens=self.prefix_tokens,
            max_tokens=self.max_tokens,
            resolution_change=self.regrid is not None,
            ablation=self.ablation,
            mechanism=self.mechanism is not None,
        )


@dataclass(frozen=True)
class MixerTable:
    """The registered mixers by name: ``table["global-filter"]``, ``"s4nd" in table``,
    ``table.names``."""

    mixers: Mapping[str, MixerSpec] = field(default_factory=dict)

    def __getitem__(self, name: str) -> MixerSpec:
        if name not in self.mixers:
            raise ValueError(
                f"unknown mixer {name!r}{did_you_mean(name, self.mixers)} registered: "
                f"{', '.join(self.mixers) or 'none'} (see `gridmix mixers`)"
            )
        return self.mixers[name]

    def __contains__(self, name: object) -> bool:
        return name in self.mixers

    def __iter__(self):
        return iter(self.mixers.values())

    def __len__(self) -> int:
        return len(self.mixers)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.mixers)
