"""Tracks: the contract a track plugin meets (:mod:`.contract`: ``Track``, ``ModelSpec``,
``TrackData``, ``Split``), the run budgets and split sizes (:mod:`.budget`), the hook specs a plugin
implements (:mod:`.hookspecs`) and the registry that loads the plugins (:mod:`.registry`). Plugins
import these names from here or from :mod:`gridmix`.

The budgets import at once (they need no torch: the command line's help lists them); the contract,
the hooks and the registry load on first use (PEP 562, :func:`__getattr__`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridmix.core.lazy import lazy_names
from gridmix.tracks.budget import BUDGETS, Budget, DataSizes, resolve_budget

# The same names, for type checkers and readers (and the layer test, which reads imports).
if TYPE_CHECKING:
    from gridmix.tracks.contract import (
        DIRECTIONS,
        ROLES,
        SPLIT_NAMES,
        UNDECLARED_GRIDS,
        Backbone,
        ContractError,
        ModelSpec,
        Split,
        Track,
        TrackData,
    )
    from gridmix.tracks.hookspecs import hookimpl
    from gridmix.tracks.plugin_loader import BrokenPlugin, Registry, load_registry, validate_data

_SOURCES = {
    **dict.fromkeys(
        (
            "DIRECTIONS",
            "ROLES",
            "SPLIT_NAMES",
            "UNDECLARED_GRIDS",
            "Backbone",
            "ContractError",
            "ModelSpec",
            "Split",
            "Track",
            "TrackData",
        ),
        "gridmix.tracks.contract",
    ),
    "hookimpl": "gridmix.tracks.hookspecs",
    **dict.fromkeys(
        ("BrokenPlugin", "Registry", "load_registry", "validate_data"),
        "gridmix.tracks.plugin_loader",
    ),
}

__all__ = [
    "BUDGETS",
    "DIRECTIONS",
    "ROLES",
    "SPLIT_NAMES",
    "UNDECLARED_GRIDS",
    "Backbone",
    "BrokenPlugin",
    "Budget",
    "ContractError",
    "DataSizes",
    "ModelSpec",
    "Registry",
    "Split",
    "Track",
    "TrackData",
    "hookimpl",
    "load_registry",
    "resolve_budget",
    "validate_data",
]


__getattr__, __dir__ = lazy_names("gridmix.tracks", _SOURCES, globals())
