"""The study report, rebuilt from the ledger alone: ``bench_report.json`` and ``report.md``.

The JSON keeps the reference report's keys (``bench_version``, ``track``, ``metric_direction``,
``n_seeds``, ``baseline``/``idea`` with ``best_cfg``, ``sweep``, ``full``, ``comparison``,
``mechanism_signature``) and adds: ``primary_baseline`` (``comparison`` is the primary comparison,
idea vs the matched baseline, alone at α), ``comparisons`` (primary and secondary, each with its
``family``), ``holm_adjusted_over`` (the secondary family), ``mechanism`` (idea vs ablation, idea
and matched baseline vs the no-mixing control), ``power`` (can the seeds reach α), ``seeds``
(comparison and sweep seeds), ``chance``/``ceiling`` and every arm's ``role``, ``flag`` and
``constant_prediction_seeds``, the references on every comparison seed and ``reference_comparisons``
(each model against the best of them, a paired sign-flip test alone at α), ``min_effect`` (the
practical threshold), the budget, timings, versions, failures, the scaling and parity analyses when
the run measured them, ``transfer`` when the study tested its models on other grids
(``--eval-grids``), and ``compiled`` when it compiled them (``--compile``: the backend, the models
that trained eager). Every comparison also holds the interval from inverting its sign-flip test
(``signflip_ci_low``/``signflip_ci_high``) beside the t-interval (``ci_low``/``ci_high``). The
report is a :class:`gridmix.report.types.Report`; :meth:`~gridmix.report.types.Report.to_dict`
writes the JSON, :mod:`gridmix.report.markdown` renders the Markdown. docs/design.md section 6,
docs/analysis.md.

Differences to the reference report's keys, on purpose: ``sweep`` entries hold the *validation*
metric (the reference study chose on test); ``comparison.mde`` is the sign-flip test's minimum
detectable effect at 80% power, and the reference report's "mde" (the 95% t half-width) is
``comparison.ci_half_width``; ``p_value`` is the exact sign-flip p.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from gridmix.analysis.references import with_model_metrics
from gridmix.analysis.stats import min_attainable_p, seeds_needed, summarize
from gridmix.analysis.verdicts import (
    ALPHA,
    MIN_PAIRS,
    VERDICT_NOT_COMPARED,
    MinEffect,
    ablation_verdict,
    bound_flag,
    holm_floor,
    judge_family,
)
from gridmix.core.defaults import COMPILE_BACKEND, DEFAULT_MIN_EFFECT
from gridmix.core.files import write_atomic
from gridmix.core.records import pick
from gridmix.report.types import (
    Arm,
    Comparison,
    FailedRun,
    Power,
    PrimaryPower,
    Report,
    SecondaryPower,
    SweepPoint,
    Transfer,
    TransferArm,
    TransferGrid,
)
from gridmix.study.ledger import Ledger, RunRow
from gridmix.study.spec import Study, choose_learning_rates
from gridmix.study.transfer import TRANSFER_MISSING
from gridmix.tracks import ROLES

BENCH_VERSION = 3
TIMING_KEYS = (
    "timings",
    "scaling",
)  # measured wall-clock: differs between two runs of the same command


def _final_rows(
    study: Study, rows: dict[str, RunRow], model: str, lr: float | None
) -> list[RunRow | None]:
    if lr is None:
        return [None] * study.budget.seeds
    return [rows.get(study.task(model, lr, seed).key) for seed in study.comparison_seeds]


def _arm(
    study: Study, rows: dict[str, RunRow], model: str, lr: float | None, sweep: list[dict]
) -> Arm:
    finals = _final_rows(study, rows, model, lr)
    ok = [row.test_metric for row in finals if row is not None and row.status == "ok"]
    summary = summarize(ok) if ok else None
    constant = tuple(
        seed
        for seed, row in zip(study.comparison_seeds, finals)
        if row is not None
        and row.status == "ok"
        and row.extras.get("test_predictions", {}).get("constant")
    )
    return Arm(
        name=model,
        role=study.role(model),
        lr=lr,
        sweep=tuple(SweepPoint.from_dict(p) for p in sweep),
        per_seed_status=tuple(row.status if row else "missing" for row in finals),
        train_loss=tuple(tuple(row.train_loss) if row else () for row in finals),
        val=tuple(tuple(row.val_curve) if row else () for row in finals),
        per_seed=tuple(summary.per_seed) if summary else (),
        mean=summary.mean if summary else None,
        std=summary.std if summary else None,
        flag=_flag(study, ok),
        constant_seeds=constant,
    )


def _flag(study: Study, values: list[float]) -> str | None:
    """The arm's floor or ceiling flag (:func:`gridmix.analysis.verdicts.bound_flag`) at the study's
    levels."""
    return bound_flag(values, chance=study.chance, ceiling=study.ceiling, direction=study.direction)


def _pairs(study, rows, chosen, a: str, b: str) -> tuple[list[float], list[float], list[int]]:
    """Per comparison seed where both ``a`` and ``b`` finished: their test metrics and the seeds."""
    rows_a = _final_rows(study, rows, a, chosen[a])
    rows_b = _final_rows(study, rows, b, chosen[b])
    both = [
        i
        for i, (x, y) in enumerate(zip(rows_a, rows_b))
        if x is not None and y is not None and x.status == "ok" and y.status == "ok"
    ]
    return (
        [rows_a[i].test_metric for i in both],
        [rows_b[i].test_metric for i in both],
        [study.comparison_seeds[i] for i in both],
    )


def _family(
    study, rows, chosen, arms: dict[str, Arm], family: str, pairs: dict[str, tuple[str, str]]
) -> dict[str, Comparison]:
    """Each ``name -> (a, b)`` (a − b per seed) judged as one Holm family
    (:func:`gridmix.analysis.verdicts.judge_family`), said of ``a`` by its role."""
    values, results = {}, {}
    for name, (a, b) in pairs.items():
        a_values, b_values, seeds = _pairs(study, rows, chosen, a, b)
        if len(seeds) >= MIN_PAIRS:
            values[name] = (a_values, b_values)
        else:
            results[name] = Comparison(
                a=a,
                b=b,
                family=family,
                verdict=VERDICT_NOT_COMPARED,
                reason=f"only {len(seeds)} seed(s) where both models finished; a paired "
                f"test needs {MIN_PAIRS}",
            )
    judged = judge_family(
        values,
        direction=study.direction,
        min_effect=_min_effect(study),
        roles={name: study.role(pairs[name][0]) for name in values},
        flags={name: (arms[pairs[name][0]].flag, arms[pairs[name][1]].flag) for name in values},
    )
    for name, result in judged.items():
        a, b = pairs[name]
        results[name] = Comparison(
            a=a, b=b, family=family, verdict=result.verdict, holm_over=len(values), result=result
        )
    return {name: results[name] for name in pairs}


def _min_effect(study: Study) -> MinEffect:
    return MinEffect.parse(study.min_effect or DEFAULT_MIN_EFFECT)


def _reference_comparisons(
    study: Study, arms: dict[str, Arm], references: dict | None
) -> dict[str, Comparison]:
    """Each arm against the best reference (by its mean over seeds), seed by seed, a sign-flip test
    alone at α.

    References stored before they were computed per seed hold seed 0's value only: it then stands
    for every seed.
    """
    values = (references or {}).get("values") or {}
    if not values:
        return {}
    best = (min if study.direction == "lower" else max)(values, key=values.get)
    stored = (references.get("per_seed") or {}).get(best)
    by_seed = dict(zip(references["seeds"], stored)) if stored else {}
    comparisons = {}
    for name, arm in arms.items():
        pairs = [
            (value, by_seed[study.comparison_seeds[i]] if stored else values[best])
            for i, value in arm.by_seed.items()
            if not stored or study.comparison_seeds[i] in by_seed
        ]
        if len(pairs) < MIN_PAIRS:
            comparisons[name] = Comparison(
                a=name,
                b=best,
                family="reference",
                verdict=VERDICT_NOT_COMPARED,
                reason=f"only {len(pairs)} seed(s) with both values; a paired test "
                f"needs {MIN_PAIRS}",
            )
            continue
        model, reference = zip(*pairs)
        result = judge_family(
            {name: (model, reference)},
            direction=study.direction,
            min_effect=_min_effect(study),
            roles={name: arm.role},
            flags={name: (arm.flag, None)},
        )[name]
        comparisons[name] = Comparison(
            a=name, b=best, family="reference", verdict=result.verdict, holm_over=1, result=result
        )
    return comparisons


def _power(study: Study, n_secondary: int) -> Power:
    """Before any training: can the primary (alone) and the secondary family (Holm) reach α with
    these seeds?"""
    n = study.budget.seeds
    min_p = min_attainable_p(n)
    secondary = None
    if n_secondary:
        min_p_holm = holm_floor(n, n_secondary)
        secondary = SecondaryPower(
            comparisons=n_secondary,
            min_p_holm=min_p_holm,
            reachable=min_p_holm < ALPHA,
            seeds_needed=seeds_needed(ALPHA, comparisons=n_secondary),
        )
    return Power(
        alpha=ALPHA,
        n_seeds=n,
        underpowered_run=study.underpowered,
        secondary=secondary,
        primary=PrimaryPower(
            min_p=min_p, seeds_needed=seeds_needed(ALPHA), reachable=min_p < ALPHA
        ),
    )


def _mechanism(study: Study, rows: dict[str, RunRow], idea_lr: float | None) -> dict | None:
    """The idea's seeds' mechanism analyses merged by the hook its mixer declares
    (``combine_mechanism``)."""
    from gridmix.analysis.idea_mechanism import (
        LEGACY_MECHANISM_MIXER,
        MECHANISM_MIXER,
        combine_mechanism,
    )

    per_seed, mixers = {}, set()
    for seed, row in zip(study.comparison_seeds, _final_rows(study, rows, study.idea, idea_lr)):
        if row is not None and row.status == "ok" and "mechanism" in row.extras:
            per_seed[seed] = row.extras["mechanism"]
            mixers.add(row.extras.get(MECHANISM_MIXER, LEGACY_MECHANISM_MIXER))
    try:
        if len(mixers) > 1:
            raise ValueError(f"the seeds' analyses come from mixers {sorted(mixers)}; expected one")
        return combine_mechanism(mixers.pop(), per_seed) if per_seed else None
    except Exception as error:  # recorded and rendered as failed; the comparison stands
        return {"error": f"{type(error).__name__}: {error}"}


def _identity(spec: dict, versions: dict) -> dict:
    """What the study ran on: its data (fingerprint, source, split sizes) and the code (versions,
    plugin)."""
    data = spec.get("data") or {}
    return dict(
        data=data or None,
        code=dict(versions, plugin=data.get("plugin"), plugin_version=data.get("plugin_version")),
    )


def _steps_per_epoch(spec: dict) -> int:
    """Training batches per epoch: the training split's size (the data fingerprint's, else the
    budget's ``n_train``) over the batch size, rounded up, as :func:`gridmix.study.train.train_run`
    steps."""
    budget = spec["budget"]
    n_train = ((spec.get("data") or {}).get("sizes") or {}).get("train", budget["n_train"])
    return math.ceil(n_train / budget["batch_size"])


def build_report(ledger: Ledger) -> Report:
    """The full report of the ledger's study, with the analyses (scaling, parity) the run stored."""
    spec = ledger.study()
    if spec is None:
        raise ValueError(
            f"the ledger {str(ledger.path)!r} holds no study yet; run `gridmix run` first"
        )
    return study_report(
        spec,
        {row.key: row for row in ledger.rows()},
        where=str(ledger.path),
        analyses=ledger.fetch("analyses"),
        references=ledger.fetch("references"),
    )


