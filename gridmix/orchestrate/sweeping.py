"""What ``gridmix sweep`` does between parsing and printing: one study per point of a grid of sizes,
one ledger, one report of quality against scale.

``gridmix sweep --track mqar --over grid=64,128,256 --over embed_dim=32,64`` plans a study
(:func:`plan_study`, as ``gridmix run`` does, without parity and scaling) at every combination of
the swept values: ``grid`` is the study's grid, any other name one of the track's settings
(:attr:`gridmix.tracks.Track.settings`), an unknown one refused in one line that lists them. Every
point's runs go into the same ledger under their own run keys, so a sweep killed at any point
resumes where it stopped, a point already trained by a plain ``gridmix run`` (or an earlier sweep)
into the same directory is reused, not retrained, and the ledger keeps the sweep's document (every
point's study spec) for ``gridmix report``. The report (:mod:`gridmix.report.sweep_report`) reads
the ledger alone.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gridmix.core.grid import Grid
from gridmix.orchestrate.callbacks import QUIET, Callbacks
from gridmix.orchestrate.plan import PlannedStudy, choose_settings, plan_study
from gridmix.report.sweep_report import (
    SweepPoint,
    SweepReport,
    build_sweep_report,
    write_sweep_report,
)
from gridmix.study.harness import Runner
from gridmix.study.ledger import Ledger
from gridmix.study.spec import Study
from gridmix.tracks.plugin_loader import load_registry

GRID = "grid"  # the swept name that is the study's grid, not a track setting


def _ignore(*args) -> None:
    return None


@dataclass(frozen=True)
class PlannedPoint(SweepPoint):
    """One point of the sweep: the swept values there (``grid`` as text) and the study planned for
    them."""

    planned: PlannedStudy


@dataclass(frozen=True)
class PlannedSweep:
    """A sweep ready to run: the track, the swept names with their values in order, every point, and
    the output directory ``gridmix sweep`` uses by default."""

    track: str
    over: tuple[tuple[str, tuple], ...]
    points: tuple[PlannedPoint, ...]
    default_out: Path

    @property
    def studies(self) -> tuple[Study, ...]:
        """Every point's study, in order."""
        return tuple(point.planned.study for point in self.points)

    @property
    def jobs(self) -> int:
        """The local worker processes that train every point (one set for the whole sweep)."""
        return self.points[0].planned.jobs

    def document(self) -> dict:
        """What the ledger keeps of the sweep (:meth:`gridmix.study.ledger.Ledger.set_sweep`)."""
        return dict(
            track=self.track,
            over=[[name, list(values)] for name, values in self.over],
            points=[
                dict(values=dict(point.values), study=point.planned.study.to_dict())
                for point in self.points
            ],
        )


@dataclass(frozen=True)
class SweepOutcome:
    """A finished sweep: its report, the files written and the seconds it took."""

    report: SweepReport
    paths: tuple[Path, ...]
    seconds: float


def plan_sweep(
    track: str = "mqar",
    over: Sequence[tuple[str, Sequence[object]]] = (),
    *,
    grid: str | None = None,
    settings: Mapping[str, object] | None = None,
    note: Callable[[str], None] = _ignore,
    **options,
) -> PlannedSweep:
    """The sweep ``gridmix sweep`` would run: ``over`` the swept names with their values (``grid``
    or the track's settings), ``grid`` and ``settings`` where a point does not sweep them,
    ``options`` those of :func:`plan_study` (budget, seeds, models, …). ``ValueError`` in one line
    for an unknown setting, a name swept twice or set too, fewer than two values, or a point
    :func:`plan_study` refuses (naming the point)."""
    base = load_registry().track(track)
    settings = dict(settings or {})
    if not over:
        raise ValueError(
            f"a sweep needs --over NAME=V1,V2,…; track {track!r} sweeps grid and its settings "
            f"{', '.join(sorted(base.settings)) or '(none)'}"
        )
    swept: list[tuple[str, tuple]] = []
    for name, values in over:
        if name in dict(swept) or name in settings or (name == GRID and grid is not None):
            raise ValueError(
                f"--over {name}: {name!r} is swept twice or also set (--set, --grid); expected once"
            )
        converted = tuple(
            str(Grid.parse(v)) if name == GRID else base.setting_value(name, v) for v in values
        )
        if len(set(converted)) != len(converted) or len(converted) < 2:
            raise ValueError(
                f"--over {name}={','.join(map(str, values))}: expected at least two distinct values"
            )
        swept.append((name, converted))
    # an unknown --set setting is refused before any point is planned
    choose_settings(base, settings)
    notes: dict[str, None] = {}
    points = []
    for combination in itertools.product(*(values for _, values in swept)):
        values = dict(zip((name for name, _ in swept), combination))
        point_settings = {
            **settings,
            **{name: value for name, value in values.items() if name != GRID},
        }
        try:
            planned = plan_study(
                track,
                values.get(GRID, grid),
                settings=point_settings,
                scaling=False,
                note=lambda line: notes.setdefault(line),
                **options,
            )
        except ValueError as error:
            label = ", ".join(f"{name}={value}" for name, value in values.items())
            raise ValueError(f"sweep point {label}: {error}") from None
        points.append(PlannedPoint(values=values, planned=planned))
    for line in notes:
        note(line)
    budget = points[0].planned.study.budget.name
    compiled = "-compile" if options.get("compile") else ""
    default_out = (
        Path("runs") / f"{track}-sweep-{'-'.join(name for name, _ in swept)}-{budget}{compiled}"
    )
    return PlannedSweep(
        track=base.name, over=tuple(swept), points=tuple(points), default_out=default_out
    )


def open_sweep_ledger(out: str | Path, planned: PlannedSweep, *, fresh: bool = False) -> Ledger:
    """The sweep's ledger in ``out``, locked, holding its document (``ValueError`` when ``out``
    holds another track's study or sweep, or results on other data)."""
    ledger = Ledger(out, lock=True)
    try:
        if fresh:
            ledger.start_fresh()
        ledger.set_sweep(planned.document())
    except BaseException:
        ledger.close()
        raise
    return ledger


def run_sweep(
    planned: PlannedSweep,
    ledger: Ledger,
    executor,
    out: str | Path,
    *,
    callbacks: Callbacks = QUIET,
) -> SweepOutcome:
    """Train every point's runs the ledger lacks, point after point (``callbacks.point`` as each
    starts), then write the sweep's report into ``out``; the executor is closed when the runs
    end."""
    started = time.perf_counter()
    with ledger:
        try:
            callbacks.begin(planned, ledger)
            for point in planned.points:
                callbacks.point(point)
                Runner(
                    point.planned.study,
                    ledger,
                    executor,
                    **callbacks.run_hooks(),
                    record_study=False,
                ).run()
        finally:
            executor.close()  # one set of workers for every point
        report = build_sweep_report(ledger)
        paths = write_sweep_report(report, Path(out))
    outcome = SweepOutcome(report=report, paths=tuple(paths), seconds=time.perf_counter() - started)
    callbacks.finished(outcome)
    return outcome
