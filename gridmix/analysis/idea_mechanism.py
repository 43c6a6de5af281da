"""The mechanism analysis after training: every trained idea model is analysed by its own mixer's
declared analysis (``MixerSpec.mechanism``; for the concentration mixer,
:mod:`gridmix.mixers.concentration.mechanism`, the check that the trained factors keep their
certificate), and the seeds' analyses are merged into the study's by the same mixer's
``MixerSpec.combine_mechanism``: the report reaches a mixer's own analysis only through these two
declarations. Whether the mechanism *helps* is the ablation comparison in the report
(docs/analysis.md, "Mechanism")."""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from gridmix.mixers.concentration.layer import ConcentrationMixer
from gridmix.mixers.contract import MixerSpec
from gridmix.tracks import ModelSpec, TrackData
from gridmix.tracks.plugin_loader import load_registry

# The row extra naming the registered mixer whose analysis the row's "mechanism" is. Ledgers written
# before it was recorded hold the concentration mixer's (then the only mixer with a mechanism
# analysis): LEGACY_MECHANISM_MIXER.
MECHANISM_MIXER = "mechanism_mixer"
LEGACY_MECHANISM_MIXER = "concentration"


def idea_mixer(spec: ModelSpec, model: nn.Module | None = None) -> MixerSpec | None:
    """The registered mixer of a model: the one its spec names (``ModelSpec.mixer``); for a spec
    that names none, the concentration mixer if ``model`` holds one (tracks written before mixers
    were registered)."""
    mixers = load_registry().mixers
    if spec.mixer is not None:
        return mixers[spec.mixer] if spec.mixer in mixers else None
    holds = model is not None and any(isinstance(m, ConcentrationMixer) for m in model.modules())
    return mixers["concentration"] if holds and "concentration" in mixers else None


def idea_mechanism(spec: ModelSpec, model: nn.Module, data: TrackData) -> dict:
    """The after-training hook ``gridmix run`` hands the harness: a trained idea model's mechanism
    analysis (on 8 validation samples) by its mixer's declared one; nothing for other models or a
    mixer that declares none."""
    if spec.role != "idea":
        return {}
    mixer = idea_mixer(spec, model)
    if mixer is None or mixer.mechanism is None:
        return {}
    device = next(model.parameters()).device
    return {
        "mechanism": mixer.mechanism(model, data.val.inputs[:8].to(device)),
        MECHANISM_MIXER: mixer.name,
    }


def combine_mechanism(mixer: str, per_seed: Mapping[int, dict]) -> dict:
    """The study's mechanism analysis: every seed's (``{seed: analysis}``) merged by the registered
    ``mixer``'s declared ``combine_mechanism``; ``ValueError`` in one line when ``mixer`` is not
    registered or declares none."""
    spec = load_registry().mixers[mixer]
    if spec.combine_mechanism is None:
        raise ValueError(
            f"mixer {mixer!r} declares no combine_mechanism; expected one to merge its seeds' "
            "analyses"
        )
    return spec.combine_mechanism(per_seed)
