"""The plugin manager and the track registry: load every gridmix plugin and check what it hands over.

Plugins are pluggy plugins (project ``"gridmix"``, hooks in :mod:`gridmix.hookspecs`) found through the
entry-point group ``"gridmix"``; the built-in tracks are entry points of the ``gridmix`` distribution
itself. Unlike stock pluggy, entry points are loaded and their hooks called one plugin at a time, so a
plugin that fails to import, raises in a hook, implements an unknown hook or returns a malformed track
or model is recorded as a :class:`BrokenPlugin` (its name and a one-line error) and every other track
keeps working.

Environment (read when the registry is built):
    ``GRIDMIX_DISABLE_PLUGIN_AUTOLOAD=1``: load no entry point at all, built-in tracks included (they
        are entry points too); only plugins passed as ``extra_plugins`` register.
    ``GRIDMIX_PLUGINS=name,name``: load exactly these entry points, named by entry-point name (``image``)
        or distribution name (``gridmix-example-track``: all of its entry points); this list applies
        whether or not autoload is disabled, and a name that matches nothing is reported as broken.

Data is validated lazily, when the harness has made it: :func:`validate_data`.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType

import pluggy
import torch

from gridmix import hookspecs
from gridmix.budget import resolve_budget
from gridmix.grid import Grid
from gridmix.tracks import DIRECTIONS, ROLES, ModelSpec, Split, Track, TrackData

DISABLE_AUTOLOAD_ENV = "GRIDMIX_DISABLE_PLUGIN_AUTOLOAD"
ALLOW_ENV = "GRIDMIX_PLUGINS"
BUILTIN_DISTRIBUTION = "gridmix"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
SPLIT_NAMES = ("train", "val", "test")


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
    """The installed tracks (by name, sorted), the plugins that registered and the broken ones."""

    tracks: dict[str, Track] = field(default_factory=dict)
    broken: list[BrokenPlugin] = field(default_factory=list)
    plugins: list[PluginInfo] = field(default_factory=list)

    def track(self, name: str) -> Track:
        """The track called ``name``; ``ValueError`` with close matches and the installed names otherwise.

        When a broken plugin has that name (the built-in file-based tracks are named like their plugins),
        the error is the plugin's own, e.g. the bad row of the user's CSV file.
        """
        if name in self.tracks:
            return self.tracks[name]
        for broken in self.broken:  # the plugin that provides this track failed: its own error is the answer
            if broken.name == name:
                raise ValueError(f"track {name!r} is unavailable: plugin {broken.name!r} failed: {broken.error}")
        installed = ", ".join(self.tracks) or "none"
        close = difflib.get_close_matches(name, self.tracks, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown track {name!r}{hint} installed: {installed}")


_CACHE: dict[str, Registry] = {}


def load_registry(*, refresh: bool = False, extra_plugins: Iterable[object] = ()) -> Registry:
    """The registry of every installed plugin, built once per process and cached.

    ``refresh=True`` rebuilds it (re-reading entry points and the environment). ``extra_plugins``
    registers plugin objects (modules or instances with ``@hookimpl`` functions) beside the entry points,
    for tests and programmatic use; giving them rebuilds the registry, and the result replaces the cache,
    so later ``load_registry()`` calls (the CLI run in-process, say) see them until the next refresh.
    """
    extra_plugins = tuple(extra_plugins)
    if refresh or extra_plugins or "registry" not in _CACHE:
        _CACHE["registry"] = build_registry(extra_plugins=extra_plugins, environ=os.environ)
    return _CACHE["registry"]


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
    tracks: dict[str, Track] = {}
    for impl in manager.hook.gridmix_tracks.get_hookimpls():
        info = versions[impl.plugin_name]
        try:
            returned = _as_list(impl.function(), hook="gridmix_tracks")
        except Exception as error:
            registry.broken.append(BrokenPlugin(info.name, _one_line(error), info.version))
            continue
        for track in returned:
            try:
                track = _adopt_track(track, info)
                if track.name in tracks:
                    raise ValueError(f"track {track.name!r} is already provided by plugin "
                                     f"{tracks[track.name].plugin!r}")
            except Exception as error:
                registry.broken.append(BrokenPlugin(info.name, _one_line(error), info.version))
                continue
            tracks[track.name] = track
    for name in sorted(tracks):
        for impl in manager.hook.gridmix_models.get_hookimpls():
            info = versions[impl.plugin_name]
            try:
                tracks[name] = _add_models(tracks[name], impl, info)
            except Exception as error:
                registry.broken.append(BrokenPlugin(info.name, _one_line(error), info.version))
    registry.tracks = {name: tracks[name] for name in sorted(tracks)}
    return registry


# ---------------------------------------------------------------- loading


def _selected_entry_points(environ: Mapping[str, str], registry: Registry) -> list[EntryPoint]:
    """The entry points to load, built-ins first, then by distribution and name (see the module docstring)."""
    available = sorted(entry_points(group=hookspecs.ENTRY_POINT_GROUP),
                       key=lambda ep: (_distribution(ep) != BUILTIN_DISTRIBUTION, _distribution(ep), ep.name))
    allowed = environ.get(ALLOW_ENV)
    if allowed is not None:
        names = [name.strip() for name in allowed.split(",") if name.strip()]
        known = {ep.name for ep in available} | {_distribution(ep) for ep in available}
        for name in names:
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                registry.broken.append(BrokenPlugin(name, f"{ALLOW_ENV} names {name!r} but no installed plugin has "
                                                          f"that entry-point or distribution name{hint} installed: "
                                                          f"{', '.join(sorted(known)) or 'none'}"))
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
        close = difflib.get_close_matches(unknown[0], known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"implements unknown hook {unknown[0]!r}{hint} gridmix hooks: {', '.join(known)}")
    if not callers:
        kind = "module" if isinstance(plugin, ModuleType) else type(plugin).__name__
        raise ValueError(f"{kind} {getattr(plugin, '__name__', plugin)!r} implements no gridmix hook; mark "
                         f"{' or '.join(known)} with @gridmix.hookimpl")


def _one_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def _as_list(returned: object, *, hook: str) -> list:
    if not isinstance(returned, list | tuple):
        raise TypeError(f"{hook}() returned {type(returned).__name__} {_short(returned)}; expected a list")
    return list(returned)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _adopt_track(track: object, info: PluginInfo) -> Track:
    """Stamp the plugin of origin on a returned track and its models, normalise its grid, validate it."""
    if not isinstance(track, Track):
        raise TypeError(f"gridmix_tracks() returned {type(track).__name__} {_short(track)}; expected gridmix.Track")
    models = track.models if isinstance(track.models, list | tuple) else (track.models,)
    models = tuple(_stamp(spec, info) if isinstance(spec, ModelSpec) else spec for spec in models)
    try:
        default_grid = Grid.parse(track.default_grid)
    except ValueError as error:
        raise ValueError(f"track {track.name!r}: default_grid: {error}") from None
    track = dataclasses.replace(track, models=models, default_grid=default_grid, plugin=info.name,
                                plugin_version=info.version)
    validate_track(track)
    return track


def _stamp(spec: ModelSpec, info: PluginInfo) -> ModelSpec:
    return dataclasses.replace(spec, plugin=info.name, plugin_version=info.version)


def _add_models(track: Track, impl: pluggy.HookImpl, info: PluginInfo) -> Track:
    """Call one plugin's ``gridmix_models`` for ``track``; the new models must be valid baselines."""
    returned = impl.function(**{arg: track for arg in impl.argnames})
    if returned is None:
        return track
    where = f"gridmix_models(track={track.name!r})"
    added = []
    for spec in _as_list(returned, hook=where):
        if not isinstance(spec, ModelSpec):
            raise TypeError(f"{where} returned {type(spec).__name__} {_short(spec)}; expected gridmix.ModelSpec")
        if spec.role != "baseline":
            raise ValueError(f"{where}: model {spec.name!r} has role {spec.role!r}; a plugin may add baselines only "
                             f"(the track's idea is {track.idea.name!r})")
        added.append(_stamp(spec, info))
    extended = dataclasses.replace(track, models=track.models + tuple(added))
    try:
        validate_track(extended)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    return extended


