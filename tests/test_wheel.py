"""A wheel keeps the native kernels: pyproject.toml's package data covers every file the native
build reads (:data:`native_build.SOURCES` and :data:`native_build.HEADERS`), every C file beside
them is in that list, and a wheel built from the package's files alone, installed where nothing else
is, builds all the kernels in a fresh cache (as ``gridmix info`` reports them)."""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import gridmix.mixers.concentration.ops.native_build as native_build

ROOT = Path(__file__).resolve().parents[1]
OPS = Path(native_build.__file__).parent
PACKAGE = "gridmix.mixers.concentration.ops"
NATIVE_FILES = (*native_build.SOURCES, *native_build.HEADERS)
# what a wheel is built from: the build's configuration and the two packages' folders
WHEEL_INPUTS = ("pyproject.toml", "README.md", "gridmix", "plugins/gridmix_tracks")


def test_package_data_covers_the_native_build_list_and_the_list_covers_the_folder():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+; the wheel test below checks 3.10 too
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"][PACKAGE]
    unshipped = [n for n in NATIVE_FILES if not any(fnmatch.fnmatch(n, p) for p in patterns)]
    assert not unshipped, f"{unshipped} are built from but not in the package data {patterns}"
    in_folder = sorted(p.name for p in OPS.iterdir() if p.suffix in (".c", ".h"))
    unbuilt = sorted(set(in_folder) - set(NATIVE_FILES))
    assert not unbuilt, f"{unbuilt} are beside native_build.py but not in SOURCES or HEADERS"


def _pip(*args: str, cwd: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", *args], cwd=cwd, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"pip {' '.join(args)}: {done.stderr[-2000:]}"


@pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None, reason="no C compiler")
def test_a_wheel_installed_alone_builds_every_native_kernel(tmp_path):
    source = tmp_path / "source"  # the package's files only: no build/, egg-info or cache of ours
    source.mkdir()
    for name in WHEEL_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(
                ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(ROOT / name, source / name)
    _pip("wheel", ".", "--no-deps", "--no-build-isolation", "--no-index", "-w", "dist", cwd=source)
    (wheel,) = (source / "dist").glob("gridmix-*.whl")
    shipped = {Path(name).name for name in zipfile.ZipFile(wheel).namelist()}
    assert set(NATIVE_FILES) <= shipped, f"the wheel lacks {sorted(set(NATIVE_FILES) - shipped)}"
    target = tmp_path / "installed"
    _pip("install", "--no-deps", "--no-index", "--target", str(target), str(wheel), cwd=tmp_path)
    code = (
        "import json, gridmix\nfrom gridmix.cli.info import machine_summary\nfrom "
        "gridmix.mixers.concentration.ops.native_build import native_library\nlibrary = "
        "native_library()\nkernels = [k for k in ('tucker', 'semiseparable', 'householder')\n     "
        "      if library is not None and hasattr(library, "
        "f'gm_{k}_forward')]\nprint(json.dumps(dict(file=gridmix.__file__, kernels=kernels, "
        "**machine_summary())))"
    )
    env = dict(os.environ, PYTHONPATH=str(target), GRIDMIX_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout.splitlines()[-1])
    assert Path(summary["file"]).is_relative_to(target), summary["file"]  # the wheel's gridmix
    assert summary["native"] is not None, f"native kernels not built: {done.stderr[-2000:]}"
    assert Path(summary["native"]["path"]).is_relative_to(tmp_path / "cache")
    assert summary["kernels"] == ["tucker", "semiseparable", "householder"]
