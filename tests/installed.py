"""Plugins 'installed' for a test without pip: a ``*.dist-info`` folder with an ``entry_points.txt``
on ``sys.path``, which ``importlib.metadata`` finds exactly as it finds an installed distribution
(spawned workers inherit it)."""

from __future__ import annotations

from pathlib import Path

from gridmix.tracks.plugin_loader import ALLOW_ENV, DISABLE_AUTOLOAD_ENV, Registry, load_registry


def dist_info(root: Path, name: str, version: str, entry_points: dict[str, str]) -> None:
    folder = root / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = "".join(f"{key} = {value}\n" for key, value in entry_points.items())
    (folder / "entry_points.txt").write_text(f"[gridmix]\n{lines}")


def install(
    monkeypatch,
    site: Path,
    distributions: dict[str, dict[str, str]],
    *,
    code: tuple[Path, ...] = (),
    allow: str | None = None,
) -> Registry:
    """Every distribution (name → its entry points) installed under ``site``, the folders in
    ``code`` importable, the entry points autoloaded (``allow``: only these, as
    ``GRIDMIX_PLUGINS``); returns the fresh registry."""
    for name, entry_points in distributions.items():
        dist_info(site, name, "0.1.0", entry_points)
    monkeypatch.delenv(DISABLE_AUTOLOAD_ENV, raising=False)
    if allow is None:
        monkeypatch.delenv(ALLOW_ENV, raising=False)
    else:
        monkeypatch.setenv(ALLOW_ENV, allow)
    for folder in (*code, site):
        monkeypatch.syspath_prepend(str(folder))
    return load_registry(refresh=True)
