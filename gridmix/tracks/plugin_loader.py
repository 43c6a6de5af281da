"""The plugin manager and the registry of tracks and token mixers: load every gridmix plugin and
check what it hands over.

Plugins are pluggy plugins (project ``"gridmix"``, hooks in :mod:`gridmix.tracks.hookspecs`) found
through the entry-point group ``"gridmix"``; the built-in tracks are entry points of the ``gridmix``
distribution itself. Unlike stock pluggy, entry points are loaded and their hooks called one plugin
at a time, so a plugin that fails to import, raises in a hook, implements an unknown hook or hands
over a malformed track or model is recorded as a :class:`BrokenPlugin` (its name and a one-line
error) and every other track keeps working. Tracks and models check their own fields when built
(:class:`gridmix.tracks.ContractError`), so a plugin that builds a malformed one fails in its hook,
and loses that hook call's other tracks too; the error then names the plugin. What stays here is
what needs more than one object: unique track and mixer names across plugins, models added to
another plugin's track being baselines, and every track with a backbone offering a model around
every registered mixer (:func:`gridmix.tracks.mixer_models.with_mixer_models`).

Environment (read when the registry is built):
    ``GRIDMIX_DISABLE_PLUGIN_AUTOLOAD=1``: load no entry point at all, built-in tracks included
        (they are entry points too); only plugins passed as ``extra_plugins`` register.
    ``GRIDMIX_PLUGINS=name,name``: load exactly these entry points, named by entry-point name
        (``image``) or distribution name (``gridmix-example-track``: all of its entry points); this
        list applies whether or not autoload is disabled, and a name that matches nothing is
        reported as broken.

Data is validated lazily, when the harness has made it: :func:`validate_data`.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType

import pluggy
from torch import nn

from gridmix.core.grid import Grid, GridLike
from gridmix.core.suggest import did_you_mean
from gridmix.mixers.contract import MixerSpec, MixerTable
from gridmix.tracks import hookspecs
from gridmix.tracks.contract import Backbone, ContractError, ModelSpec, Track, TrackData, short
from gridmix.tracks.mixer_models import with_mixer_models

DISABLE_AUTOLOAD_ENV = "GRIDMIX_DISABLE_PLUGIN_AUTOLOAD"
ALLOW_ENV = "GRIDMIX_PLUGINS"
BUILTIN_DISTRIBUTION = "gridmix"
# the classes a plugin builds, and the TypeError a dataclass raises for a keyword it has no field
# for
CONTRACT_CLASSES = {cls.__name__: cls for cls in (Track, ModelSpec, Backbone, MixerSpec)}
_UNKNOWN_FIELD = re.compile(r"^(\w+)\.__init__\(\) got an unexpected keyword argument '(\w+)'$")


@dataclass(frozen=True)
class BrokenPlugin:
    """A plugin that could not contribute (some of) its tracks or models, and why, in one line."""

    name: str
    error: str
    version: str = ""


@dataclass(frozen=True)
class PluginInfo:
    """A plugin that registered: entry-point (or object) name, its distribution and version."""

    name: str
    distribution: str
    version: str


@dataclass
class Registry:
    """The installed tracks (by name, sorted), the registered mixers, the plugins that registered,
    the broken ones."""

    tracks: dict[str, Track] = field(default_factory=dict)
    broken: list[BrokenPlugin] = field(default_factory=list)
    plugins: list[PluginInfo] = field(default_factory=list)
    mixers: MixerTable = field(default_factory=MixerTable)

    def track(self, name: str, settings: Mapping[str, object] | None = None) -> Track:
        """The track called ``name``, rebuilt with ``settings`` (its settings' values,
        :meth:`Track.with_settings`) when given; ``ValueError`` with close matches and the installed
        names for an unknown name.

        When a broken plugin has that name (the built-in file-based tracks are named like their
        plugins), the error is the plugin's own, e.g. the bad row of the user's CSV file.
        """
        if name in self.tracks:
            return self._rebuilt(self.tracks[name], settings) if settings else self.tracks[name]
        # the plugin that provides this track failed: its own error is the answer
        for broken in self.broken:
            if broken.name == name:
                raise ValueError(
                    f"track {name!r} is unavailable: plugin {broken.name!r} failed: {broken.error}"
                )
        installed = ", ".join(self.tracks) or "none"
        raise ValueError(
            f"unknown track {name!r}{did_you_mean(name, self.tracks)} installed: {installed}"
        )

    def in_process_only(self, plugin: str) -> bool:
        """Whether the plugin named ``plugin`` was registered in this process only
        (``extra_plugins``), not through an entry point: a spawned worker process, which loads entry
        points, would not find what it added."""
        return any(info.name == plugin and not info.distribution for info in self.plugins)

    def _rebuilt(self, track: Track, settings: Mapping[str, object]) -> Track:
        """``track`` with other setting values, as the registry hands tracks out: stamped with its
        plugin, with the models other plugins added to it (as they are) and a model around every
        registered mixer."""
        rebuilt = track.with_settings(dict(settings))
        if rebuilt is track:
            return track
        info = PluginInfo(track.plugin, "", track.plugin_version)
        rebuilt = _adopt_track(rebuilt, info)
        own = {spec.name for spec in rebuilt.models}
        added = tuple(
            spec for spec in track.models if spec.plugin != track.plugin and spec.name not in own
        )
        if added:
            rebuilt = dataclasses.replace(rebuilt, models=rebuilt.models + added)
        return with_mixer_models(rebuilt, self.mixers)


_CACHE: dict[str, Registry] = {}


def load_registry(*, refresh: bool = False, extra_plugins: Iterable[object] = ()) -> Registry:
    """The registry of every installed plugin, built once per process and cached.

    ``refresh=True`` rebuilds it (re-reading entry points and the environment). ``extra_plugins``
    registers plugin objects (modules or instances with ``@hookimpl`` functions) beside the entry
    points, for tests and programmatic use; giving them rebuilds the registry, and the result
    replaces the cache, so later ``load_registry()`` calls (the CLI run in-process, say) see them
    until the next refresh.
    """
    extra_plugins = tuple(extra_plugins)
    if refresh or extra_plugins or "registry" not in _CACHE:
        _CACHE["registry"] = build_registry(extra_plugins=extra_plugins, environ=os.environ)
    return _CACHE["registry"]


def mixer_layer(
    mixer: str,
    grid: GridLike,
    *,
    causal_axes: Sequence[int] = (),
    num_prefix_tokens: int = 0,
    **mixer_kwargs,
) -> type[nn.Module]:
    """timm's ``attn_layer`` for the registered ``mixer`` on ``grid``
    (``mixer_layer("concentration", "8x8", rank=8)``): its
    :meth:`~gridmix.mixers.contract.MixerSpec.layer`, the one way from a registered mixer to a
    model, so every module it builds carries the mixer's name."""
    return (
        load_registry()
        .mixers[mixer]
        .layer(grid, causal_axes=causal_axes, num_prefix_tokens=num_prefix_tokens, **mixer_kwargs)
    )


