"""How the native kernels are built (``gridmix.mixers.concentration.ops.native_build``): where a C
compiler exists they must build, the attempts fall back in order, a failure is reported by its
``error:`` line, ``gridmix info`` shows the vector ISA, each build reports the ISA and lanes it was
compiled for, and the sources compile for aarch64 (NEON) where a cross compiler is installed
(``apt-get install gcc-aarch64-linux-gnu``)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import gridmix.mixers.concentration.ops.native_build as native_build
from gridmix.cli import app
from gridmix.mixers.concentration.ops.native_build import (
    NativeBuildError,
    build,
    error_line,
    forget_library,
    native_build_info,
    vector_isa,
)

CROSS = "aarch64-linux-gnu-gcc"
SOURCES = [str(Path(native_build.__file__).with_name(name)) for name in native_build.SOURCES]


@pytest.fixture
def fresh_cache(monkeypatch, tmp_path):
    """An empty kernel cache and no loaded library, before and after the test."""
    monkeypatch.setenv("GRIDMIX_CACHE_DIR", str(tmp_path))
    forget_library()
    yield monkeypatch
    monkeypatch.undo()
    forget_library()


def test_the_kernels_build_wherever_a_c_compiler_exists():
    compiler = os.environ.get("CC", "cc")
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler {compiler!r} on PATH")
    try:
        _, info = build()
    except NativeBuildError as error:
        pytest.fail(f"a C compiler is on PATH but the kernels do not build: {error}")
    # the first attempt builds on this machine
    assert info.lanes in (1, 4, 8, 16) and not info.failed_attempts


def test_each_build_reports_the_isa_and_lanes_it_targets(kernel_build):
    assert native_build_info() == kernel_build  # the loaded library is the fixture's build
    if (
        kernel_build.flags == native_build.ATTEMPTS[0]
        and "avx512f" in Path("/proc/cpuinfo").read_text()
    ):
        assert (kernel_build.isa, kernel_build.lanes) == ("avx512f", 16)


def test_the_attempts_fall_back_in_order_and_record_what_failed(fresh_cache):
    fresh_cache.setattr(native_build, "ATTEMPTS", (("-fno-such-flag",), ("-DGM_SCALAR",)))
    _, info = build()
    assert info.flags == ("-DGM_SCALAR",) and info.isa == "scalar"
    assert len(info.failed_attempts) == 1 and "-fno-such-flag" in info.failed_attempts[0]
    # the compiler's error line, not its first line of output
    assert "error:" in info.failed_attempts[0]


def test_when_nothing_builds_the_warning_names_the_error_line_of_the_last_attempt(
    fresh_cache, tmp_path
):
    bad = tmp_path / "bad.h"
    bad.write_text('#error "this header stops every build"\n')
    fresh_cache.setenv("GRIDMIX_NATIVE_FLAGS", f"-include {bad}")
    with pytest.warns(RuntimeWarning) as caught:
        assert native_build.native_library() is None
    message = str(caught[0].message)
    assert (
        "error: #error" in message
        and "this header stops every build" in message
        and "using torch ops" in message
    )
    # no stray source line printed
    assert caught[0].filename == native_build.__name__ and caught[0].lineno == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert native_build.native_library() is None  # the verdict is cached: no second warning


def test_error_line_picks_the_error_not_the_first_line():
    output = (
        "tucker_native.c: In function 'basis_block_4_4':\n"
        "tucker_native.c:133:21: error: impossible constraint in 'asm'\n"
        '  133 |   __asm__("" : "+v"(lv[a]));\n'
    )
    assert error_line(output) == "tucker_native.c:133:21: error: impossible constraint in 'asm'"
    assert error_line("ld: cannot find -lgomp\n") == "ld: cannot find -lgomp"
    assert error_line("") == "no output"


def test_gridmix_info_shows_the_vector_isa_lanes_and_openmp():
    result = CliRunner().invoke(app, ["info"])
    assert result.exit_code == 0, result.output
    info = native_build_info()
    assert f"native kernels: {info.isa}, {info.lanes} float lanes" in result.output
    assert "compiler:" in result.output and "flags:" in result.output and info.path in result.output
    as_json = CliRunner().invoke(app, ["info", "--json"])
    assert '"isa"' in as_json.output and '"openmp"' in as_json.output and '"cpu"' in as_json.output


@pytest.mark.parametrize(
    ("flags", "machine", "expected"),
    [
        (
            "fpu sse sse2 ssse3 sse4_1 sse4_2 avx f16c avx2 fma",
            "x86_64",
            "avx2",
        ),  # an AMD Zen 3: no AVX-512
        ("sse2 avx avx2 avx512f avx512bw avx512vl", "x86_64", "avx512f"),
        ("fpu sse sse2 sse4_1 sse4_2", "x86_64", "sse4.2"),
        ("fp asimd evtstrm aes crc32", "aarch64", "neon"),
        ("", "arm64", "neon"),  # macOS has no /proc/cpuinfo; every 64-bit Arm has NEON
        ("", "x86_64", "unknown"),
    ],
)
def test_the_cpus_widest_vector_isa_is_read_from_its_feature_flags(flags, machine, expected):
    assert vector_isa(flags, machine) == expected


def test_gridmix_info_shows_the_cpus_own_isa_and_what_narrowed_torchs(monkeypatch):
    """The CPU's ISA comes from its flags, not from the build (an emulated AVX2 build on an AVX-512
    CPU shows both), and the variables that hold torch or the kernels to a narrower ISA are
    named."""
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "AVX2")
    summary = json.loads(CliRunner().invoke(app, ["info", "--json"]).output)
    assert summary["cpu_isa"] == vector_isa(native_build._cpu_flags(), platform.machine())
    assert summary["isa_environment"]["MKL_ENABLE_INSTRUCTIONS"] == "AVX2"
    assert summary["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    text = CliRunner().invoke(app, ["info"]).output
    assert f"vector ISA {summary['cpu_isa']}" in text and "MKL_ENABLE_INSTRUCTIONS=AVX2" in text


@pytest.mark.skipif(
    shutil.which(CROSS) is None, reason=f"no cross compiler {CROSS} (gcc-aarch64-linux-gnu)"
)
@pytest.mark.parametrize(
    "flags", [["-march=armv8-a", "-fopenmp"], ["-march=armv8-a"], ["-march=armv8.2-a+sve"]]
)
def test_the_sources_compile_for_aarch64_neon(tmp_path, flags):
    command = [
        CROSS,
        *native_build.COMMON_FLAGS,
        *flags,
        *SOURCES,
        "-o",
        str(tmp_path / "gridmix_native.so"),
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, error_line(result.stderr)
    probe = tmp_path / "probe.c"
    probe.write_text(
        '#include "native_simd.h"\n_Static_assert(LANES == 4 && GM_VREGS == 32, "NEON: 4 lanes");\n'
    )
    header_dir = str(Path(SOURCES[0]).parent)
    checked = subprocess.run(
        [CROSS, *flags, "-I", header_dir, "-fsyntax-only", str(probe)],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, error_line(checked.stderr)
