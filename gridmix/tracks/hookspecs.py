"""Every gridmix hook, in one place: what a plugin may implement and what it must return.

gridmix uses pluggy (project name ``"gridmix"``). A plugin is a module registered under the
entry-point group ``"gridmix"``; its hook implementations carry the ``gridmix.hookimpl`` marker::

    # pyproject.toml of a plugin package
    [project.entry-points.gridmix]
    my_track = "my_package.my_module"

    # my_package/my_module.py
    from gridmix import hookimpl

    @hookimpl
    def gridmix_tracks():
        return [Track(...)]

The built-in tracks (``sequence``, ``image``, ``video``, and ``sequence-csv`` / ``image-folder`` on
the user's data) are plugins of exactly this kind. :mod:`gridmix.tracks.plugin_loader` loads entry
points one at a time and calls each plugin's hooks separately, so a plugin that raises or hands over
something malformed is reported by name (``gridmix tracks``) without affecting the others.
docs/plugins.md walks through a complete plugin. Every hook below must have a docstring: a test
fails otherwise.
"""

from __future__ import annotations

from gridmix.core.markers import ENTRY_POINT_GROUP, PROJECT_NAME, hookimpl, hookspec
from gridmix.mixers.contract import MixerSpec
from gridmix.tracks.contract import ModelSpec, Track

__all__ = [
    "ENTRY_POINT_GROUP",
    "PROJECT_NAME",
    "gridmix_mixers",
    "gridmix_models",
    "gridmix_tracks",
    "hookimpl",
    "hookspec",
]


@hookspec
def gridmix_tracks() -> list[Track]:
    """Return the tracks this plugin adds (a list of :class:`gridmix.tracks.Track`).

    Each track must have a unique name across all plugins, exactly one model with ``role="idea"``,
    and a ``matched_baseline`` naming one of its baselines; ``Track.__post_init__`` checks every
    rule when the track is built (:class:`gridmix.tracks.ContractError`). The plugin manager fills
    in ``plugin`` and ``plugin_version`` (entry-point name, distribution version) on the track and
    its models. Return ``[]`` to add nothing (e.g. when unconfigured).
    """


@hookspec
def gridmix_models(track: Track) -> list[ModelSpec] | None:
    """Return extra models (usually baselines) to add to an existing ``track``, or ``None``.

    Called once per installed track, after every plugin's :func:`gridmix_tracks`. The models must
    have ``role="baseline"`` (a track has exactly one idea) and names that do not clash with the
    track's own models. A plugin may add models to tracks it did not define; their ``plugin`` is
    this plugin's name.
    """


@hookspec
def gridmix_mixers() -> list[MixerSpec]:
    """Return the token mixers this plugin adds (a list of
    :class:`gridmix.mixers.contract.MixerSpec`).

    Each mixer must have a unique name across all plugins (the built-in ones included: ``gridmix
    mixers`` lists them) and meet timm's ``attn_layer`` contract (docs/mixers.md);
    ``MixerSpec.__post_init__`` checks its fields. The plugin manager fills in ``plugin`` and
    ``plugin_version``. Every track with a backbone then offers a model around it, which ``gridmix
    run --idea NAME`` or ``--baselines NAME`` trains.
    """