def analyses_of(stored: dict | None, models: Sequence[str], idea: str) -> dict:
    """The stored parity and scaling (``{"parity": …, "scaling": …}``, the report's keys) if they
    were measured for a study of ``models`` (in its order) with this ``idea``, else ``{}``. A
    directory holds one study at a time, and another study on the same track and grid
    (``--idea``, ``--models``) reuses its finished runs but not these, which compare its own idea
    with its own models. Analyses stored without their ``models`` (by gridmix before it kept them)
    are refused only where they name another idea, or a model the study does not train."""
    if not stored:
        return {}
    measured = stored.get("models")
    if measured is not None:
        matches = list(measured) == list(models)
    else:
        parity, scaling = stored.get("parity") or {}, stored.get("scaling") or {}
        named = {row.get("model") for row in parity.get("rows", [])}
        named |= set(scaling.get("models", []))
        matches = parity.get("idea") in (None, idea) and named <= set(models)
    if not matches:
        return {}
    return {name: analysis for name, analysis in stored.items() if name != "models"}


def read_study(spec: dict, where: str) -> Study:
    """The :class:`Study` of a stored spec; a hand-written or foreign one is refused in one line."""
    try:
        return Study.from_dict(spec)
    except (KeyError, TypeError) as error:
        raise ValueError(
            f"the study spec in {where!r} is incomplete or foreign "
            f"({type(error).__name__}: {error}); was it written by `gridmix run`?"
        ) from None


