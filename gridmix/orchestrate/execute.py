"""Running a planned study: its ledger (:func:`open_ledger`), the executor that trains it
(:func:`make_executor`), and :func:`run_study`, which trains what the ledger lacks, stores the
references and the parity and scaling analyses, and builds and writes the report with the track's
generated examples (an :class:`Outcome`).
"""

from __future__ import annotations

import contextlib
import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gridmix.core.grid import Grid
from gridmix.orchestrate.callbacks import QUIET, Callbacks
from gridmix.orchestrate.plan import PlannedStudy
from gridmix.report.build import analyses_of, build_report, write_report
from gridmix.report.learnability import Learnability, learnability_report, write_learnability
from gridmix.report.types import Report
from gridmix.study.harness import Runner
from gridmix.study.ledger import Ledger
from gridmix.study.spec import Study
from gridmix.tracks import Track

if TYPE_CHECKING:
    from gridmix.analysis.memory import MemoryProbe


@dataclass(frozen=True)
class Outcome:
    """A finished study: its report (a :class:`Learnability` for a study without the idea), the
    files written (``bench_report.json`` or ``learnability.json``, ``report.md``, plots) and the
    seconds it took."""

    report: Report | Learnability
    paths: tuple[Path, ...]
    seconds: float


def open_ledger(out: str | Path, planned: PlannedStudy, *, fresh: bool = False) -> Ledger:
    """The study's ledger in ``out``, locked, holding ``planned``'s specification (``ValueError``
    when ``out`` holds another study or something else; ``OSError`` or ``sqlite3.Error`` when the
    file system refuses)."""
    ledger = Ledger(out, lock=True)
    try:
        if fresh:
            ledger.start_fresh()
        ledger.set_study(planned.study.to_dict())
    except BaseException:
        ledger.close()
        raise
    return ledger


def make_executor(kind: str = "local", *, jobs: int = 1, address: str | None = None):
    """The executor ``--executor`` names (``local`` or ``ray``), handing every run the idea's
    mechanism analysis."""
    from gridmix.analysis.idea_mechanism import idea_mechanism
    from gridmix.study.executors import InProcessExecutor, WorkerPoolExecutor

    if kind == "local":
        if jobs == 1:
            return InProcessExecutor(after_training=idea_mechanism)
        return WorkerPoolExecutor(jobs, after_training=idea_mechanism)
    if kind != "ray":
        raise ValueError(f"executor {kind!r}; expected 'local' or 'ray'")
    try:
        from gridmix.study.executors_ray import RayExecutor
    except ImportError as error:
        raise ValueError(
            f"--executor ray needs Ray: pip install 'gridmix[ray]' ({error})"
        ) from None
    return RayExecutor(address=address, after_training=idea_mechanism)


def run_study(
    planned: PlannedStudy,
    ledger: Ledger,
    executor,
    out: str | Path,
    *,
    callbacks: Callbacks = QUIET,
) -> Outcome:
    """Train what the ledger lacks, store the references and (with ``planned.scaling``) parity and
    scaling, and write the report into ``out``; the executor is closed when the runs end."""
    from gridmix.analysis.scaling import memory_probe

    started = time.perf_counter()
    with ledger:
        try:
            callbacks.begin(planned, ledger)
            Runner(
                planned.study,
                ledger,
                executor,
                **callbacks.run_hooks(),
                on_phase=callbacks.phase,
                on_resume=callbacks.resume,
            ).run()
        finally:
            executor.close()  # the workers are gone before the analyses time anything
        measure_analyses = planned.scaling and not analyses_stored(
            ledger, planned.study, planned.model_kwargs
        )
        with memory_probe().start() if measure_analyses else contextlib.nullcontext() as probe:
            # the scaling's memory server imports torch on the core the references leave idle
            callbacks.analysis("references")
            store_references(ledger, planned.track, planned.grid, planned.study)
            if measure_analyses:
                callbacks.analysis("parity and scaling")
                store_analyses(
                    ledger,
                    planned.track,
                    planned.grid,
                    planned.study.models,
                    planned.study.budget,
                    planned.model_kwargs,
                    probe=probe,
                )
        if planned.study.paired:
            report = build_report(ledger)
            draw = planned.track.draw_examples
            paths = write_report(
                report,
                Path(out),
                draw_examples=functools.partial(draw, planned.grid) if draw else None,
            )
        else:
            report = learnability_report(ledger)
            paths = write_learnability(report, Path(out))
    outcome = Outcome(report=report, paths=tuple(paths), seconds=time.perf_counter() - started)
    callbacks.finished(outcome)
    return outcome


def analyses_stored(ledger: Ledger, study: Study, model_kwargs: dict) -> bool:
    """Whether an earlier run of this study stored its parity and scaling, for its models
    (:func:`gridmix.report.build.analyses_of`) and these ``model_kwargs``."""
    from gridmix.analysis.parity import PARITY_KWARGS_KEY

    stored = analyses_of(ledger.fetch("analyses"), study.models, study.idea)
    return bool(stored) and stored.get("parity", {}).get(PARITY_KWARGS_KEY) == model_kwargs


def store_analyses(
    ledger: Ledger,
    track: Track,
    grid: Grid,
    names,
    budget,
    model_kwargs: dict,
    *,
    probe: MemoryProbe | None = None,
) -> None:
    """Parity and scaling, measured and kept in the ledger for ``gridmix report`` (:func:`run_study`
    skips this when :func:`analyses_stored`, so a resumed study measures them once); ``probe``: the
    scaling's memory server, if the caller started it
    (:func:`gridmix.analysis.scaling.scale_track`).

    A failing analysis is stored as ``{"error": …}`` and reported; the study's results are kept.
    """
    from gridmix.analysis.parity import parity_report
    from gridmix.analysis.scaling import ScalingConfig, scale_track, scaling_grids

    smoke = budget.name == "smoke"
    grids = scaling_grids(grid, count=2 if smoke else 3)  # those the track skips are named
    config = ScalingConfig(repeats=5, warmup=2)  # the spread of five is quotable (docs/analysis.md)
    analyses = {}
    measures = (
        ("parity", lambda: parity_report(track, grid, models=names, model_kwargs=model_kwargs)),
        (
            "scaling",
            lambda: scale_track(track, grids, models=names, config=config, probe=probe).to_dict(),
        ),
    )
    for name, measure in measures:
        try:
            analyses[name] = measure()
        except Exception as error:  # recorded and reported; the finished runs stay valid
            analyses[name] = {"error": f"{type(error).__name__}: {error}"}
    ledger.put("analyses", dict(analyses, models=list(names)))  # what they were measured on


def store_references(ledger: Ledger, track: Track, grid: Grid, study: Study) -> None:
    """The references (:mod:`gridmix.analysis.references`) on every comparison seed's own test
    split, kept in the ledger; references stored for the same seeds and data are kept (a resumed
    study computes them once)."""
    from gridmix.analysis.references import VERSION, study_references

    stored = ledger.fetch("references") or {}
    data = study.data.get("hash", "")
    if (stored.get("version"), stored.get("seeds"), stored.get("data")) == (
        VERSION,
        study.comparison_seeds,
        data,
    ):
        return
    try:
        references = study_references(
            track, grid, study.budget.sizes, study.comparison_seeds, fixed_split=study.fixed_split
        )
        ledger.put("references", dict(references, data=data))
    except Exception as error:  # recorded; the finished runs stay valid
        ledger.put(
            "references",
            {"kind": "none", "values": {}, "error": f"{type(error).__name__}: {error}"},
        )