# ---------------------------------------------------------------- validation


def _where(track: Track) -> str:
    plugin = f" (plugin {track.plugin!r})" if track.plugin else ""
    return f"track {track.name!r}{plugin}"


def validate_model(spec: ModelSpec) -> None:
    """Check one model spec's fields; ``ValueError`` names the field, the value and what is expected."""
    if not isinstance(spec.name, str) or not NAME_PATTERN.match(spec.name):
        raise ValueError(f"model name {spec.name!r}; expected letters, digits, '-', '_' or '.', e.g. 'vit'")
    if spec.role not in ROLES:
        raise ValueError(f"model {spec.name!r} has role {spec.role!r}; expected one of {ROLES}")
    for attribute in ("build", "supports"):
        if not callable(getattr(spec, attribute)):
            raise ValueError(f"model {spec.name!r}: {attribute} is {_short(getattr(spec, attribute))}; "
                             f"expected a callable")
    if spec.width_knob is not None and not isinstance(spec.width_knob, str):
        raise ValueError(f"model {spec.name!r}: width_knob {spec.width_knob!r}; expected None or a keyword name")
    if not isinstance(spec.description, str):
        raise ValueError(f"model {spec.name!r}: description {_short(spec.description)}; expected a string")


def validate_track(track: Track) -> None:
    """Check a track's fields and models; ``ValueError`` names the track, its plugin and the bad value."""
    where = _where(track)
    if not isinstance(track.name, str) or not NAME_PATTERN.match(track.name):
        raise ValueError(f"{where}: name {track.name!r}; expected letters, digits, '-', '_' or '.', e.g. 'image'")
    if not isinstance(track.description, str) or not isinstance(track.metric_name, str) or not track.metric_name:
        raise ValueError(f"{where}: description and metric_name must be strings, metric_name non-empty; got "
                         f"{track.description!r}, {track.metric_name!r}")
    if isinstance(track.ndim, bool) or not isinstance(track.ndim, int) or track.ndim < 1:
        raise ValueError(f"{where}: ndim {track.ndim!r}; expected an integer >= 1")
    if not isinstance(track.default_grid, Grid) or track.default_grid.ndim != track.ndim:
        raise ValueError(f"{where}: default_grid {track.default_grid} does not have ndim={track.ndim} axes")
    for attribute in ("make_data", "loss", "metric", "supports"):
        if not callable(getattr(track, attribute)):
            raise ValueError(f"{where}: {attribute} is {_short(getattr(track, attribute))}; expected a callable")
    reason = track.supports(track.default_grid)
    if reason is not None:
        raise ValueError(f"{where}: its own default_grid {track.default_grid} is unsupported: {reason}")
    if track.direction not in DIRECTIONS:
        raise ValueError(f"{where}: direction {track.direction!r}; expected one of {DIRECTIONS}")
    if not isinstance(track.models, tuple) or not track.models:
        raise ValueError(f"{where}: models {_short(track.models)}; expected a non-empty tuple of gridmix.ModelSpec")
    for spec in track.models:
        if not isinstance(spec, ModelSpec):
            raise ValueError(f"{where}: models holds {type(spec).__name__} {_short(spec)}; expected gridmix.ModelSpec")
        try:
            validate_model(spec)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
    names = [spec.name for spec in track.models]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"{where}: model names {duplicates} appear more than once in {names}")
    ideas = [spec.name for spec in track.models if spec.role == "idea"]
    if len(ideas) != 1:
        raise ValueError(f"{where}: {len(ideas)} models with role 'idea' ({ideas}); expected exactly one")
    for role in ("ablation", "control"):
        holders = [spec.name for spec in track.models if spec.role == role]
        if len(holders) > 1:
            raise ValueError(f"{where}: {len(holders)} models with role {role!r} ({holders}); expected at most one")
    for attribute in ("chance", "ceiling"):
        value = getattr(track, attribute)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not float("-inf") < value < float("inf")):
            raise ValueError(f"{where}: {attribute} {value!r}; expected None or a finite number")
    baselines = [spec.name for spec in track.baselines]
    if track.matched_baseline not in baselines:
        raise ValueError(f"{where}: matched_baseline {track.matched_baseline!r} is not one of its baselines "
                         f"{baselines}")
    if not isinstance(track.budget_overrides, dict):
        raise ValueError(f"{where}: budget_overrides {_short(track.budget_overrides)}; expected a dict")
    if not isinstance(track.extra_metrics, dict) or not all(
            isinstance(name, str) and name and callable(fn) for name, fn in track.extra_metrics.items()):
        raise ValueError(f"{where}: extra_metrics {_short(track.extra_metrics)}; expected a dict of name → "
                         "callable(predictions, targets) → float")
    for budget in track.budget_overrides:
        try:
            resolve_budget(budget, track)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{where}: budget_overrides[{budget!r}]: {error}") from None