def study_report(
    spec: dict,
    rows: dict[str, RunRow],
    *,
    where: str,
    analyses: dict | None = None,
    references: dict | None = None,
) -> Report:
    """The report of the study ``spec`` from the ledger's ``rows`` (by key) and what the run stored
    beside them (``analyses``: parity and scaling, used where they are this study's,
    :func:`analyses_of`; ``references``: the naive ones); ``where`` names the ledger in errors."""
    study = read_study(spec, where)
    chosen, sweeps = choose_learning_rates(study, rows)
    arms = {model: _arm(study, rows, model, chosen[model], sweeps[model]) for model in study.models}
    by_role = {role: [m for m in study.models if study.role(m) == role] for role in ROLES}
    primary = (
        study.matched_baseline
        if study.matched_baseline in by_role["baseline"]
        else next(iter(by_role["baseline"]), None)
    )
    secondary = [m for m in by_role["baseline"] if m != primary]

    comparisons = _family(
        study, rows, chosen, arms, "primary", {primary: (study.idea, primary)} if primary else {}
    )
    comparisons.update(
        _family(study, rows, chosen, arms, "secondary", {m: (study.idea, m) for m in secondary})
    )
    for name, comparison in comparisons.items():
        arms[name] = dataclasses.replace(arms[name], comparison=comparison)
    questions = {}
    for ablation in by_role["ablation"]:
        questions["ablation"] = (study.idea, ablation)
    for control in by_role["control"]:
        questions["idea_vs_control"] = (study.idea, control)
        if primary:
            questions["baseline_vs_control"] = (primary, control)
    mechanism = {
        # each question alone
        name: _family(study, rows, chosen, arms, "mechanism", {name: pair})[name]
        for name, pair in questions.items()
    }
    signature = _mechanism(study, rows, chosen[study.idea])
    if "ablation" in mechanism and mechanism["ablation"].result is not None:
        question = mechanism["ablation"]
        result = ablation_verdict(question.result, signature)
        mechanism["ablation"] = dataclasses.replace(question, verdict=result.verdict, result=result)
    references = dict(references or {}) or None
    # a timing, reported as one
    reference_seconds = references.pop("seconds", None) if references else None
    if references:
        # the data fingerprint they were computed on: the report's own "data"
        references.pop("data", None)

    keys = _study_keys(study, chosen)  # a sweep's ledger holds the rows of many studies
    study_rows = [
        row
        for model in study.models
        for row in rows.values()
        if row.model == model and row.key in keys
    ]
    versions = study_rows[0].versions if study_rows else {}
    return Report(
        bench_version=BENCH_VERSION,
        **pick(study, "track", "grid", "idea", "direction", "fixed_split", "chance", "ceiling"),
        metric=study.metric_name,
        comparison_seeds=tuple(study.comparison_seeds),
        sweep_seeds=tuple(study.sweep_seeds),
        arms={
            study.idea: arms[study.idea],
            **{name: arms[name] for name in study.models if name != study.idea},
        },
        primary_baseline=primary,
        comparisons=comparisons,
        holm_adjusted_over=tuple(secondary),
        power=_power(study, len(secondary)),
        mechanism=mechanism,
        mechanism_signature=signature,
        budget=dict(spec["budget"], **({"overrides": study.overrides} if study.overrides else {})),
        failures=tuple(
            FailedRun(**pick(row, "model", "lr", "seed", "status", "error"))
            for row in study_rows
            if row.status != "ok"
        ),
        timings=_timings(study_rows, _steps_per_epoch(spec), reference_seconds),
        versions=versions,
        **pick(study, "device", "precision", "threads"),
        **_identity(spec, versions),
        analyses=analyses_of(analyses, study.models, study.idea),
        notes=study.notes,
        references=with_model_metrics(
            references,
            {model: _final_rows(study, rows, model, chosen[model]) for model in study.models},
        ),
        transfer=_transfer(study, rows, chosen, primary) if study.eval_grids else None,
        reference_comparisons=_reference_comparisons(study, arms, references),
        min_effect=study.min_effect or DEFAULT_MIN_EFFECT,
        causality=study.causality or None,
        compiled=_compiled(study, study_rows),
    )


