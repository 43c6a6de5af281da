"""The study report, rebuilt from the ledger alone: ``bench_report.json`` and ``report.md``.

The JSON keeps the reference report's keys (``bench_version``, ``track``, ``metric_direction``,
``n_seeds``, ``baseline``/``idea`` with ``best_cfg``, ``sweep``, ``full``, ``comparison``,
``mechanism_signature``) and adds every baseline's comparison (Holm-adjusted together), the budget,
timings, versions, failures, and the scaling and parity analyses when the run measured them. The
Markdown puts the verdict first. docs/design.md section 6.

Differences to the reference report's keys, on purpose: ``sweep`` entries hold the *validation* metric
(the reference study chose on test); ``comparison.mde`` is the sign-flip test's minimum detectable effect at 80% power,
and the reference report's "mde" (the 95% t half-width) is ``comparison.ci_half_width``; ``p_value`` is
the exact sign-flip p.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from gridmix.analysis.references import reference_lines, with_model_metrics
from gridmix.analysis.stats import (
    VERDICT_BETTER,
    VERDICT_UNREACHABLE,
    VERDICT_WORSE,
    compare_many,
    min_attainable_p,
    seeds_needed,
    summarize,
)
from gridmix.harness import Study, choose_learning_rates
from gridmix.store import Ledger, RunRow
from gridmix.tracks import ROLES

BENCH_VERSION = 3
ALPHA = 0.05  # every test's level; the primary comparison is tested alone at it
TIMING_KEYS = ("timings", "scaling")  # measured wall-clock: differs between two runs of the same command


FLOOR_BAND = 0.05  # an arm is "at chance" when every seed is within 5% of |ceiling − chance| of the chance level
CEILING_BAND = 0.005  # … and "at ceiling" when every seed is within 0.5% of that range of the ceiling


def _final_rows(study: Study, rows: dict[str, RunRow], model: str, lr: float | None) -> list[RunRow | None]:
    if lr is None:
        return [None] * study.budget.seeds
    return [rows.get(study.task(model, lr, seed).key) for seed in study.comparison_seeds]


def _arm(study: Study, rows: dict[str, RunRow], model: str, lr: float | None, sweep: list) -> dict:
    finals = _final_rows(study, rows, model, lr)
    ok = [row.test_metric for row in finals if row is not None and row.status == "ok"]
    arm = dict(name=model, role=study.role(model), best_cfg={"lr": lr}, sweep=sweep,
               per_seed_status=[row.status if row else "missing" for row in finals],
               curves=dict(train_loss=[row.train_loss if row else [] for row in finals],
                           val=[row.val_curve if row else [] for row in finals]))
    if ok:
        summary = summarize(ok)
        arm["full"] = dict(mean=summary.mean, std=summary.std, per_seed=summary.per_seed, n=summary.n)
    else:
        arm["full"] = dict(mean=None, std=None, per_seed=[], n=0)
    arm["flag"] = _bound_flag(study, ok)
    return arm


def _bound_flag(study: Study, values: list[float]) -> str | None:
    """``"at chance"`` / ``"at ceiling"`` when every seed sits there (bands: FLOOR_BAND, CEILING_BAND), else None."""
    if not values or study.chance is None:
        return None
    span = abs(study.ceiling - study.chance) if study.ceiling is not None else abs(study.chance)
    if span == 0:
        return None
    if all(abs(v - study.chance) <= FLOOR_BAND * span or _beyond(study, v, study.chance) for v in values):
        return "at chance"
    if study.ceiling is not None and all(abs(v - study.ceiling) <= CEILING_BAND * span for v in values):
        return "at ceiling"
    return None


def _beyond(study: Study, value: float, chance: float) -> bool:
    """Whether ``value`` is worse than chance (an arm below the floor is at the floor, too)."""
    return value < chance if study.direction == "higher" else value > chance


def _pairs(study, rows, chosen, a: str, b: str) -> tuple[list[float], list[float], list[int]]:
    """Per comparison seed where both ``a`` and ``b`` finished: their test metrics and the seeds."""
    rows_a = _final_rows(study, rows, a, chosen[a])
    rows_b = _final_rows(study, rows, b, chosen[b])
    both = [i for i, (x, y) in enumerate(zip(rows_a, rows_b))
            if x is not None and y is not None and x.status == "ok" and y.status == "ok"]
    return ([rows_a[i].test_metric for i in both], [rows_b[i].test_metric for i in both],
            [study.comparison_seeds[i] for i in both])


def _family(study, rows, chosen, arms, family: str, pairs: dict[str, tuple[str, str]]) -> dict[str, dict]:
    """Compare each ``name -> (a, b)`` (a − b per seed), Holm-adjusted within the family, with its verdict.

    A comparison whose Holm floor (family size × the smallest attainable p) is not below α gets the verdict
    "cannot reach α"; one whose two arms both sit at chance (or at the ceiling) is "uninformative".
    """
    values, results = {}, {}
    for name, (a, b) in pairs.items():
        a_values, b_values, seeds = _pairs(study, rows, chosen, a, b)
        if len(seeds) >= 2:
            values[name] = (a_values, b_values)
        else:
            results[name] = dict(verdict="not compared", a=a, b=b, family=family,
                                 reason=f"only {len(seeds)} seed(s) where both models finished; a paired test needs 2")
    compared = compare_many(values, direction=study.direction, alpha=ALPHA) if values else {}
    for name, result in compared.items():
        a, b = pairs[name]
        entry = dict(result.to_dict(), a=a, b=b, family=family, holm_over=len(values))
        floor = len(values) * min_attainable_p(result.n_pairs)
        if floor >= ALPHA:
            entry["verdict"] = VERDICT_UNREACHABLE
        flags = {arms[a]["flag"], arms[b]["flag"]}
        if len(flags) == 1 and None not in flags:
            entry["verdict"] = f"uninformative: both arms {flags.pop()}"
        results[name] = entry
    return {name: results[name] for name in pairs}


def _power(study: Study, n_secondary: int) -> dict:
    """Before any training: can the primary (alone) and the secondary family (Holm) reach α with these seeds?"""
    n = study.budget.seeds
    primary = dict(min_p=min_attainable_p(n), seeds_needed=seeds_needed(ALPHA))
    primary["reachable"] = primary["min_p"] < ALPHA
    power = dict(alpha=ALPHA, n_seeds=n, primary=primary, underpowered_run=study.underpowered)
    if n_secondary:
        power["secondary"] = dict(comparisons=n_secondary, min_p_holm=min(1.0, n_secondary * min_attainable_p(n)),
                                  seeds_needed=seeds_needed(ALPHA, comparisons=n_secondary))
        power["secondary"]["reachable"] = power["secondary"]["min_p_holm"] < ALPHA
    return power


def _mechanism(study: Study, rows: dict[str, RunRow], idea_lr: float | None) -> dict | None:
    from gridmix.analysis.mechanism import combine_signatures

    per_seed = {}
    for seed, row in zip(study.comparison_seeds, _final_rows(study, rows, study.idea, idea_lr)):
        if row is not None and row.status == "ok" and "mechanism" in row.extras:
            per_seed[seed] = row.extras["mechanism"]
    try:
        return combine_signatures(per_seed) if per_seed else None
    except Exception as error:  # recorded and rendered as failed; the comparison stands
        return {"error": f"{type(error).__name__}: {error}"}


def _identity(spec: dict, versions: dict) -> dict:
    """What the study ran on: its data (fingerprint, source, split sizes) and the code (versions, plugin)."""
    data = spec.get("data") or {}
    return dict(data=data or None,
                code=dict(versions, plugin=data.get("plugin"), plugin_version=data.get("plugin_version")))


def build_report(ledger: Ledger) -> dict:
    """The full report of the ledger's study, with the analyses (scaling, parity) the run stored."""
    spec = ledger.study()
    if spec is None:
        raise ValueError(f"the ledger {str(ledger.path)!r} holds no study yet; run `gridmix run` first")
    try:
        study = Study.from_dict(spec)
    except (KeyError, TypeError) as error:  # hand-written or foreign: refused in one line, never a traceback
        raise ValueError(f"the study spec in {str(ledger.path)!r} is incomplete or foreign "
                         f"({type(error).__name__}: {error}); was it written by `gridmix run`?") from None
    rows = {row.key: row for row in ledger.rows()}
    chosen, sweeps = choose_learning_rates(study, rows)
    arms = {model: _arm(study, rows, model, chosen[model], sweeps[model]) for model in study.models}
    by_role = {role: [m for m in study.models if study.role(m) == role] for role in ROLES}
    primary = study.matched_baseline if study.matched_baseline in by_role["baseline"] else next(
        iter(by_role["baseline"]), None)
    secondary = [m for m in by_role["baseline"] if m != primary]

    comparisons = _family(study, rows, chosen, arms, "primary", {primary: (study.idea, primary)} if primary else {})
    comparisons.update(_family(study, rows, chosen, arms, "secondary", {m: (study.idea, m) for m in secondary}))
    for name, comparison in comparisons.items():
        arms[name]["comparison"] = comparison
    mechanism = {}
    for ablation in by_role["ablation"]:
        mechanism["ablation"] = (study.idea, ablation)
    for control in by_role["control"]:
        mechanism["idea_vs_control"] = (study.idea, control)
        if primary:
            mechanism["baseline_vs_control"] = (primary, control)

    study_rows = [row for model in study.models for row in rows.values()
                  if row.model == model and row.key in _study_keys(study, chosen)]
    report = dict(
        bench_version=BENCH_VERSION,
        track=study.track,
        grid=study.grid,
        model=study.idea,
        metric=study.metric_name,
        metric_direction=f"{study.direction} is better",
        n_seeds=study.budget.seeds,
        seeds=dict(comparison=study.comparison_seeds, sweep=study.sweep_seeds),
        fixed_split=study.fixed_split,
        chance=study.chance,
        ceiling=study.ceiling,
        baseline=arms[primary] if primary else None,
        idea=dict(arms[study.idea], **arms[study.idea]["full"]),
        baselines={name: arms[name] for name in study.models if name != study.idea},
        primary_baseline=primary,
        comparison=comparisons.get(primary, dict(verdict="not compared", reason="no baseline")),
        comparisons=comparisons,
        holm_adjusted_over=secondary,
        power=_power(study, len(secondary)),
        mechanism=_family(study, rows, chosen, arms, "mechanism", mechanism),
        mechanism_signature=_mechanism(study, rows, chosen[study.idea]),
        budget=dict(spec["budget"]),
        failures=[dict(model=row.model, lr=row.lr, seed=row.seed, status=row.status, error=row.error)
                  for row in study_rows if row.status != "ok"],
        timings=_timings(study_rows),
        versions=study_rows[0].versions if study_rows else {},
        device=study.device,
        precision=study.precision,
        threads=study.threads,
    )
    report.update(_identity(spec, report["versions"]))
    report.update(ledger.fetch("analyses") or {})
    report["references"] = with_model_metrics(ledger.fetch("references"), {
        model: _final_rows(study, rows, model, chosen[model]) for model in study.models})
    return report


