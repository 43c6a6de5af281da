"""Small configs shared by the model builders: the transformer backbone, and the concentration
mixer's settings a track hands its ``Backbone`` (the models themselves are built from the registered
mixers)."""

from __future__ import annotations

from dataclasses import dataclass

from gridmix.mixers.concentration.factors import STARTS
from gridmix.mixers.concentration.layer import CAUSAL_FORMS


@dataclass(frozen=True)
class BackboneConfig:
    """Width, depth and MLP of a pre-norm transformer; identical for the idea and its matched
    baseline."""

    embed_dim: int = 32
    depth: int = 2
    num_heads: int = 2
    mlp_ratio: float = 2.0

    def __post_init__(self) -> None:
        if self.embed_dim < 1 or self.num_heads < 1:
            raise ValueError(
                f"embed_dim={self.embed_dim}, num_heads={self.num_heads}; expected positive "
                "integers"
            )
        if self.embed_dim % self.num_heads != 0:
            raise ValueError(
                f"embed_dim={self.embed_dim} must be divisible by num_heads={self.num_heads}"
            )
        if self.depth < 1 or self.mlp_ratio <= 0:
            raise ValueError(
                f"depth={self.depth}, mlp_ratio={self.mlp_ratio}; expected depth >= 1, mlp_ratio "
                "> 0"
            )


@dataclass(frozen=True)
class MixerConfig:
    """How a track sets up the concentration mixer and its ablation (see
    :class:`ConcentrationMixer`); the models are built from the registered mixers by the track's
    ``Backbone``, given :meth:`mixer_kwargs`.

    ``start``: where the factors start, ``"lowpass"``, ``"global"`` or ``"mean"``, one for all axes
    or one per axis (docs/mixer.md, "Where the mixer starts"). ``causal_form``: ``"toeplitz"`` (the
    default) or ``"semiseparable"`` (a sum of ``terms`` decaying exponentials per head;
    docs/mixer.md, "Causal axes").
    """

    rank: int = 16
    causal_axes: tuple[int, ...] = ()
    start: str | tuple[str, ...] = "lowpass"
    causal_form: str = "toeplitz"
    terms: int = 16

    def __post_init__(self) -> None:
        starts = (self.start,) if isinstance(self.start, str) else self.start
        if not starts or any(s not in STARTS for s in starts):
            raise ValueError(
                f"MixerConfig start={self.start!r}; expected one of {STARTS}, or one of them per "
                "axis"
            )
        if self.causal_form not in CAUSAL_FORMS:
            raise ValueError(
                f"MixerConfig causal_form={self.causal_form!r}; expected one of {CAUSAL_FORMS}"
            )
        if isinstance(self.terms, bool) or not isinstance(self.terms, int) or self.terms < 1:
            raise ValueError(f"MixerConfig terms={self.terms!r}; expected a positive integer")

    def mixer_kwargs(self) -> dict:
        """These settings as keyword arguments of the registered ``concentration`` mixers (a track's
        ``Backbone``)."""
        return dict(
            rank=self.rank, start=self.start, causal_form=self.causal_form, terms=self.terms
        )
