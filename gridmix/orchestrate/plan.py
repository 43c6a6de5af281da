"""Planning a study: from what ``gridmix run`` is given (a track, a grid, a budget, models, …) to a
:class:`PlannedStudy` ready to run, every cheap and every costly check done before any training.

:func:`plan_study` resolves the track with its settings, the grid, the budget and its changes, the
device and precision, the models (:func:`choose_models`), the evaluation grids, the seeds' power
(:func:`check_power`), the leak check (:mod:`.leak_check`), the worker processes
(:func:`resolve_jobs`) and the data fingerprint. A user mistake (an unknown track, model or budget,
a grid the track refuses, seeds that cannot reach α) is a ``ValueError`` whose message is one line;
the command line prints it and exits 2.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gridmix.analysis.references import chance_level
from gridmix.analysis.verdicts import ALPHA
from gridmix.core.grid import Grid
from gridmix.core.inputs import parse_grids, parse_names, refuse_repeats
from gridmix.orchestrate.leak_check import check_causality
from gridmix.study.precision import resolve_precision
from gridmix.study.spec import Study, aa_study
from gridmix.study.train import resolve_device
from gridmix.tracks import Track
from gridmix.tracks.budget import command_line_changes
from gridmix.tracks.mixer_models import choose_mixers
from gridmix.tracks.plugin_loader import load_registry


def _ignore(*args) -> None:
    return None


@dataclass(frozen=True)
class PlannedStudy:
    """A study ready to run: the harness's :class:`Study`, the track and grid it came from, the
    idea's matched width as ``model_kwargs`` (``--match-params``), whether scaling is measured, the
    output directory ``gridmix run`` uses by default, and the local worker processes that train it
    (``jobs``, resolved: :func:`resolve_jobs`)."""

    study: Study
    track: Track
    grid: Grid
    model_kwargs: dict = field(default_factory=dict)
    scaling: bool = True
    default_out: Path = Path("runs")
    jobs: int = 1

    @property
    def studies(self) -> tuple[Study, ...]:
        """The studies it runs: its one (a sweep has one per point)."""
        return (self.study,)


def check_power(seeds: int, *, exploratory: bool, underpowered: bool) -> str | None:
    """Refuse (``ValueError``), before any training, seeds with which the primary comparison can
    never reach α; with ``underpowered`` return the note saying so instead. ``None`` when the seeds
    suffice."""
    from gridmix.analysis.stats import min_attainable_p, seeds_needed

    floor = min_attainable_p(seeds)
    if floor < ALPHA or exploratory:
        return None
    needed = seeds_needed(ALPHA)
    if not underpowered:
        raise ValueError(
            f"with {seeds} seeds the primary comparison cannot reach α = {ALPHA:g} (the exact "
            f"sign-flip test's smallest p is 2/2^{seeds} = {floor:.3g}); it needs at least "
            f"{needed} seeds: pass --seeds {needed}, or --underpowered to run anyway"
        )
    return (
        f"--underpowered: {seeds} seeds cannot reach α = {ALPHA:g} (needs {needed}); the "
        "report says so"
    )


def choose_models(
    track: Track,
    grid: Grid,
    models: str | tuple[str, ...] | None,
    *,
    without_idea: bool = False,
    note: Callable[[str], None] = _ignore,
) -> tuple[str, ...]:
    """The models the study trains: ``models`` (comma-separated or a tuple; the idea is always
    added, unless ``without_idea``: then ``models`` alone, which must leave the idea out), else the
    track's default models, else all of them; each one the grid does not allow is left out with a
    ``note``."""
    given = None
    if models is not None:
        given = list(parse_names(models, "--models") if isinstance(models, str) else models)
        refuse_repeats(given, "--models", ",".join(given))
    if without_idea and (given is None or track.idea.name in given):
        raise ValueError(
            f"--without-idea trains the --models given, without the idea {track.idea.name!r}; "
            f"got --models {models!r}, expected some of {[m.name for m in track.baselines]}"
        )
    if given is not None:
        names = given
        for name in names:
            track.model(name)  # ValueError naming the models the track offers
        if track.idea.name not in names and not without_idea:
            names.insert(0, track.idea.name)
        if len(names) < 2 and not without_idea:
            raise ValueError(
                f"--models {','.join(names)!r} leaves no baseline to compare with; track "
                f"{track.name!r} offers {[m.name for m in track.baselines]}"
            )
    else:
        names = list(track.default_models) or [m.name for m in track.models]
        if track.idea.name not in names:
            names.insert(0, track.idea.name)
    kept = []
    for name in names:
        reason = track.model(name).supports(grid)
        if reason:
            note(f"skipping {name} on {grid}: {reason}")
        else:
            kept.append(name)
    return tuple(kept)


def match_width(
    track: Track, grid: Grid, baseline: str, *, note: Callable[[str], None] = _ignore
) -> dict:
    """The study's ``model_kwargs``: the idea's ``width_kwarg`` set so its parameter count matches
    ``baseline``'s (within 2%)."""
    from gridmix.analysis.parity import count_parameters, match_parameters

    target = count_parameters(track.model(baseline).build(grid))
    match = match_parameters(track.idea, grid, target)
    note(
        f"parity: {track.idea.name} {match.kwarg}={match.value:.4g} gives {match.params} "
        f"parameters, {match.rel_error:.1%} off {baseline}'s {target}"
    )
    return {track.idea.name: {match.kwarg: match.value}}