def _study_keys(study: Study, chosen: dict) -> set[str]:
    tasks = study.sweep_tasks() + study.final_tasks(chosen)
    return {task.key for task in tasks}


def _timings(rows: list[RunRow]) -> dict:
    per_model: dict[str, list[float]] = {}
    for row in rows:
        per_model.setdefault(row.model, []).append(row.wall_s)
    return dict(method="wall-clock seconds of each training run (train + per-epoch validation + test)",
                threads=sorted({row.threads for row in rows}),
                per_model={m: dict(runs=len(t), total_s=float(np.sum(t)), median_run_s=float(np.median(t)))
                           for m, t in per_model.items()},
                total_s=float(sum(row.wall_s for row in rows)))


def write_report(report: dict, out: str | Path) -> list[Path]:
    """Write ``bench_report.json``, ``report.md`` and the PNG plots into ``out``; return the paths."""
    from gridmix.report_plots import plot_report

    out = Path(out)
    paths = [out / "bench_report.json", out / "report.md"]
    errors: list[str] = []
    figures = plot_report(report, out, errors=errors)
    if errors:
        report = dict(report, plot_errors=errors)
    paths[0].write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")
    try:
        markdown = render_markdown(report, figures=[p.name for p in figures])
    except Exception as error:  # never lose report.md: the verdict and the error, the JSON holds the rest
        markdown = (f"# gridmix: {report.get('model')} on {report.get('track')} {report.get('grid')}\n\n"
                    f"**Verdict: {report.get('comparison', {}).get('verdict', '–')}**\n\n"
                    f"The full report could not be rendered ({type(error).__name__}: {error}); "
                    "bench_report.json holds every number.\n")
    paths[1].write_text(markdown)
    return paths + figures


