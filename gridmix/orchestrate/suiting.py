"""What ``gridmix suite`` does (``gridmix.suite``): for each track of a set, the sweep over its
whole difficulty ladder with the idea against attention (the track's matched baseline) and the
baselines, each into its own ledger ``OUT/TRACK``, then the suite's profile
(:mod:`gridmix.report.suite_report`) in ``OUT``.

A track's ladder is :attr:`~gridmix.tracks.Track.ladder`, the values of its ``difficulty``
setting in order (as ``gridmix tracks`` shows them); each track's rungs are one
``gridmix sweep --over difficulty=…`` (:mod:`.sweeping`), so a suite killed at any point resumes
where it stopped and reuses every point already in a ledger. A track without a ladder is one study
(:func:`~gridmix.orchestrate.plan.plan_study`) at its defaults. ``budget="smoke"`` trains the idea,
attention and exactly the baselines named (none of the track's own other models, ablation or
control), on the ladder's lowest two rungs, on the smallest grid with fewer tokens than the track's
default where every such rung is accepted and draws the data of every run (:func:`smallest_grid`).
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gridmix.analysis.parity import measure_cost
from gridmix.core.grid import Grid
from gridmix.core.interrupt import stop_on_signals
from gridmix.orchestrate.callbacks import QUIET, Callbacks
from gridmix.orchestrate.execute import make_executor, open_ledger, run_study
from gridmix.orchestrate.front_door import StorageError, storage_error
from gridmix.orchestrate.plan import PlannedStudy, command_line_changes, plan_study
from gridmix.orchestrate.sweeping import PlannedSweep, open_sweep_ledger, plan_sweep, run_sweep
from gridmix.report.suite_report import (
    DEFAULT_FRACTION,
    SuiteReport,
    TrackRuns,
    build_suite_report,
    write_suite_report,
)
from gridmix.report.sweep_report import SweepReport
from gridmix.study.executors import refuse_main_rerun
from gridmix.study.spec import SWEEP_SEED_OFFSET
from gridmix.tracks import Track
from gridmix.tracks.budget import DataSizes
from gridmix.tracks.contract import LADDER_SETTING
from gridmix.tracks.plugin_loader import load_registry

# the graded grid tasks, multi-query associative recall and sequence forecasting
DEFAULT_TRACKS = ("recall", "pathfinder", "copy", "occlusion", "mqar", "sequence")
SMOKE_RUNGS = 2  # the lowest rungs a smoke suite trains


def _ignore(*args) -> None:
    return None


def default_out(budget: str) -> Path:
    """Where a suite of ``budget`` goes when no ``out`` is given."""
    return Path("runs") / f"suite-{budget}"


def smallest_grid(
    track: Track, rungs: Sequence[str], sizes: DataSizes, seeds: Sequence[int]
) -> str | None:
    """The smallest grid of equal sides with fewer tokens than ``track``'s default that the track at
    every rung of ``rungs`` (none: as it is) accepts and draws its data on, ``sizes`` for every one
    of ``seeds`` (the runs' own data: a rung that fits a grid only by luck is found); ``None`` when
    there is none (the default grid is the cheapest)."""
    tracks = [track.with_settings({LADDER_SETTING: rung}) for rung in rungs] or [track]
    for side in range(1, max(track.default_grid) + 1):
        grid = Grid((side,) * track.ndim)
        if grid.numel >= track.default_grid.numel:
            return None
        try:
            for rung_track in tracks:
                checked = rung_track.check_grid(grid)
                for seed in seeds:
                    rung_track.make_data(checked, seed, sizes)
        except ValueError:
            continue
        return str(grid)
    return None


def default_tracks(
    idea: str | None, baselines: Sequence[str]
) -> tuple[tuple[str, ...], dict[str, str]]:
    """The tracks of :data:`DEFAULT_TRACKS` that every mixer named (``idea``, ``baselines``) can
    serve on the track's default grid, and the others, each with why it is left out; ``ValueError``
    in one line for an unknown mixer or when no track is left."""
    registry = load_registry()
    named = [mixer for mixer in (idea, *baselines) if mixer is not None]
    for mixer in named:
        registry.mixers[mixer]  # ValueError naming the registered mixers
    kept, left_out = [], {}
    for name in DEFAULT_TRACKS:
        track = registry.track(name)
        for mixer in named:
            spec = track.model_for_mixer(mixer)
            why = "no model around it" if spec is None else spec.supports(track.default_grid)
            if why:
                left_out[name] = f"{mixer}: {why}"
                break
        else:
            kept.append(name)
    if not kept:
        raise ValueError(
            f"no track of the default set {', '.join(DEFAULT_TRACKS)} serves "
            f"{', '.join(named)}; expected --tracks with tracks they can serve"
        )
    return tuple(kept), left_out


def _smoke_data(track: Track, budget: str, seeds: int | None) -> tuple[DataSizes, list[int]]:
    """The split sizes and the seeds (comparison and sweep) of ``track``'s runs at ``budget``."""
    chosen = track.budget(budget, **command_line_changes(seeds=seeds))
    return chosen.sizes, [
        *range(chosen.seeds),
        *(SWEEP_SEED_OFFSET + i for i in range(chosen.sweep_seeds)),
    ]


def _smoke_study(planned: PlannedStudy, baselines: Sequence[str]) -> PlannedStudy:
    """``planned`` training the idea, its matched baseline and the models around the mixers of
    ``baselines`` (the ones the user named), none of the track's other models, ablation or
    control."""
    study = planned.study
    named = {planned.track.model_for_mixer(mixer).name for mixer in baselines}
    keep = tuple(m for m in study.models if m in {study.idea, study.matched_baseline, *named})
    trimmed = dataclasses.replace(
        study,
        models=keep,
        roles={m: role for m, role in study.roles.items() if m in keep},
        model_kwargs={m: kw for m, kw in study.model_kwargs.items() if m in keep},
    )
    return dataclasses.replace(planned, study=trimmed)


@dataclass(frozen=True)
class PlannedTrack:
    """One track of the suite: its rungs (``()``: no ladder) and its sweep, or its one study (no
    ladder, or one rung)."""

    track: str
    rungs: tuple[str, ...]
    planned: PlannedSweep | PlannedStudy

    @property
    def studies(self):
        """Every rung's study, in order."""
        return self.planned.studies

    @property
    def first(self) -> PlannedStudy:
        """The lowest rung's planned study (the only one without a ladder)."""
        if isinstance(self.planned, PlannedSweep):
            return self.planned.points[0].planned
        return self.planned

    def mixers(self) -> dict[str, str]:
        """Each model's mixer name, how the profile names it across tracks; the model's own name
        where it names no mixer or shares its mixer with another model of the study."""
        first = self.first
        named = {name: first.track.model(name).mixer or name for name in first.study.models}
        shared = {mixer for mixer in named.values() if list(named.values()).count(mixer) > 1}
        return {name: name if mixer in shared else mixer for name, mixer in named.items()}

    def cost(self) -> dict[str, tuple[int, int]]:
        """Each model's parameters and the FLOPs of one training step (forward and backward of a
        batch of the budget's size), on the lowest rung's grid
        (:func:`gridmix.analysis.parity.measure_cost`)."""
        first = self.first
        return {
            name: measure_cost(
                first.track,
                first.track.model(name),
                first.grid,
                batch=first.study.budget.batch_size,
                seed=0,
                model_kwargs=first.model_kwargs.get(name),
            )
            for name in first.study.models
        }


def chosen_rungs(track: Track, chosen: Sequence[str] | None) -> tuple[str, ...]:
    """The rungs of ``track``'s ladder named in ``chosen``, in the ladder's order (``None``: the
    whole ladder); ``ValueError`` in one line for a rung not on the ladder or a track without
    one."""
    if chosen is None:
        return track.ladder
    if not track.ladder:
        raise ValueError(f"--rungs {track.name}; the track has no difficulty ladder")
    unknown = [rung for rung in chosen if rung not in track.ladder]
    if unknown or len(set(chosen)) != len(chosen):
        raise ValueError(
            f"--rungs {track.name}={','.join(chosen)}; expected distinct rungs of its ladder "
            f"{', '.join(track.ladder)}"
        )
    return tuple(rung for rung in track.ladder if rung in chosen)


def plan_suite(
    *,
    idea: str | None = None,
    baselines: Sequence[str] = (),
    tracks: Sequence[str] = DEFAULT_TRACKS,
    rungs: Mapping[str, Sequence[str]] | None = None,
    budget: str = "default",
    note: Callable[[str], None] = _ignore,
    **options,
) -> tuple[PlannedTrack, ...]:
    """Every track's sweep over its ladder, or over the rungs ``rungs`` names for it (or its one
    study), planned as ``gridmix sweep`` and ``gridmix run`` plan them with ``options``
    (``seeds``, ``jobs``, ``threads``, …); ``ValueError`` in one line, naming the track, for an
    unknown track, mixer or rung, a track the idea's mixer cannot serve, or no tracks."""
    if not tracks or len(set(tracks)) != len(tracks):
        raise ValueError(f"--tracks {','.join(tracks)}; expected one or more distinct track names")
    rungs = dict(rungs or {})
    stray = sorted(set(rungs) - set(tracks))
    if stray:
        raise ValueError(
            f"--rungs {','.join(stray)}; expected tracks of the suite ({', '.join(tracks)})"
        )
    registry = load_registry()
    smoke = budget == "smoke"
    planned = []
    for name in tracks:
        track = registry.track(name)  # ValueError naming the known tracks
        track_rungs = chosen_rungs(track, rungs.get(name))
        track_rungs = track_rungs[:SMOKE_RUNGS] if smoke else track_rungs
        grid = (
            smallest_grid(track, track_rungs, *_smoke_data(track, budget, options.get("seeds")))
            if smoke
            else None
        )
        common = dict(idea=idea, baselines=tuple(baselines), budget=budget)
        try:
            if len(track_rungs) > 1:
                sweep = plan_sweep(
                    name, [(LADDER_SETTING, track_rungs)], grid=grid, note=note, **common, **options
                )
                if smoke:
                    points = tuple(
                        dataclasses.replace(p, planned=_smoke_study(p.planned, baselines))
                        for p in sweep.points
                    )
                    sweep = dataclasses.replace(sweep, points=points)
                planned.append(PlannedTrack(track=name, rungs=track_rungs, planned=sweep))
            else:  # one study: a track without a ladder, or one rung of it
                settings = {LADDER_SETTING: track_rungs[0]} if track_rungs else None
                study = plan_study(
                    name, grid, scaling=False, settings=settings, note=note, **common, **options
                )
                study = _smoke_study(study, baselines) if smoke else study
                planned.append(PlannedTrack(track=name, rungs=track_rungs, planned=study))
        except ValueError as error:
            message = str(error)
            raise ValueError(
                message if message.startswith(f"track {name!r}") else f"track {name!r}: {message}"
            ) from None
    return tuple(planned)


def _train_track(
    one: PlannedTrack,
    where: Path,
    *,
    fresh: bool,
    executor: str,
    address: str | None,
    callbacks: Callbacks,
) -> TrackRuns:
    """Train the runs of ``one`` its ledger in ``where`` lacks (``fresh``: start them afresh) with
    the ``executor``; its report at every rung."""
    try:
        sweep = isinstance(one.planned, PlannedSweep)
        ledger = (open_sweep_ledger if sweep else open_ledger)(where, one.planned, fresh=fresh)
        try:
            chosen = make_executor(executor, jobs=one.planned.jobs, address=address)
        except BaseException:
            ledger.close()
            raise
        with stop_on_signals():
            report = (run_sweep if sweep else run_study)(
                one.planned, ledger, chosen, where, callbacks=callbacks
            ).report
    except StorageError:
        raise
    except (OSError, sqlite3.Error) as error:
        raise StorageError(storage_error(error, where)) from error
    rungs = (
        tuple((p.values[LADDER_SETTING], p.report) for p in report.points)
        if isinstance(report, SweepReport)
        else ((one.rungs[0] if one.rungs else "default", report),)
    )
    cost = one.cost()
    return TrackRuns(
        track=one.track,
        rungs=rungs,
        mixers=one.mixers(),
        params={name: params for name, (params, _) in cost.items()},
        flops={name: flops for name, (_, flops) in cost.items()},
        batch=one.first.study.budget.batch_size,
    )


def suite(
    *,
    idea: str | None = None,
    baselines: Sequence[str] = (),
    tracks: Sequence[str] | None = None,
    rungs: Mapping[str, Sequence[str]] | None = None,
    budget: str = "default",
    out: str | Path | None = None,
    fresh: bool = False,
    executor: str = "local",
    address: str | None = None,
    fraction: float = DEFAULT_FRACTION,
    callbacks: Callbacks = QUIET,
    **options,
) -> SuiteReport:
    """The suite ``gridmix suite`` runs: ``idea`` (a registered mixer; ``None``: each track's own
    idea) against attention and ``baselines`` on every track of ``tracks`` over its ladder (or the
    rungs ``rungs`` names for it; :func:`plan_suite`, ``options`` as for
    :func:`~gridmix.orchestrate.plan.plan_study`), each track's runs in ``OUT/TRACK`` (default
    ``out``: ``runs/suite-BUDGET``), the profile written in ``out`` and returned. ``tracks``
    ``None``: :func:`default_tracks`, those a mixer named cannot serve left out with a note and a
    line in the profile. Every track is planned before any trains, so a bad name costs nothing."""
    refuse_main_rerun()
    left_out = {}
    if tracks is None:
        tracks, left_out = default_tracks(idea, baselines)
        for name, why in left_out.items():
            callbacks.note(f"track {name!r} left out of the default set: {why}")
    planned = plan_suite(
        idea=idea,
        baselines=baselines,
        tracks=tracks,
        rungs=rungs,
        budget=budget,
        note=callbacks.note,
        **options,
    )
    out = Path(out) if out is not None else default_out(budget)
    runs = [
        _train_track(
            one,
            out / one.track,
            fresh=fresh,
            executor=executor,
            address=address,
            callbacks=callbacks,
        )
        for one in planned
    ]
    profile = build_suite_report(runs, budget=budget, fraction=fraction, left_out=left_out)
    write_suite_report(profile, out)
    return profile