def fingerprint(track: Track, grid: Grid, budget) -> dict:
    """The study's data fingerprint; building the data here surfaces a plugin's data error before
    any run."""
    from gridmix.study.fingerprint import data_fingerprint

    try:
        return data_fingerprint(track, grid, budget.sizes)
    # the plugin's own message, in one line, at the step that needs the data
    except Exception as error:
        message = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise ValueError(
            f"track {track.name!r} (plugin {track.plugin!r}) could not build its data on grid "
            f"{grid}: {type(error).__name__}: {message}"
        ) from None


def resolve_jobs(
    jobs: int | str, threads: int | None, device: str, *, workers_can_load: bool = True
) -> tuple[int, int]:
    """``(worker processes, torch threads per run)``. ``"auto"``: on the CPU one worker per core
    with one thread each (faster than one worker with every thread on this project's 2-core machine,
    docs/plugins.md "Budgets"), or ``cores // threads`` workers when ``threads`` is given; on CUDA,
    or when a worker process could not load the study's plugins (``workers_can_load``: one
    registered in this process only), one worker. A number of jobs splits the cores between them
    unless ``threads`` says otherwise."""
    cores = os.cpu_count() or 1
    if jobs == "auto":
        if device == "cuda" or not workers_can_load:
            return 1, threads or cores
        return (max(1, cores // threads), threads) if threads else (cores, 1)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"--jobs {jobs!r}; expected 'auto' or a positive integer")
    return jobs, threads or max(1, cores // jobs)


def choose_settings(track: Track, settings: Mapping[str, object] | None) -> dict:
    """The track's setting values ``settings`` asks for (text or numbers,
    :meth:`Track.setting_value`), keeping only those that differ from the track's own: a study at
    the defaults is the plain one, under the same run keys."""
    chosen = {name: track.setting_value(name, value) for name, value in (settings or {}).items()}
    return {name: value for name, value in sorted(chosen.items()) if track.settings[name] != value}


def choose_eval_grids(
    track: Track,
    grid: Grid,
    eval_grids: str | Sequence[str],
    budget,
    *,
    note: Callable[[str], None] = _ignore,
) -> tuple[str, ...]:
    """The grids every trained model is also tested on (comma-separated, by
    :func:`gridmix.core.inputs.split_list`'s rule, or a sequence), each through the checks of the
    study's own grid: the track's (:meth:`Track.check_grid`) and its data built there at
    ``budget``'s sizes (:func:`fingerprint`: a grid too large fails here, before any training).
    ``ValueError`` in one line, also when the track's task is not defined at other grids
    (``Track.fixed_grid``)."""
    names = parse_grids(eval_grids, "--eval-grids") if isinstance(eval_grids, str) else eval_grids
    if not names:
        return ()
    if track.fixed_grid is not None:
        raise ValueError(
            f"--eval-grids: track {track.name!r} is not defined at other grids: {track.fixed_grid}"
        )
    chosen = []
    for name in names:
        try:
            other = track.check_grid(name)
            if other != grid and str(other) not in chosen:
                fingerprint(track, other, budget)
        except ValueError as error:
            raise ValueError(f"--eval-grids {name}: {error}") from None
        if other == grid:
            note(f"--eval-grids: {grid} is the training grid; its test metric is the study's own")
        elif str(other) not in chosen:
            chosen.append(str(other))
    return tuple(chosen)


def plan_study(
    track: str = "image",
    grid: str | None = None,
    *,
    models: str | tuple[str, ...] | None = None,
    idea: str | None = None,
    baselines: tuple[str, ...] = (),
    budget: str = "default",
    seeds: int | None = None,
    lrs: tuple[float, ...] | None = None,
    epochs: int | None = None,
    n_train: int | None = None,
    device: str = "auto",
    precision: str = "auto",
    jobs: int | str = "auto",
    threads: int | None = None,
    scaling: bool = True,
    match_params: str | None = None,
    underpowered: bool = False,
    aa: bool = False,
    settings: Mapping[str, object] | None = None,
    eval_grids: str | Sequence[str] = (),
    min_effect: str | None = None,
    without_idea: bool = False,
    stop_above_chance: float | None = None,
    compile: bool = False,
    note: Callable[[str], None] = _ignore,
) -> PlannedStudy:
    """The study ``gridmix run`` would run with these options (the same names and defaults as its
    own).

    ``idea`` (a registered mixer's name) makes that mixer's model the idea, against the track's
    matched baseline, with the mixer's declared ablation and the track's control; ``baselines`` adds
    registered mixers' models as secondary baselines
    (:func:`gridmix.tracks.mixer_models.choose_mixers`). Without either, the track's own study.
    ``settings`` sets the track's settings (``--set NAME=VALUE``; :attr:`Track.settings`);
    ``eval_grids`` are the other grids every final run's trained model is tested on
    (``--eval-grids``; :mod:`gridmix.study.transfer`). ``seeds``, ``lrs``, ``epochs`` and
    ``n_train`` change the track's budget; the study records them (the report says so) and
    ``epochs`` and ``n_train`` enter every run's key. ``min_effect`` is the practical threshold
    below which a significant effect is reported as negligible (``"1%"`` of the compared arm's mean,
    or a number in the metric's units; default :data:`gridmix.core.defaults.DEFAULT_MIN_EFFECT`).
    ``without_idea`` trains the ``models`` alone, at an exploratory budget only: a learnability
    check with per-model results and no paired verdict (``--without-idea``); ``stop_above_chance``
    stops every run once its validation metric is beyond the track's chance level by that margin
    (``--stop-above-chance``); ``compile`` trains and evaluates every run's model compiled with
    ``torch.compile`` (``--compile``; :mod:`gridmix.study.compiling`), keyed, and kept in its own
    default ``out``.
    """
    from gridmix.analysis.verdicts import MinEffect
    from gridmix.core.defaults import DEFAULT_MIN_EFFECT

    # ValueError in one line
    threshold = MinEffect.parse(DEFAULT_MIN_EFFECT if min_effect is None else min_effect)
    registry = load_registry()
    chosen_settings = choose_settings(registry.track(track), settings)
    chosen_track = registry.track(track, chosen_settings)
    chosen_grid = chosen_track.check_grid(grid if grid is not None else chosen_track.default_grid)
    overrides = command_line_changes(seeds=seeds, lrs=lrs, epochs=epochs, n_train=n_train)
    chosen_budget = chosen_track.budget(budget, **overrides)
    chosen_eval_grids = choose_eval_grids(
        chosen_track, chosen_grid, eval_grids, chosen_budget, note=note
    )
    resolved_device = resolve_device(device).type
    resolved_precision = resolve_precision(precision, resolved_device)
    power_note = check_power(
        chosen_budget.seeds, exploratory=chosen_budget.exploratory, underpowered=underpowered
    )
    if power_note:
        note(power_note)
    notes: tuple[str, ...] = ()
    if idea is not None or baselines:
        if models:
            raise ValueError(
                "--models chooses among the track's own models; with --idea or --baselines, the "
                "study "
                "is the idea, the matched baseline, the ablation, the control and those baselines"
            )
        choice = choose_mixers(
            chosen_track, registry.mixers, chosen_grid, idea=idea, baselines=baselines
        )
        chosen_track, notes = choice.track, choice.notes
        models = choice.models
        for line in notes:
            note(line)
    if without_idea and not chosen_budget.exploratory:
        raise ValueError(
            f"--without-idea with budget {chosen_budget.name!r}; expected an exploratory budget "
            "(--budget smoke): a study without the idea has no paired verdict"
        )
    chance = chance_level(chosen_track, chosen_grid, chosen_budget.sizes)
    if stop_above_chance is not None and not 0 < stop_above_chance < float("inf"):
        raise ValueError(
            f"--stop-above-chance {stop_above_chance!r}; expected a positive finite margin in the "
            "metric's units"
        )
    if stop_above_chance is not None and chance is None:
        raise ValueError(
            f"--stop-above-chance {stop_above_chance:g}: track {chosen_track.name!r} declares no "
            "chance level (Track.chance); expected a track that does"
        )
    names = choose_models(chosen_track, chosen_grid, models, without_idea=without_idea, note=note)
    if stop_above_chance is not None:  # the report's Method lists it with what the study leaves out
        notes += (
            "training to the budget's last epoch: every run stopped once its validation metric "
            f"was {stop_above_chance:g} beyond chance {chance:.4g} (--stop-above-chance)",
        )
    causality = check_causality(chosen_track, names, chosen_grid, registry.mixers)
    plugins = {chosen_track.plugin, *(chosen_track.model(name).plugin for name in names)}
    jobs, run_threads = resolve_jobs(
        jobs,
        threads,
        resolved_device,
        workers_can_load=not any(registry.in_process_only(p) for p in plugins),
    )
    model_kwargs = (
        match_width(chosen_track, chosen_grid, match_params, note=note) if match_params else {}
    )
    study = Study(
        track=chosen_track.name,
        grid=str(chosen_grid),
        models=names,
        idea=chosen_track.idea.name,
        matched_baseline=chosen_track.matched_baseline,
        metric_name=chosen_track.metric_name,
        direction=chosen_track.direction,
        budget=chosen_budget,
        device=resolved_device,
        threads=run_threads,
        model_kwargs=model_kwargs,
        precision=resolved_precision,
        data=fingerprint(chosen_track, chosen_grid, chosen_budget),
        roles={name: chosen_track.model(name).role for name in names},
        chance=chance,
        ceiling=chosen_track.ceiling,
        fixed_split=chosen_track.fixed_split,
        underpowered=underpowered and not chosen_budget.exploratory,
        notes=notes,
        settings=chosen_settings,
        eval_grids=chosen_eval_grids,
        overrides=overrides,
        min_effect=threshold.spelled,
        causality=causality,
        stop_above_chance=stop_above_chance,
        compile=compile,
    )
    if aa:
        study = aa_study(study)
        scaling = False  # the copy costs what its original does: nothing to measure
    settings_part = "".join(f"-{name}{value}" for name, value in chosen_settings.items())
    changed = "".join(
        f"-{name.replace('_', '')}{overrides[name]}"
        for name in ("epochs", "n_train")
        if name in overrides
    )
    learnability = (f"-{'-'.join(names)}" if without_idea else "") + (
        f"-stop{stop_above_chance:g}" if stop_above_chance is not None else ""
    )
    default_out = Path("runs") / (
        f"{study.track}-{study.grid}{settings_part}-{chosen_budget.name}{changed}"
        f"{'-aa' if aa else ''}{learnability}{'-compile' if compile else ''}"
    )
    return PlannedStudy(
        study=study,
        track=chosen_track,
        grid=chosen_grid,
        model_kwargs=model_kwargs,
        scaling=scaling and study.paired,  # parity and scaling are of the idea against each model
        default_out=default_out,
        jobs=jobs,
    )