def _fmt(value, digits: int = 4) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def render_markdown(report: dict, *, figures: list[str] = ()) -> str:
    c = report["comparison"]
    lines = [f"# gridmix: {report['model']} vs {report['baseline']['name'] if report['baseline'] else '–'} "
             f"on {report['track']} {report['grid']}", ""]
    if "delta_mean" in c:
        lines += [f"**Verdict: {c['verdict']}** — primary comparison, idea vs the matched baseline {c['b']}, "
                  f"α = {c['alpha']:g} unadjusted. {report['metric']} ({report['metric_direction']}): idea "
                  f"{_fmt(c['idea_mean'])} vs baseline {_fmt(c['baseline_mean'])}, Δ = {_fmt(c['delta_mean'])} "
                  f"(95% t-interval {_fmt(c['ci_low'])} … {_fmt(c['ci_high'])}), idea wins {c['idea_wins']}/"
                  f"{c['n_pairs']} seeds, sign-flip p = {_fmt(c['p_value'])} ({c['p_method']}); {_mde_words(c)}.", ""]
    else:
        lines += [f"**Verdict: {c['verdict']}** — {c.get('reason', '')}", ""]
    lines += _caveat_lines(report)
    lines += reference_lines(report)
    secondary = {name: comp for name, comp in report["comparisons"].items() if comp.get("family") == "secondary"}
    if secondary:
        lines += [f"## Secondary comparisons (idea − other baselines, Holm-adjusted over these {len(secondary)})",
                  ""] + _comparison_table(secondary, "baseline") + [""]
    lines += ["## Models (test metric over the comparison seeds, at each model's chosen learning rate)", "",
              "| model | role | chosen lr | mean | std (ddof=0) | n | per seed | flag |",
              "|---|---|---|---|---|---|---|---|"]
    arms = {report["idea"]["name"]: report["idea"], **report["baselines"]}
    for name, arm in arms.items():
        full = arm["full"]
        lines.append(f"| {name} | {arm.get('role', '–')} | {_fmt(arm['best_cfg']['lr'])} | {_fmt(full['mean'])} | "
                     f"{_fmt(full['std'])} | {full['n']} | {', '.join(_fmt(v) for v in full['per_seed'])} | "
                     f"{arm.get('flag') or ''} |")
    lines += _sweep_lines(report, arms)
    lines += _markdown_sections(report)
    if figures:
        lines += ["", "## Plots", ""] + [f"![{name}]({name})" for name in figures]
    seeds = report.get("seeds") or {}
    lines += ["", "## Method", "",
              f"Budget `{report['budget']['name']}`: {report['n_seeds']} paired comparison seeds "
              f"{seeds.get('comparison', '–')}; learning rates {report['budget']['lrs']} chosen on the validation "
              f"metric over the sweep seeds {seeds.get('sweep', '–')}, which never enter a comparison; "
              f"{report['budget']['epochs']} epochs. Paired differences per seed; two-sided sign-flip permutation "
              "test (exact up to 20 pairs, else Monte Carlo); 95% Student t-interval; MDE of the sign-flip test at 80% "
              "power, simulated at the observed spread of the differences. The primary comparison (idea vs matched "
              "baseline) is tested alone at α; other baselines and the mechanism comparisons are Holm-adjusted within "
              "their own families (docs/analysis.md). "
              f"Device {report['device']} ({report.get('precision', 'fp32')}), "
              f"{report['threads']} thread(s). Versions: "
              + ", ".join(f"{k} {v}" for k, v in report["versions"].items()) + ".", ""]
    return "\n".join(lines)


