"""Deprecated path of :mod:`gridmix.tracks.hookspecs` (kept for one release; importing it warns)."""

from gridmix.deprecated import alias

alias(__name__, "gridmix.tracks.hookspecs")
