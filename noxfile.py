"""nox sessions: ``tests`` (what CI and the README run), ``lint``, ``bench`` (CI-sized benchmark),
``bench_gpu``.

Each session installs gridmix the way the README does (``pip install -e .[dev]``) and reuses its
environment between runs (``nox.options.reuse_existing_virtualenvs``). Times on the 2-core machine
are in docs/ci.md.
"""

import json
import shutil
import subprocess
from pathlib import Path

import nox

nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests", "lint"]

EXAMPLE_PLUGINS = ("plugins/gridmix-example-track", "plugins/gridmix-example-mixer")


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite."""
    session.install("-e", ".[dev]")
    session.run("pytest", "-q", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the whole tree."""
    session.install("ruff")
    session.run("ruff", "check", ".")


# prints the first of the grids argv[2:] that the track argv[1] accepts, or nothing
FIRST_ACCEPTED = """
import sys
from gridmix.core.grid import Grid
from gridmix.tracks.plugin_loader import load_registry
track = load_registry().track(sys.argv[1])
print(next((g for g in sys.argv[2:] if track.supports(Grid.parse(g)) is None), ""))
"""


def smaller_grids(default_grid: str) -> list[str]:
    """Grids smaller than ``default_grid`` to try, in order: halved along every axis (never below
    2), three quarters of it, one less along every axis (``4x5x5``: ``2x2x2``, ``3x3x3``,
    ``3x4x4``)."""
    sizes = [int(n) for n in default_grid.split("x")]
    candidates = ["x".join(str(max(2, n * part // 4)) for n in sizes) for part in (2, 3)]
    candidates.append("x".join(str(max(2, n - 1)) for n in sizes))
    return [g for g in dict.fromkeys(candidates) if g != default_grid]


def _small_grids(session: nox.Session, track: dict) -> str:
    """The CI scaling points: the first of :func:`smaller_grids` the track accepts and its default
    grid."""
    default_grid = track["default_grid"]
    accepted = session.run(
        "python", "-c", FIRST_ACCEPTED, track["name"], *smaller_grids(default_grid), silent=True
    ).strip()
    return ",".join(dict.fromkeys([g for g in (accepted, default_grid) if g]))


@nox.session
def bench(session: nox.Session) -> None:
    """Every installed track (the example third-party plugins too) through `gridmix run --budget
    smoke`, the scaling analysis at small grids, the mixer micro-benchmarks and every registered
    mixer's cost (``bench_mixers.py --quick``), into one artifact directory (``nox -s bench --
    DIR``, default ``bench-artifacts``). Fails if any analysis fails, never because the idea
    lost."""
    session.install("-e", ".[dev]")
    session.install(*EXAMPLE_PLUGINS)
    artifacts = Path(session.posargs[0] if session.posargs else "bench-artifacts").resolve()
    shutil.rmtree(artifacts, ignore_errors=True)
    listing = session.run(
        "python", "-m", "gridmix", "tracks", "--json", silent=True, stderr=subprocess.DEVNULL
    )
    tracks = json.loads(listing)["tracks"]
    failed, skipped = [], {}
    for track in tracks:
        name = track["name"]
        if track.get("data_missing"):  # a real-data track whose files are not on this machine
            skipped[name] = track["data_missing"]
            continue
        for label, command in [
            (
                "run",
                [
                    "gridmix",
                    "run",
                    "--track",
                    name,
                    "--budget",
                    "smoke",
                    "--out",
                    str(artifacts / "runs" / name),
                ],
            ),
            (
                "scale",
                [
                    "gridmix",
                    "scale",
                    "--track",
                    name,
                    "--grids",
                    _small_grids(session, track),
                    "--repeats",
                    "2",
                    "--out",
                    str(artifacts / "scaling" / name),
                ],
            ),
        ]:
            try:
                session.run(*command)
            except nox.command.CommandFailed:
                failed.append(f"{label} {name}")
    for label, script in (
        ("micro-benchmarks", "bench_mixer.py"),
        ("mixers' cost", "bench_mixers.py"),
    ):
        try:
            session.run(
                "python", f"benchmarks/{script}", "--quick", "--out", str(artifacts / "micro")
            )
        except nox.command.CommandFailed:
            failed.append(label)
    summary = dict(
        tracks=[t["name"] for t in tracks],
        skipped=skipped,
        failed=failed,
        aa=_aa_rate(session, artifacts),
    )
    if summary["aa"] is None or summary["aa"]["binomial_p_rate_above_level"] < 0.001:
        failed.append(
            "A/A false-positive rate (missing, or far above the exact level: the harness leaks)"
        )
    (artifacts / "summary.json").write_text(json.dumps(summary, indent=2))
    if failed:
        session.error(f"failed: {', '.join(failed)}")


def _aa_rate(session: nox.Session, artifacts: Path) -> dict | None:
    """The harness's A/A false-positive rate (benchmarks/bench_aa.py), without the per-replicate
    p-values."""
    try:
        session.run("python", "benchmarks/bench_aa.py", "--out", str(artifacts / "aa"))
    except nox.command.CommandFailed:
        return None
    result = json.loads((artifacts / "aa" / "aa.json").read_text())
    return {key: value for key, value in result.items() if key != "p_values"}


@nox.session
def bench_gpu(session: nox.Session) -> None:
    """The GPU figures (benchmarks/bench_gpu.py) on a CUDA machine, in under 5 minutes: layer and
    ViT step against timm's fused attention in fp32 and bf16, and the default image study with 8
    runs sharing the GPU (``nox -s bench_gpu -- DIR [extra bench_gpu.py arguments]``, default
    ``bench-gpu``; e.g. ``--cpu-study-s`` with the same study's CPU time for the speed-up line). The
    session's pip must resolve a CUDA build of torch."""
    session.install("-e", ".[dev]")
    out = session.posargs[0] if session.posargs else "bench-gpu"
    session.run("python", "benchmarks/bench_gpu.py", "--out", out, *session.posargs[1:])
