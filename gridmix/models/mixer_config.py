"""Small configs shared by the model builders: the transformer backbone and the token mixer that replaces attention."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torch import nn

from gridmix.core.grid import Grid
from gridmix.mixers.builtin import BUILTIN
from gridmix.mixers.concentration.factors import STARTS
from gridmix.mixers.concentration.layer import CAUSAL_FORMS

# The idea, its ablation (no eigenvalue cap) and the no-mixing control, by the registered mixer each kind is.
KIND_MIXERS = {"concentration": "concentration", "uncapped": "concentration-uncapped", "tokenwise": "tokenwise"}
MIXER_KINDS = tuple(KIND_MIXERS)


@dataclass(frozen=True)
class BackboneConfig:
    """Width, depth and MLP of a pre-norm transformer; identical for the idea and its matched baseline."""

    embed_dim: int = 32
    depth: int = 2
    num_heads: int = 2
    mlp_ratio: float = 2.0

    def __post_init__(self) -> None:
        if self.embed_dim < 1 or self.num_heads < 1:
            raise ValueError(f"embed_dim={self.embed_dim}, num_heads={self.num_heads}; expected positive integers")
        if self.embed_dim % self.num_heads != 0:
            raise ValueError(f"embed_dim={self.embed_dim} must be divisible by num_heads={self.num_heads}")
        if self.depth < 1 or self.mlp_ratio <= 0:
            raise ValueError(f"depth={self.depth}, mlp_ratio={self.mlp_ratio}; expected depth >= 1, mlp_ratio > 0")


@dataclass(frozen=True)
class MixerConfig:
    """How the mixer is set up when it replaces attention (see :class:`ConcentrationMixer`).

    ``kind``: ``"concentration"`` (the idea), ``"uncapped"`` (its ablation, ``spectrum="uncapped"``) or
    ``"tokenwise"`` (the no-mixing control, :class:`TokenwiseMixer`); the other fields are the same for all.
    ``start``: where the factors start, ``"lowpass"``, ``"global"`` or ``"mean"``, one for all axes or one per axis
    (docs/mixer.md, "Where the mixer starts"). ``causal_form``: ``"toeplitz"`` (the default) or
    ``"semiseparable"`` (a sum of ``terms`` decaying exponentials per head; docs/mixer.md, "Causal axes").
    """

    rank: int = 16
    causal_axes: tuple[int, ...] = ()
    kind: str = "concentration"
    start: str | tuple[str, ...] = "lowpass"
    causal_form: str = "toeplitz"
    terms: int = 16

    def __post_init__(self) -> None:
        if self.kind not in MIXER_KINDS:
            raise ValueError(f"MixerConfig kind={self.kind!r}; expected one of {MIXER_KINDS}")
        starts = (self.start,) if isinstance(self.start, str) else self.start
        if not starts or any(s not in STARTS for s in starts):
            raise ValueError(f"MixerConfig start={self.start!r}; expected one of {STARTS}, or one of them per axis")
        if self.causal_form not in CAUSAL_FORMS:
            raise ValueError(f"MixerConfig causal_form={self.causal_form!r}; expected one of {CAUSAL_FORMS}")
        if isinstance(self.terms, bool) or not isinstance(self.terms, int) or self.terms < 1:
            raise ValueError(f"MixerConfig terms={self.terms!r}; expected a positive integer")

    def mixer_kwargs(self) -> dict:
        """This configuration as keyword arguments of the registered ``concentration`` mixers' builder (a track's
        ``Backbone``)."""
        return dict(rank=self.rank, start=self.start, causal_form=self.causal_form, terms=self.terms)

    def attn_layer(self, grid: Grid | Sequence[int]) -> type[nn.Module]:
        """timm's ``attn_layer`` on ``grid``: the registered mixer of this ``kind`` (:data:`KIND_MIXERS`) by its
        :meth:`~gridmix.mixers.contract.MixerSpec.layer`, with these settings (the control takes none)."""
        mixer_kwargs = {} if self.kind == "tokenwise" else self.mixer_kwargs()
        return BUILTIN[KIND_MIXERS[self.kind]].layer(grid, causal_axes=self.causal_axes, **mixer_kwargs)
