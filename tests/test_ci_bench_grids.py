"""The CI benchmark's scaling points (``noxfile.py``, ``nox -s bench``): every built-in track gets a
grid smaller than its default that it accepts, so ``gridmix scale`` fits an exponent over two
grids, not one."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import pytest

from gridmix.core.grid import Grid
from gridmix.tracks.plugin_loader import load_registry

BUILTIN = ("sequence", "image", "video", "mqar", "recall", "pathfinder", "copy", "occlusion")


@functools.cache
def load_noxfile():
    """noxfile.py as a module, loaded once (nox registers its sessions on import)."""
    path = Path(__file__).parents[1] / "noxfile.py"
    spec = importlib.util.spec_from_file_location("noxfile_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_smaller_grids_halve_then_take_three_quarters_then_one_less():
    noxfile = load_noxfile()
    assert noxfile.smaller_grids("4x5x5") == ["2x2x2", "3x3x3", "3x4x4"]
    assert noxfile.smaller_grids("32x32") == ["16x16", "24x24", "31x31"]
    assert noxfile.smaller_grids("2x2") == []  # nothing smaller along any axis


@pytest.mark.parametrize("name", BUILTIN)
def test_every_builtin_track_accepts_a_smaller_grid(name):
    track = load_registry().track(name)
    candidates = load_noxfile().smaller_grids(str(track.default_grid))
    accepted = [g for g in candidates if track.supports(Grid.parse(g)) is None]
    assert accepted, (name, str(track.default_grid), candidates)
