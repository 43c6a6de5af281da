"""Tracks: the contract a track plugin meets (:mod:`.contract`: ``Track``, ``ModelSpec``, ``TrackData``, ``Split``),
the run budgets and split sizes (:mod:`.budget`), the hook specs a plugin implements (:mod:`.hookspecs`) and the
registry that loads the plugins (:mod:`.registry`). Plugins import these names from here or from :mod:`gridmix`."""

from gridmix.tracks.budget import BUDGETS, Budget, DataSizes, resolve_budget
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
from gridmix.tracks.registry import BrokenPlugin, Registry, load_registry, validate_data

__all__ = ["BUDGETS", "DIRECTIONS", "ROLES", "SPLIT_NAMES", "UNDECLARED_GRIDS", "Backbone", "BrokenPlugin", "Budget",
           "ContractError", "DataSizes", "ModelSpec", "Registry", "Split", "Track", "TrackData", "hookimpl",
           "load_registry", "resolve_budget", "validate_data"]