def build_registry(*, extra_plugins: Iterable[object] = (), environ: Mapping[str, str]) -> Registry:
    """A fresh registry (no cache): entry points chosen by ``environ``, then ``extra_plugins``."""
    manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    registry = Registry()
    candidates: list[tuple[PluginInfo, object]] = []
    for entry_point in _selected_entry_points(environ, registry):
        info = _entry_point_info(entry_point)
        try:
            candidates.append((info, entry_point.load()))
        except Exception as error:  # an import failure of one plugin must not stop the others
            registry.broken.append(BrokenPlugin(info.name, _one_line(error), info.version))
    for plugin in extra_plugins:
        name = getattr(plugin, "__name__", None) or type(plugin).__name__
        candidates.append((PluginInfo(name, "", str(getattr(plugin, "__version__", ""))), plugin))
    for info, plugin in candidates:
        try:
            _register(manager, plugin, info.name)
        except Exception as error:
            registry.broken.append(BrokenPlugin(info.name, _one_line(error), info.version))
            continue
        registry.plugins.append(info)
    versions = {info.name: info for info in registry.plugins}
    registry.mixers = _load_mixers(manager, versions, registry)
    tracks: dict[str, Track] = {}
    for info, returned in _answers(manager, "gridmix_tracks", versions, registry):
        for track in returned:
            try:
                track = _adopt_track(track, info)
                if track.name in tracks:
                    raise ValueError(
                        f"track {track.name!r} is already provided by plugin "
                        f"{tracks[track.name].plugin!r}"
                    )
            except Exception as error:
                registry.broken.append(_broken(info, error))
                continue
            tracks[track.name] = track
    for name in sorted(tracks):
        for impl in manager.hook.gridmix_models.get_hookimpls():
            info = versions[impl.plugin_name]
            try:
                tracks[name] = _add_models(tracks[name], impl, info)
            except Exception as error:
                registry.broken.append(_broken(info, error))
    registry.tracks = {
        name: with_mixer_models(tracks[name], registry.mixers) for name in sorted(tracks)
    }
    return registry