def _compiled(study: Study, rows: list[RunRow]) -> dict | None:
    """With ``--compile``: the backend the runs used and, per model, the runs that trained eager
    because their model could not be compiled (how many of the model's runs, the first one's
    error)."""
    if not study.compile:
        return None
    fallback: dict[str, dict] = {}
    for row in rows:
        record = row.extras.get("compile", {})
        if "fallback" in record:
            model = fallback.setdefault(row.model, dict(runs=0, error=record["fallback"]))
            model["runs"] += 1
    for name, model in fallback.items():
        model["of"] = sum(1 for row in rows if row.model == name)
    backends = {row.extras["compile"]["backend"] for row in rows if "compile" in row.extras}
    return dict(backend=", ".join(sorted(backends or {COMPILE_BACKEND})), eager_fallback=fallback)


def _transfer(study: Study, rows: dict[str, RunRow], chosen: dict, primary: str | None) -> Transfer:
    """Every model's final runs as tested on each evaluation grid, and there the idea against the
    primary baseline."""
    grids = []
    for grid in study.eval_grids:
        arms = {
            model: _transfer_arm(model, _final_rows(study, rows, model, chosen[model]), grid)
            for model in study.models
        }
        comparison = (
            _transfer_comparison(study, grid, arms, study.idea, primary) if primary else None
        )
        grids.append(TransferGrid(grid=grid, arms=arms, comparison=comparison))
    return Transfer(trained_grid=study.grid, grids=tuple(grids))