def validate_data(track: Track, data: TrackData, grid: Grid) -> TrackData:
    """Check what ``track.make_data`` returned for ``grid``; returns ``data`` or raises ``ValueError``.

    Every split is a :class:`Split` of CPU tensors with as many targets as inputs and at least one sample;
    inputs end in the grid's axes and are finite floating point (or int64); targets are int64 or finite
    floating point; per-sample shapes and dtypes agree across the three splits.
    """
    where = f"{_where(track)} on grid {grid}"
    if not isinstance(data, TrackData):
        raise ValueError(f"{where}: make_data returned {type(data).__name__}; expected gridmix.TrackData")
    reference = None
    for split_name in SPLIT_NAMES:
        split = getattr(data, split_name)
        if not isinstance(split, Split):
            raise ValueError(f"{where}: {split_name} is {type(split).__name__}; expected gridmix.Split")
        for part in ("inputs", "targets"):
            tensor = getattr(split, part)
            if not isinstance(tensor, torch.Tensor):
                raise ValueError(f"{where}: {split_name}.{part} is {type(tensor).__name__}; expected a torch.Tensor")
            if tensor.device.type != "cpu" or tensor.ndim == 0:
                raise ValueError(f"{where}: {split_name}.{part} is a {tensor.ndim}-d tensor on {tensor.device}; "
                                 f"expected (S, …) on the CPU")
            if not (tensor.is_floating_point() or tensor.dtype == torch.int64):
                raise ValueError(f"{where}: {split_name}.{part} has dtype {tensor.dtype}; expected a floating "
                                 f"dtype or torch.int64")
            if tensor.is_floating_point() and not torch.isfinite(tensor).all():
                bad = int((~torch.isfinite(tensor)).sum())
                raise ValueError(f"{where}: {split_name}.{part} holds {bad} non-finite values (NaN or inf)")
        inputs, targets = split.inputs, split.targets
        if inputs.shape[0] != targets.shape[0] or inputs.shape[0] == 0:
            raise ValueError(f"{where}: {split_name} has {inputs.shape[0]} inputs and {targets.shape[0]} targets; "
                             f"expected equal, non-zero sample counts")
        if inputs.ndim < 1 + grid.ndim or tuple(inputs.shape[-grid.ndim:]) != grid.shape:
            raise ValueError(f"{where}: {split_name}.inputs has shape {tuple(inputs.shape)}; expected "
                             f"(S, …, {', '.join(map(str, grid))}) ending in the grid")
        signature = (inputs.shape[1:], inputs.dtype, targets.shape[1:], targets.dtype)
        if reference is not None and signature != reference[1]:
            raise ValueError(f"{where}: {split_name} has per-sample inputs {tuple(inputs.shape[1:])} {inputs.dtype}, "
                             f"targets {tuple(targets.shape[1:])} {targets.dtype}; {reference[0]} has "
                             f"{tuple(reference[1][0])} {reference[1][1]}, {tuple(reference[1][2])} {reference[1][3]}")
        reference = reference or (split_name, signature)
    return data