def _load_mixers(
    manager: pluggy.PluginManager, versions: dict[str, PluginInfo], registry: Registry
) -> MixerTable:
    """Every plugin's ``gridmix_mixers``, one plugin at a time; a failing or malformed one is
    broken, alone."""
    mixers: dict[str, MixerSpec] = {}

    def check(returned: list) -> None:  # a plugin with one bad mixer has all its mixers left out
        for spec in returned:
            if not isinstance(spec, MixerSpec):
                raise TypeError(
                    f"gridmix_mixers() returned {type(spec).__name__} {short(spec)}; expected "
                    "gridmix.mixers.contract.MixerSpec"
                )
            if spec.name in mixers:
                raise ValueError(
                    f"mixer {spec.name!r} is already provided by plugin "
                    f"{mixers[spec.name].plugin!r}"
                )

    for info, returned in _answers(manager, "gridmix_mixers", versions, registry, check=check):
        for spec in returned:
            mixers[spec.name] = dataclasses.replace(
                spec, plugin=info.name, plugin_version=info.version
            )
    return MixerTable({name: mixers[name] for name in sorted(mixers)})


def _answers(
    manager: pluggy.PluginManager,
    hook: str,
    versions: dict[str, PluginInfo],
    registry: Registry,
    *,
    check: Callable[[list], None] | None = None,
) -> Iterator[tuple[PluginInfo, list]]:
    """Each plugin's answer to the argument-less ``hook`` as a list, with the plugin, one plugin at
    a time: one whose call raises, whose answer is no list or that ``check`` refuses is added to
    ``registry.broken`` and skipped, every other plugin's answer stays. Lazy: ``check`` sees what
    the loop did with the answers before it."""
    for impl in getattr(manager.hook, hook).get_hookimpls():
        info = versions[impl.plugin_name]
        try:
            returned = _as_list(_call(impl), hook=hook)
            if check is not None:
                check(returned)
        except Exception as error:
            registry.broken.append(_broken(info, error))
            continue
        yield info, returned


def _call(impl: pluggy.HookImpl, **arguments: object) -> object:
    """One plugin's implementation of a hook, called on its own with the arguments it asks for.

    Not through ``manager.hook``, because on pluggy 1.x no public caller can blame one plugin and
    keep the others (``tests/test_plugins.py`` shows each point on the installed version):

    - ``manager.hook.<name>(...)`` returns a bare list of the non-``None`` answers:
      ``gridmix_models`` may answer ``None``, so a position in the list does not say which plugin
      answered, and a hook wrapper may rewrite the list; and the first implementation that raises
      ends the call, losing every other answer.
    - ``manager.subset_hook_caller(name, remove_plugins)``, the public way to call one plugin at a
      time, puts the plugins it leaves out in a ``set``: it raises ``TypeError`` for plugin objects
      that are not hashable (a ``types.SimpleNamespace``, a dataclass instance), which ``register``
      and ``extra_plugins`` accept. Calling one implementation through ``HookCaller._hookexec``
      would be private API.

    The price: hook wrappers and ``manager.trace`` do not see these calls.
    """
    return impl.function(**{name: arguments[name] for name in impl.argnames})


def _broken(info: PluginInfo, error: BaseException) -> BrokenPlugin:
    """``info``'s plugin failed with ``error``; a track or model it built that broke the contract
    names it."""
    # raised while the plugin's own code built the object: blame that plugin
    if isinstance(error, ContractError):
        error = ValueError(error.blaming(info.name))
    return BrokenPlugin(info.name, _one_line(_unknown_field(error)), info.version)


def _unknown_field(error: BaseException) -> BaseException:
    """``error``, or for a contract class built with a keyword it has no field for (a misspelt
    field, or a field's former name) a ``TypeError`` that lists the fields it has."""
    match = _UNKNOWN_FIELD.match(str(error)) if isinstance(error, TypeError) else None
    if match is None or match[1] not in CONTRACT_CLASSES:
        return error
    fields = [f.name for f in dataclasses.fields(CONTRACT_CLASSES[match[1]]) if f.init]
    return TypeError(
        f"gridmix.{match[1]} has no field {match[2]!r}{did_you_mean(match[2], fields)} its fields: "
        f"{', '.join(fields)}"
    )


# ---------------------------------------------------------------- loading


