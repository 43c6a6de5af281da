"""Shared fixtures, and the check that `gridmix report` succeeds on every ledger a test writes."""

import dataclasses
import platform
import sys

import pytest
import torch

import gridmix.mixers.concentration.ops.native_build as native_build


@pytest.fixture(scope="module")
def one_thread():
    """Small tensors: one thread avoids OpenMP hand-off stalls when other processes share the
    cores."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture
def fake_registry():
    """The registry with the test track ``fake`` (tests/fake_track.py) loaded, reset afterwards."""
    from gridmix.tracks.plugin_loader import load_registry
    from tests import fake_track

    yield load_registry(extra_plugins=[fake_track], refresh=True)
    load_registry(refresh=True)


@pytest.fixture(autouse=True)
def every_ledger_reports(request):
    """After each test, `gridmix report` must succeed on every ledger with a study that the test
    left behind."""
    tmp_path = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if tmp_path is None:
        return
    from typer.testing import CliRunner

    from gridmix.cli import app
    from gridmix.study.ledger import LEDGER_NAME, Ledger

    for path in sorted(tmp_path.rglob(LEDGER_NAME)):
        try:
            with Ledger(path.parent, create=False) as ledger:
                study = ledger.study()
        # the deliberately foreign, corrupt or half-created files of the store tests
        except Exception:
            continue
        if study is None:
            continue
        result = CliRunner().invoke(app, ["report", str(path.parent)], env={"COLUMNS": "200"})
        if "budget" in study:  # a study the harness wrote: its report must succeed
            assert result.exit_code == 0, f"gridmix report {path.parent} failed:\n{result.output}"
        else:  # a hand-made spec of the store tests: refused in one line, never a traceback
            assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, (
                result.output
            )


@dataclasses.dataclass(frozen=True)
class KernelBuild:
    """One build of the native kernels the host can run: ``GRIDMIX_NATIVE_FLAGS`` (``None``: the
    default attempts), and the vector ISA and lanes it must report (``None``: whatever the compiler
    targets)."""

    name: str
    flags: str | None
    isa: str | None = None
    lanes: int | None = None
    openmp: bool | None = None


def kernel_builds() -> list[KernelBuild]:
    """The default build, each x86 ISA level the host can execute (generic x86-64, AVX2, AVX-512),
    the forced scalar form, and a build without OpenMP (work split over torch's threads from
    Python)."""
    omp = " -fopenmp" if sys.platform.startswith("linux") else ""  # GCC and clang on Linux take it
    builds = [KernelBuild("default", None)]
    # the CPU's feature flags, as the kernel build reads them
    host = set(native_build._cpu_flags().split())
    if platform.machine() in ("x86_64", "AMD64"):
        builds.append(KernelBuild("x86-64", "-march=x86-64" + omp, "sse2", 4))
        if {"avx2", "fma", "bmi2"} <= host:
            builds.append(KernelBuild("x86-64-v3", "-march=x86-64-v3" + omp, "avx2", 8))
        if {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"} <= host:
            builds.append(KernelBuild("x86-64-v4", "-march=x86-64-v4" + omp, "avx512f", 16))
    builds.append(KernelBuild("scalar", "-DGM_SCALAR" + omp, "scalar", 1))
    builds.append(KernelBuild("no-openmp", "-march=native" if omp else "-O3", openmp=False))
    return builds


@pytest.fixture(params=kernel_builds(), ids=lambda build: build.name)
def kernel_build(request, monkeypatch):
    """Each build of :func:`kernel_builds` loaded in turn (a compile error fails the test, naming
    its line)."""
    from gridmix.mixers.concentration.ops.native_build import (
        NativeBuildError,
        build,
        forget_library,
    )

    wanted = request.param
    if wanted.flags is not None:
        monkeypatch.setenv("GRIDMIX_NATIVE_FLAGS", wanted.flags)
    forget_library()
    try:
        _, info = build()
    except NativeBuildError as error:
        pytest.fail(f"the {wanted.name} build failed: {error}")
    for field in ("isa", "lanes", "openmp"):
        expected = getattr(wanted, field)
        assert expected is None or getattr(info, field) == expected, f"{wanted.name}: {info}"
    yield info
    monkeypatch.undo()
    forget_library()
