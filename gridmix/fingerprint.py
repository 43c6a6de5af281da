"""Deprecated path of :mod:`gridmix.study.fingerprint` (kept for one release; importing it warns)."""

from gridmix.deprecated import alias

alias(__name__, "gridmix.study.fingerprint")