def _selected_entry_points(environ: Mapping[str, str], registry: Registry) -> list[EntryPoint]:
    """The entry points to load, built-ins first, then by distribution and name (see the module
    docstring)."""
    available = sorted(
        entry_points(group=hookspecs.ENTRY_POINT_GROUP),
        key=lambda ep: (_distribution(ep) != BUILTIN_DISTRIBUTION, _distribution(ep), ep.name),
    )
    allowed = environ.get(ALLOW_ENV)
    if allowed is not None:
        names = [name.strip() for name in allowed.split(",") if name.strip()]
        known = {ep.name for ep in available} | {_distribution(ep) for ep in available}
        for name in names:
            if name not in known:
                registry.broken.append(
                    BrokenPlugin(
                        name,
                        f"{ALLOW_ENV} names {name!r} but no installed plugin has that entry-point "
                        f"or distribution name{did_you_mean(name, known)} installed: "
                        f"{', '.join(sorted(known)) or 'none'}",
                    )
                )
        return [ep for ep in available if ep.name in names or _distribution(ep) in names]
    if environ.get(DISABLE_AUTOLOAD_ENV, "").strip() not in ("", "0"):
        return []
    return available


def _distribution(entry_point: EntryPoint) -> str:
    return entry_point.dist.name if entry_point.dist is not None else ""


def _entry_point_info(entry_point: EntryPoint) -> PluginInfo:
    version = entry_point.dist.version if entry_point.dist is not None else ""
    return PluginInfo(entry_point.name, _distribution(entry_point), version)


def _register(manager: pluggy.PluginManager, plugin: object, name: str) -> None:
    """Register ``plugin``; it must implement at least one gridmix hook and no unknown one."""
    manager.register(plugin, name=name)
    callers = manager.get_hookcallers(plugin) or []
    unknown = [caller.name for caller in callers if not caller.has_spec()]
    known = sorted(name for name in dir(hookspecs) if name.startswith("gridmix_"))
    if unknown or not callers:
        manager.unregister(plugin)
    if unknown:
        raise ValueError(
            f"implements unknown hook {unknown[0]!r}{did_you_mean(unknown[0], known)} gridmix "
            f"hooks: {', '.join(known)}"
        )
    if not callers:
        kind = "module" if isinstance(plugin, ModuleType) else type(plugin).__name__
        raise ValueError(
            f"{kind} {getattr(plugin, '__name__', plugin)!r} implements no gridmix hook; mark "
            f"{' or '.join(known)} with @gridmix.hookimpl"
        )


def _one_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def _as_list(returned: object, *, hook: str) -> list:
    if not isinstance(returned, list | tuple):
        raise TypeError(
            f"{hook}() returned {type(returned).__name__} {short(returned)}; expected a list"
        )
    return list(returned)


def _adopt_track(track: object, info: PluginInfo) -> Track:
    """Stamp the plugin of origin on a returned track and its models (the track checked itself when
    built)."""
    if not isinstance(track, Track):
        raise TypeError(
            f"gridmix_tracks() returned {type(track).__name__} {short(track)}; expected "
            "gridmix.Track"
        )
    models = tuple(_stamp(spec, info) for spec in track.models)
    return dataclasses.replace(track, models=models, plugin=info.name, plugin_version=info.version)


def _stamp(spec: ModelSpec, info: PluginInfo) -> ModelSpec:
    return dataclasses.replace(spec, plugin=info.name, plugin_version=info.version)


def _add_models(track: Track, impl: pluggy.HookImpl, info: PluginInfo) -> Track:
    """Call one plugin's ``gridmix_models`` for ``track``; the new models must be valid
    baselines."""
    returned = _call(impl, track=track)
    if returned is None:
        return track
    where = f"gridmix_models(track={track.name!r})"
    added = []
    for spec in _as_list(returned, hook=where):
        if not isinstance(spec, ModelSpec):
            raise TypeError(
                f"{where} returned {type(spec).__name__} {short(spec)}; expected gridmix.ModelSpec"
            )
        if spec.role != "baseline":
            raise ValueError(
                f"{where}: model {spec.name!r} has role {spec.role!r}; a plugin may add baselines "
                f"only (the track's idea is {track.idea.name!r})"
            )
        added.append(_stamp(spec, info))
    try:
        return dataclasses.replace(track, models=track.models + tuple(added))
    except ContractError as error:
        raise ValueError(f"{where}: {error}") from None


# ---------------------------------------------------------------- validation


def validate_data(track: Track, data: TrackData, grid: Grid) -> TrackData:
    """Check what ``track.make_data`` returned for ``grid`` (:meth:`TrackData.check`); returns
    ``data``.

    ``ValueError`` names the track, its plugin and the grid, then the split and what is wrong.
    """
    where = f"{track.label} on grid {grid}"
    if not isinstance(data, TrackData):
        raise ValueError(
            f"{where}: make_data returned {type(data).__name__}; expected gridmix.TrackData"
        )
    try:
        return data.check(grid)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