def _transfer_arm(model: str, finals: list[RunRow | None], grid: str) -> TransferArm:
    """One model at ``grid``: each final run's evaluation there (``extras["transfer"]``,
    gridmix.study.transfer)."""
    outcomes = [
        (row.extras.get("transfer") or {}).get(grid)
        if row is not None and row.status == "ok"
        else None
        for row in finals
    ]
    statuses = tuple(outcome["status"] if outcome else TRANSFER_MISSING for outcome in outcomes)
    values = [
        outcome["test_metric"] for outcome in outcomes if outcome and outcome["status"] == "ok"
    ]
    summary = summarize(values) if values else None
    reasons = tuple(
        dict.fromkeys(
            f"{'cannot run' if outcome['status'] == 'cannot' else 'failed'} at {grid}: "
            f"{outcome['reason']}"
            for outcome in outcomes
            if outcome and outcome["status"] != "ok"
        )
    )
    adapted = next(
        (outcome["adapted"] for outcome in outcomes if outcome and outcome["status"] == "ok"), ""
    )
    return TransferArm(
        name=model,
        statuses=statuses,
        per_seed=tuple(values),
        mean=summary.mean if summary else None,
        std=summary.std if summary else None,
        adapted=adapted,
        reasons=reasons,
    )


def _transfer_comparison(
    study: Study, grid: str, arms: dict[str, TransferArm], a: str, b: str
) -> Comparison:
    """``a − b`` at an evaluation grid over the seeds where both ran, alone at α (family
    ``"transfer"``), judged by the primary's rules (:func:`gridmix.analysis.verdicts.judge_family`)
    with the arms' flags there."""
    by_a, by_b = arms[a].by_seed, arms[b].by_seed
    both = sorted(set(by_a) & set(by_b))
    if len(both) < MIN_PAIRS:
        why = "; ".join(
            f"{name} {arms[name].reasons[0]}"
            for name in (a, b)
            if not arms[name].per_seed and arms[name].reasons
        )
        return Comparison(
            a=a,
            b=b,
            family="transfer",
            verdict=VERDICT_NOT_COMPARED,
            reason=why
            or f"only {len(both)} seed(s) where both models ran at {grid}; a paired test "
            f"needs {MIN_PAIRS}",
        )
    a_values, b_values = [by_a[i] for i in both], [by_b[i] for i in both]
    result = judge_family(
        {b: (a_values, b_values)},
        direction=study.direction,
        min_effect=_min_effect(study),
        roles={b: study.role(a)},
        flags={b: (_flag(study, a_values), _flag(study, b_values))},
    )[b]
    return Comparison(
        a=a, b=b, family="transfer", verdict=result.verdict, holm_over=1, result=result
    )


