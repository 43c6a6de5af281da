"""The models a track builds around registered token mixers, and the track as a study with another
idea sees it.

:func:`with_mixer_models` gives a track with a :class:`~gridmix.tracks.contract.Backbone` one model
per registered mixer it does not already offer (named by the backbone: ``vit-global-filter``), as
baselines the default study does not train; the plugin registry applies it to every track.
:func:`choose_mixers` turns ``gridmix run --idea NAME --baselines A,B`` into the study's models and
roles: the idea mixer's model, the matched baseline, the idea's declared ablation (or a note that it
has none), the track's no-mixing control, and the extra baselines; a mixer that cannot serve the
track is refused in one line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from gridmix.core.grid import Grid
from gridmix.mixers.contract import MixerSpec, MixerTable
from gridmix.tracks.contract import ModelSpec, Track


def mixer_model(track: Track, mixer: MixerSpec) -> ModelSpec:
    """The track's backbone with ``mixer`` as every block's token mixer, as a baseline
    ``ModelSpec``."""
    backbone = track.backbone
    if backbone is None:
        raise ValueError(
            f"track {track.name!r} declares no backbone, so it builds no model around mixer "
            f"{mixer.name!r}; it offers {[m.name for m in track.models]}"
        )

    def supports(grid: Grid) -> str | None:
        return mixer.unfit(
            grid, causal_axes=backbone.causal_axes, num_prefix_tokens=backbone.num_prefix_tokens
        )

    reference = f"; {mixer.reference}" if mixer.reference else ""
    description = (
        f"the {track.matched_baseline} network with {mixer.name} as token mixer "
        f"({mixer.description}{reference})"
    )
    return backbone.model(
        backbone.model_name(mixer.name),
        mixer,
        description=description,
        supports=supports,
        width_kwarg=backbone.width_kwarg,
        plugin=mixer.plugin,
        plugin_version=mixer.plugin_version,
    )


def with_mixer_models(track: Track, mixers: MixerTable) -> Track:
    """``track`` with a model for every registered mixer it does not offer itself (none without a
    backbone). A mixer whose model name one of the track's own models already holds is left out (the
    track's model wins)."""
    if track.backbone is None:
        return track
    own = {spec.name for spec in track.models}
    added = tuple(
        mixer_model(track, mixer)
        for mixer in mixers
        if track.model_for_mixer(mixer.name) is None
        and track.backbone.model_name(mixer.name) not in own
    )
    return dataclasses.replace(track, mixer_models=added)


@dataclass(frozen=True)
class MixerChoice:
    """A study's models: the track with the study's roles, the model names in order, and the
    report's notes on what is left out and why."""

    track: Track
    models: tuple[str, ...]
    notes: tuple[str, ...] = ()


def choose_mixers(
    track: Track,
    mixers: MixerTable,
    grid: Grid,
    *,
    idea: str | None = None,
    baselines: Sequence[str] = (),
) -> MixerChoice:
    """The study ``--idea`` and ``--baselines`` ask for (module docstring); ``ValueError`` in one
    line when a mixer is unknown, or cannot serve the track on ``grid``."""
    notes: list[str] = []
    if idea is None:
        idea_spec, ablation = track.idea, track.ablation
    else:
        idea_spec = _model(track, mixers, idea, grid, what="--idea")
        if idea_spec.name == track.matched_baseline:
            raise ValueError(
                f"--idea {idea}: {idea_spec.name!r} is the matched baseline of track "
                f"{track.name!r}; the idea must be another mixer"
            )
        ablation = _ablation(track, mixers, mixers[idea], grid, notes)
        if mixers[idea].mechanism is None:
            notes.append(
                f"the idea's mixer {idea!r} declares no mechanism analysis: the parametrisation "
                "check does not apply"
            )
    extra = [_model(track, mixers, name, grid, what="--baselines") for name in baselines]
    control = track.control
    chosen = [idea_spec, track.model(track.matched_baseline), ablation, control, *extra]
    names = tuple(dict.fromkeys(spec.name for spec in chosen if spec is not None))
    roles = {name: "baseline" for name in names}
    roles[idea_spec.name] = "idea"
    if ablation is not None:
        roles[ablation.name] = "ablation"
    if control is not None and control.name != idea_spec.name:
        roles[control.name] = "control"
    models = tuple(
        dataclasses.replace(spec, role=roles.get(spec.name, "baseline")) for spec in track.models
    )
    drawn = tuple(
        dataclasses.replace(spec, role=roles[spec.name])
        for spec in track.mixer_models
        if spec.name in roles
    )
    rest = tuple(spec for spec in track.mixer_models if spec.name not in roles)
    chosen_track = dataclasses.replace(
        track,
        models=models + drawn,
        mixer_models=rest,
        default_models=tuple(n for n in track.default_models if n in roles),
    )
    return MixerChoice(track=chosen_track, models=names, notes=tuple(notes))


def _model(track: Track, mixers: MixerTable, name: str, grid: Grid, *, what: str) -> ModelSpec:
    """The track's model around the registered mixer ``name``, refused in one line where it cannot
    serve."""
    mixers[name]  # ValueError naming the registered mixers when it is not one
    spec = track.model_for_mixer(name)
    if spec is None:
        raise ValueError(
            f"{what} {name}: track {track.name!r} builds no model around mixer {name!r} (it "
            "declares no "
            f"backbone, and none of its models {[m.name for m in track.models]} uses it)"
        )
    reason = spec.supports(grid)
    if reason:
        raise ValueError(
            f"{what} {name}: mixer {name!r} cannot serve track {track.name!r} on {grid}: {reason}"
        )
    return spec


def _ablation(
    track: Track, mixers: MixerTable, mixer: MixerSpec, grid: Grid, notes: list[str]
) -> ModelSpec | None:
    """The idea mixer's declared ablation as a model of the track, or ``None`` with a note saying
    why not."""
    question = "so the question whether its mechanism helps is left out"
    if mixer.ablation is None:
        notes.append(f"the idea's mixer {mixer.name!r} declares no ablation, {question}")
        return None
    if mixer.ablation not in mixers:
        notes.append(
            f"the idea's ablation {mixer.ablation!r} is not a registered mixer, {question}"
        )
        return None
    spec = track.model_for_mixer(mixer.ablation)
    reason = "the track builds no model around it" if spec is None else spec.supports(grid)
    if reason:
        notes.append(
            f"the idea's ablation {mixer.ablation!r} cannot serve track {track.name!r} on {grid} "
            f"({reason}), {question}"
        )
        return None
    return spec
