"""The native kernels' cache (``gridmix.mixers.concentration.ops.native_build``) is checked before
it is loaded: a truncated, altered or unverifiable library is rebuilt with one warning saying what
was wrong, `gridmix info` says what the cache held, and concurrent builders of one cache take
turns."""

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gridmix.mixers.concentration.ops import native_build
from gridmix.mixers.concentration.ops.native_build import (
    check_cached,
    compile_library,
    manifest_path,
)

COMPILER = os.environ.get("CC", "cc")
needs_compiler = pytest.mark.skipif(
    shutil.which(COMPILER) is None, reason=f"no C compiler {COMPILER!r} on PATH"
)


def info(cache: Path) -> tuple[subprocess.CompletedProcess, dict]:
    """`gridmix info --json` in a fresh process whose kernel cache is ``cache``: the process and its
    summary."""
    done = subprocess.run(
        [sys.executable, "-m", "gridmix", "info", "--json"],
        capture_output=True,
        text=True,
        env=dict(os.environ, GRIDMIX_CACHE_DIR=str(cache)),
    )
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    return done, json.loads(done.stdout)


@needs_compiler
def test_a_truncated_cached_library_is_rebuilt_with_one_warning_and_info_says_so(tmp_path):
    _, built = info(tmp_path)
    library = Path(built["native"]["path"])
    size = library.stat().st_size
    with open(library, "r+b") as handle:  # as a full disk or a killed copy leaves it
        handle.truncate(size // 2)
    # the old code died here of SIGBUS (exit -7), reporting nothing
    rebuilt, summary = info(tmp_path)
    assert built["native"]["cache"].startswith("built now (sha256 ")
    assert library.parent == tmp_path and manifest_path(library).exists()
    warnings = [line for line in rebuilt.stderr.splitlines() if "RuntimeWarning" in line]
    assert len(warnings) == 1, rebuilt.stderr
    assert (
        f"{library} is {size // 2:,} bytes where its manifest records {size:,} (truncated"
        in warnings[0]
    )
    assert "rebuilt it" in warnings[0]
    assert summary["native"]["cache"].startswith(
        f"rebuilt: the cached library is {size // 2:,} bytes"
    )
    assert library.stat().st_size == size and check_cached(library) is None
    again, summary = info(tmp_path)
    assert (
        summary["native"]["cache"].startswith("verified (sha256 ")
        and "RuntimeWarning" not in again.stderr
    )


def test_the_check_names_what_is_wrong_with_a_cached_library(tmp_path):
    library = tmp_path / "gridmix_native-0123456789abcdef.so"
    library.write_bytes(b"\x7fELF" + bytes(60))
    assert "has no manifest gridmix_native-0123456789abcdef.so.json" in check_cached(library)
    manifest_path(library).write_text("{not json")
    assert "has an unreadable manifest" in check_cached(library)
    manifest_path(library).write_text(json.dumps(native_build._fingerprint(library)))
    assert check_cached(library) is None
    library.write_bytes(b"\x7fELF" + bytes(59) + b"\x01")  # the same size, one byte changed
    assert "has sha256 " in check_cached(library) and "(damaged)" in check_cached(library)
    library.write_bytes(b"\x7fELF")
    assert (
        check_cached(library) == "is 4 bytes where its manifest records 64 (truncated or damaged)"
    )


@needs_compiler
def test_concurrent_builders_take_turns_and_one_compiles(monkeypatch, tmp_path):
    monkeypatch.setenv("GRIDMIX_CACHE_DIR", str(tmp_path))
    version = subprocess.run(
        [COMPILER, "--version"], capture_output=True, text=True, check=True
    ).stdout
    results = []

    def build() -> None:
        results.append(compile_library(COMPILER, ("-DGM_SCALAR",), version))

    threads = [threading.Thread(target=build) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({path for path, _ in results}) == 1
    states = sorted(state.split(" (")[0] for _, state in results)
    assert states == ["built now", "verified"]
    assert check_cached(results[0][0]) is None
    assert sorted(path.name for path in tmp_path.iterdir() if not path.name.startswith(".")) == [
        results[0][0].name,
        manifest_path(results[0][0]).name,
    ]  # nothing half-built left behind