def _study_keys(study: Study, chosen: dict) -> set[str]:
    tasks = study.sweep_tasks() + study.final_tasks(chosen)
    return {task.key for task in tasks}


def _timings(
    rows: list[RunRow], steps_per_epoch: int, reference_seconds: float | None = None
) -> dict:
    """Per model: its runs, their total and median wall-clock seconds, and the median over its
    trained runs of wall-clock per training step (``steps_per_epoch`` times the epochs it ran)."""
    per_model: dict[str, list[RunRow]] = {}
    for row in rows:
        per_model.setdefault(row.model, []).append(row)
    timings = dict(
        method="wall-clock seconds of each training run (train + per-epoch validation + test)",
        step_method=(
            "a run's wall-clock over its training steps (epochs run × "
            f"{steps_per_epoch} batches per epoch), median over the model's runs"
        ),
        threads=sorted({row.threads for row in rows}),
        per_model={m: _model_timings(t, steps_per_epoch) for m, t in per_model.items()},
        total_s=float(sum(row.wall_s for row in rows)),
    )
    machines = sorted({row.extras["machine"] for row in rows if "machine" in row.extras})
    # the CPUs the runs' wall_s were measured on (rows from before gridmix recorded it have none)
    if machines:
        timings["machines"] = machines
    if reference_seconds is not None:  # every seed's references, from data to scores, in the driver
        timings["references_s"] = float(reference_seconds)
    return timings


def _model_timings(rows: list[RunRow], steps_per_epoch: int) -> dict:
    seconds = [row.wall_s for row in rows]
    per_step = [row.wall_s / (row.epochs_done * steps_per_epoch) for row in rows if row.epochs_done]
    return dict(
        runs=len(rows),
        total_s=float(np.sum(seconds)),
        median_run_s=float(np.median(seconds)),
        median_step_ms=float(np.median(per_step)) * 1e3 if per_step else None,
    )


def write_report(
    report: Report, out: str | Path, *, draw_examples: Callable[[Path], None] | None = None
) -> list[Path]:
    """Write ``bench_report.json``, ``report.md`` and the PNG plots into ``out``; return the paths.

    ``draw_examples(path)``, when given, draws the track's generated samples into the PNG ``path``
    (:attr:`gridmix.tracks.Track.draw_examples` on the study's grid), saved as ``examples.png``; an
    error there becomes a line of the report's plot errors, never a lost report. The markdown shows
    an ``examples.png`` in ``out``, drawn now or by an earlier run of the study."""
    from gridmix.report.markdown import EXAMPLES, render_markdown
    from gridmix.report.plots import plot_report

    out = Path(out)
    paths = [out / "bench_report.json", out / "report.md"]
    errors: list[str] = []
    figures = plot_report(report, out, errors=errors)
    if draw_examples is not None:
        _draw_examples(draw_examples, out / EXAMPLES, errors)
    if (out / EXAMPLES).is_file():
        figures.insert(0, out / EXAMPLES)
    if errors:
        report = report.with_plot_errors(errors)
    write_atomic(paths[0], json.dumps(report.to_dict(), indent=2, sort_keys=False) + "\n")
    try:
        markdown = render_markdown(report, figures=[p.name for p in figures])
    # never lose report.md: the verdict and the error, the JSON holds the rest
    except Exception as error:
        markdown = (
            f"# gridmix: {report.idea} on {report.track} {report.grid}\n\n**Verdict: "
            f"{report.verdict}**\n\nThe full report could not be rendered ({type(error).__name__}: "
            f"{error}); bench_report.json holds every number.\n"
        )
    write_atomic(paths[1], markdown)
    return paths + figures


def _draw_examples(draw: Callable[[Path], None], path: Path, errors: list[str]) -> None:
    """``draw`` into a scratch file ending in ``.png`` beside ``path``, renamed over ``path`` once
    it holds a picture; any error (the previous picture, if any, removed) appended to ``errors``."""
    try:
        with tempfile.TemporaryDirectory(dir=path.parent, prefix=".examples.") as scratch:
            drawn = Path(scratch) / path.name
            draw(drawn)
            if not drawn.is_file() or drawn.stat().st_size == 0:
                raise ValueError(f"it wrote no picture at {drawn.name}; expected a PNG there")
            os.replace(drawn, path)
    except Exception as error:
        path.unlink(missing_ok=True)
        errors.append(f"examples picture: {type(error).__name__}: {error}")
