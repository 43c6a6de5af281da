"""The arms every built-in track trains in one network: its matched baseline, the idea (the
concentration mixer), the idea's uncapped ablation and the no-mixing control, each built around its
registered mixer by the track's :class:`~gridmix.tracks.Backbone`, so any other registered mixer
drops into the same network."""

from __future__ import annotations

from collections.abc import Callable

from gridmix.mixers.builtin import BUILTIN
from gridmix.models import BackboneConfig, MixerConfig
from gridmix.tracks import Backbone, ModelSpec


def mixer_backbone(build: Callable, mixer: MixerConfig, **options) -> Backbone:
    """``build(grid, attn_layer, mlp_ratio=...)`` with any registered mixer as token mixer, its
    width set by ``mlp_ratio``; the idea and its ablation get ``mixer``'s settings (``options``:
    the backbone's ``prefix``, ``causal_axes``)."""
    kwargs = mixer.mixer_kwargs()
    return Backbone(
        build,
        width_kwarg="mlp_ratio",
        mixer_kwargs={"concentration": kwargs, "concentration-uncapped": kwargs},
        **options,
    )


def network_size(backbone: BackboneConfig, head: str = "") -> str:
    """The network's size as the models' descriptions give it: ``dim 32, depth 2, 2 heads, MLP
    x2`` (then ``head``, e.g. ``mean-pool head``)."""
    b = backbone
    size = f"dim {b.embed_dim}, depth {b.depth}, {b.num_heads} heads, MLP x{b.mlp_ratio:g}"
    return f"{size}, {head}" if head else size


def attention_arm(backbone: Backbone, name: str, network: str) -> ModelSpec:
    """The matched baseline ``name``: the ``network`` (its description) with dense attention."""
    return backbone.model(name, BUILTIN["attention"], description=network)


def idea_arms(backbone: Backbone, network: str, idea: str = "") -> tuple[ModelSpec, ...]:
    """The idea (``PREFIX-concentration``, its width matched through ``mlp_ratio``), its uncapped
    ablation and the no-mixing control, in the same ``network`` (``"transformer"``, ``"ViT"``);
    ``idea`` says more of the idea's mixer (``" (rank 16)"``)."""
    model, name = backbone.model, backbone.model_name
    return (
        model(
            name("concentration"),
            BUILTIN["concentration"],
            role="idea",
            width_kwarg="mlp_ratio",
            description=f"the same {network} with ConcentrationMixer{idea} as token mixer",
        ),
        model(
            name("concentration-uncapped"),
            BUILTIN["concentration-uncapped"],
            role="ablation",
            description="the idea without its eigenvalue cap (softplus eigenvalues), same "
            "everything else",
        ),
        model(
            name("tokenwise"),
            BUILTIN["tokenwise"],
            role="control",
            description=f"the same {network} with no token mixing (TokenwiseMixer: W_o W_v per "
            "token)",
        ),
    )