def _comparison_table(comparisons: dict, label: str) -> list[str]:
    lines = [f"| {label} | n | Δ mean | 95% CI | wins | p (sign-flip) | p (Holm) | MDE (80%, sign-flip) | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, comp in comparisons.items():
        if "delta_mean" in comp:
            lines.append(f"| {name} | {comp['n_pairs']} | {_fmt(comp['delta_mean'])} | {_fmt(comp['ci_low'])} … "
                         f"{_fmt(comp['ci_high'])} | {comp['idea_wins']} | {_fmt(comp['p_value'])} "
                         f"({comp['p_method']}) | {_fmt(comp['p_holm'])} | "
                         f"{'unreachable' if comp['mde'] is None else _fmt(comp['mde'])} | {comp['verdict']} |")
        else:
            lines.append(f"| {name} | – | – | – | – | – | – | – | {comp['verdict']}: {comp['reason']} |")
    return lines


def _caveat_lines(report: dict) -> list[str]:
    """What limits the headline: seeds too few for α, arms at the floor or ceiling, a dataset-conditional test."""
    lines = []
    power = report.get("power") or {}
    primary = power.get("primary")
    if primary and not primary["reachable"]:
        lines.append(f"- ⚠ With {power['n_seeds']} seeds the primary comparison cannot reach α = {power['alpha']:g}: "
                     f"the exact sign-flip test's smallest p is {_fmt(primary['min_p'])}; it needs "
                     f"{primary['seeds_needed']} seeds.")
    secondary = power.get("secondary")
    if secondary and not secondary["reachable"]:
        lines.append(f"- ⚠ The {secondary['comparisons']} secondary comparisons (Holm) cannot reach α: their smallest "
                     f"adjusted p is {_fmt(secondary['min_p_holm'])}; they need {secondary['seeds_needed']} seeds.")
    arms = {report["idea"]["name"]: report["idea"], **report["baselines"]}
    for name, arm in arms.items():
        if arm.get("flag"):
            bound = report.get("chance") if arm["flag"] == "at chance" else report.get("ceiling")
            lines.append(f"- ⚠ {name} ({arm.get('role', '–')}): every seed {arm['flag']} ({_fmt(bound)}): "
                         "its comparisons say little about mixing.")
    if report.get("fixed_split"):
        lines.append("- The split is fixed for this dataset and the seeds vary initialisation and batch order, so the "
                     "inference is conditional on this dataset (another sample of data could rank the models "
                     "differently).")
    return lines + ([""] if lines else [])


def _sweep_lines(report: dict, arms: dict) -> list[str]:
    sweep = report["idea"]["sweep"]
    if not sweep:
        return ["", "## Learning rate", "", f"One rate, {report['budget']['lrs'][0]:g}, for every model: no sweep."]
    seeds = (report.get("seeds") or {}).get("sweep", "–")
    lines = ["", f"## Learning-rate sweep (validation metric, mean over the sweep seeds {seeds})", "",
             "| model | " + " | ".join(f"lr {_fmt(e['cfg']['lr'])}" for e in sweep) + " |",
             "|---|" + "---|" * len(sweep)]
    for name, arm in arms.items():
        cells = [_fmt(e["mean"]) if e["eligible"] else "/".join(e["statuses"]) for e in arm["sweep"]]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def _section(title: str, render, *args) -> list[str]:
    """A report section's lines, or, when rendering it fails, the section as "–" with its error."""
    try:
        return render(*args)
    except Exception as error:
        return ["", f"## {title}", "", f"– (this section could not be rendered: {type(error).__name__}: {error})"]


def _mde_words(c: dict) -> str:
    """The primary comparison's MDE in words: the sign-flip test's, estimated from the observed spread."""
    if c.get("mde") is None:
        return (f"no effect is detectable with {c['n_pairs']} pairs: the sign-flip test's smallest p, "
                f"2/2^{c['n_pairs']}, is not below α = {c['alpha']:g} (MDE unreachable)")
    return (f"the sign-flip test's minimum detectable effect at 80% power, estimated from the observed spread, is "
            f"{_fmt(c['mde'])} ({_fmt(c['mde_rel_pct'], 3)}% of baseline)")


def _markdown_sections(report: dict) -> list[str]:
    return (_section("Mechanism", _mechanism_lines, report)
            + _section("Parity", _parity_lines, report.get("parity"))
            + _section("Scaling", _scaling_lines, report.get("scaling"))
            + _section("Failed or diverged runs", _failure_lines, report)
            + _section("Data and code", _identity_lines, report)
            + _section("Timings", _timing_lines, report["timings"]))


def _identity_lines(report: dict) -> list[str]:
    data, code = report.get("data"), report.get("code") or {}
    lines = ["", "## Data and code", ""]
    if data:
        source = (f"source `{data['source']}` (sha256 {data['source_hash']}), " if data.get("source") else
                  "generated data, ")
        sizes = data["sizes"]
        lines.append(f"Data: {source}plugin {data['plugin']} {data['plugin_version']}; fingerprint {data['hash']} "
                     f"(tensors {data['tensors']} at seed {data['seed']}, grid {data['grid']}); splits train "
                     f"{sizes['train']} / val {sizes['val']} / test {sizes['test']} samples.")
    else:
        lines.append("Data: – (this ledger predates data fingerprints)")
    lines.append("Code: " + ", ".join(f"{k} {v}" for k, v in code.items() if v) + ".")
    lines += [f"- ⚠ {error}" for error in report.get("plot_errors", [])]
    return lines


MECHANISM_QUESTIONS = {  # mechanism comparison -> (what it asks, the effect's name when a is better)
    "ablation": ("does the concentration constraint (the eigenvalue cap) help?", "the cap helps"),
    "idea_vs_control": ("does the idea's token mixing help over no mixing?", "the idea's mixing helps"),
    "baseline_vs_control": ("does the baseline's mixing help over no mixing (is mixing needed here)?",
                            "mixing helps the baseline"),
}


def _mechanism_lines(report: dict) -> list[str]:
    lines = ["", "## Mechanism", ""]
    comparisons = report.get("mechanism") or {}
    if not comparisons:
        lines += ["No ablation or no-mixing control in this study (add them with --models); the constraint and "
                  "the need for mixing are untested.", ""]
    for name, comp in comparisons.items():
        question, effect = MECHANISM_QUESTIONS[name]
        if "delta_mean" not in comp:
            lines.append(f"- {question} {comp['a']} vs {comp['b']}: {comp['verdict']} ({comp['reason']})")
            continue
        answer = comp["verdict"]
        if comp["verdict"] == VERDICT_BETTER:
            answer = f"yes, {effect} (significant)"
        elif comp["verdict"] == VERDICT_WORSE:
            answer = f"no, the opposite (significant: {comp['b']} is better)"
        lines.append(f"- {question} {comp['a']} − {comp['b']}: Δ = {_fmt(comp['delta_mean'])} (95% t-interval "
                     f"{_fmt(comp['ci_low'])} … {_fmt(comp['ci_high'])}), {comp['a']} better on {comp['idea_wins']}/"
                     f"{comp['n_pairs']} seeds, p = {_fmt(comp['p_value'])} ({comp['p_method']}; Holm over "
                     f"{comp['holm_over']}: {_fmt(comp['p_holm'])}) → **{answer}**.")
    mech = report.get("mechanism_signature")
    if mech and "error" in mech:
        return lines + ["", f"Parametrisation check: – (failed: {mech['error']})"]
    if mech:
        lines += ["", f"Parametrisation check (every seed's trained idea model; a check that the code keeps the "
                  f"certificate, not evidence that the idea works): **{'passed' if mech['confirmed'] else 'FAILED'}**"
                  f" — largest factor singular value {_fmt(mech['observed_max_factor_singular'])} vs bound "
                  f"{_fmt(mech['predicted_factor_bound'])}; certified ‖M‖₂ (grid tokens) ≤ "
                  f"{_fmt(mech.get('certified_operator_bound'))}; whole token map incl. prefix tokens ‖T‖₂ ≤ "
                  f"{_fmt(mech.get('certified_token_map_bound'))}; probe ‖Mv‖/‖v‖ "
                  f"{_fmt(mech['probe_norm_ratio_after_mixing'])}; residual block Lipschitz estimate "
                  f"{_fmt(mech.get('residual_block_lipschitz'))} (power iteration; the block has no certificate)."]
    return lines


def _failure_lines(report: dict) -> list[str]:
    if not report["failures"]:
        return []
    return (["", "## Failed or diverged runs", "", "| model | lr | seed | status | error |", "|---|---|---|---|---|"]
            + [f"| {f['model']} | {_fmt(f['lr'])} | {f['seed']} | {f['status']} | {f['error']} |"
               for f in report["failures"]])


def _timing_lines(timings: dict) -> list[str]:
    lines = ["", "## Timings", "", f"{timings['method']}; threads {timings['threads']}.", "",
              "| model | runs | total s | median run s |", "|---|---|---|---|"]
    lines += [f"| {m} | {t['runs']} | {t['total_s']:.1f} | {t['median_run_s']:.2f} |"
              for m, t in timings["per_model"].items()]
    return lines


def _parity_lines(parity: dict | None) -> list[str]:
    if not parity:
        return []
    if "error" in parity:
        return ["", "## Parity", "", f"Parity audit failed: {parity['error']}"]
    lines = ["", f"## Parity (idea / model, grid {parity['grid']}, batch {parity['batch']}; FLOPs of forward+backward "
             "by FlopCounterMode)", "", "| model | role | parameters | GFLOPs | params ratio | FLOPs ratio |",
             "|---|---|---|---|---|---|"]
    for row in parity["rows"]:
        if row["skipped"]:
            lines.append(f"| {row['model']} | {row['role']} | – | – | – | {row['skipped']} |")
            continue
        lines.append(f"| {row['model']} | {row['role']} | {row['params']:,} | {row['flops'] / 1e9:.4g} | "
                     f"{row['params_ratio']:.3g} | {row['flops_ratio']:.3g} |")
    lines += [""] + [f"- ⚠ {warning}" for warning in parity["warnings"]]
    if parity.get("knobs"):
        lines.append(f"- width matched with {parity['knobs']}")
    return lines


def _scaling_lines(scaling: dict | None) -> list[str]:
    if not scaling:
        return []
    if "error" in scaling:
        return ["", "## Scaling", "", f"Scaling analysis failed: {scaling['error']}"]
    lines = ["", f"## Scaling (forward+backward at batch {scaling['batch']}, {scaling['threads']} thread(s), median "
             f"of {scaling['repeats']}; peak memory of a fresh subprocess per point, see docs/analysis.md)", "",
             "| model | grid | parameters | GFLOPs | time ms | peak MB | note |", "|---|---|---|---|---|---|---|"]
    for point in scaling["points"]:
        params = "–" if point["params"] is None else f"{point['params']:,}"  # None: the point failed
        lines.append(f"| {point['model']} | {point['grid']} | {params} | {_fmt(point['gflops'])} | "
                     f"{_fmt(point['time_ms'])} | {_fmt(point['peak_mb'])} | {point['skipped'] or ''} |")
    lines += ["", "| model | quantity | exponent vs N (all points) | R² | exponent (largest two grids) |",
              "|---|---|---|---|---|"]
    lines += [f"| {fit['model']} | {fit['quantity']} | {_fmt(fit['exponent'], 3)} | {_fmt(fit['r2'], 3)} | "
              f"{_fmt(fit['tail_exponent'], 3)} |" for fit in scaling["fits"]]
    return lines
