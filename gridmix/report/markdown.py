"""``report.md``: the study report as Markdown, verdict first, from the
:class:`~gridmix.report.types.Report` :func:`gridmix.report.build_report` makes.

The headline is the primary comparison (idea vs the matched baseline, alone at α), with the training
checks that fire on a significant verdict and how both arms fare against the best reference; caveats
follow (seeds too few for α, arms at chance or ceiling or predicting one constant, identical arms, a
dataset-conditional test), then the references, the training checks, the secondary comparisons, the
models, the sweep, the transfer to other grids (with ``--eval-grids``), the mechanism (ablation and
control; the parametrisation check), parity, scaling, failures, data and code, timings, the track's
generated examples (``examples.png``), plots and the method. A section that fails to render says so
in place; the rest stands. docs/analysis.md defines every figure.
"""

from __future__ import annotations

from gridmix.analysis.parity import PARITY_KWARGS_KEY, parameter_warning
from gridmix.analysis.scaling import MIN_FIT_POINTS, busy_words
from gridmix.analysis.verdicts import (
    CAP_REACHED,
    VERDICT_CAP_INACTIVE,
    VERDICT_IDENTICAL,
    negligible,
    significant,
)
from gridmix.core.grid import Grid
from gridmix.report.cost import cost_words
from gridmix.report.format import fmt, fmt_column, markdown_table
from gridmix.report.reference_lines import (
    interval,
    intervals,
    reference_headline,
    reference_lines,
    training_flags,
    training_lines,
)
from gridmix.report.types import Comparison, Report, TransferArm

EXAMPLES = "examples.png"  # the track's generated samples (Track.draw_examples), beside report.md


def render_markdown(report: Report, *, figures: list[str] = ()) -> str:
    """The report as Markdown; ``figures`` the names of the PNGs beside it (:data:`EXAMPLES` under
    "Generated examples", the plots under "Plots")."""
    baseline = report.baseline
    lines = [
        f"# gridmix: {report.idea} vs {baseline.name if baseline else '–'} on {report.track} "
        f"{report.grid}",
        "",
    ]
    c = report.comparison
    if c is not None and c.result is not None:
        r = c.result
        lines += [
            f"**Verdict: {c.verdict}** — primary comparison, idea vs the matched baseline {c.b}, "
            f"α = {r.alpha:g} unadjusted. {report.metric} ({report.metric_direction}): idea "
            f"{fmt(r.idea_mean)} vs baseline {fmt(r.baseline_mean)}, Δ = {fmt(r.delta_mean)} "
            f"({intervals(r)}), idea wins {r.idea_wins}/{r.n_pairs} seeds, sign-flip p = "
            f"{fmt(r.p_value)} "
            f"({r.p_method}); {_mde_words(c)}.{_negligible_words(c)}{_training_words(report, c)}"
            f"{_beaten_words(report)}"
        ]
    else:
        lines += [
            f"**Verdict: {report.verdict}** — "
            f"{c.reason if c else 'no baseline'}{_beaten_words(report)}"
        ]
    cost = cost_words(report)
    if cost:
        lines += ["", f"**Cost:** {cost}."]
    headline = reference_headline(report)
    lines += ["", headline, ""] if headline else [""]
    lines += _caveat_lines(report)
    lines += reference_lines(report)
    lines += training_lines(report)
    secondary = {
        name: comp for name, comp in report.comparisons.items() if comp.family == "secondary"
    }
    if secondary:
        lines += (
            [
                "## Secondary comparisons (idea − each other baseline, Holm-adjusted over these "
                f"{len(secondary)})",
                "",
            ]
            + _comparison_table(secondary, "baseline")
            + [""]
        )
    lines += [
        "## Models (test metric over the comparison seeds, at each model's chosen learning rate)",
        "",
        "| model | role | chosen lr | mean | std (ddof=0) | n | per seed | flag |",
        "|---|---|---|---|---|---|---|---|",
    ]
    arms = list(report.arms.values())
    # one column's decimals
    values = fmt_column([arm.mean for arm in arms] + [v for arm in arms for v in arm.per_seed])
    means, per_seed = values[: len(arms)], iter(values[len(arms) :])
    for arm, mean, std in zip(arms, means, fmt_column([arm.std for arm in arms])):
        seeds = ", ".join(next(per_seed) for _ in arm.per_seed)
        flags = [arm.flag] if arm.flag else []
        if arm.constant_seeds:
            flags.append(f"one constant prediction on {_seeds(arm.constant_seeds)}")
        lines.append(
            f"| {arm.name} | {arm.role} | {fmt(arm.lr)} | {mean} | {std} | {arm.n} | {seeds} | "
            f"{'; '.join(flags)} |"
        )
    lines += _sweep_lines(report)
    lines += _markdown_sections(report)
    if EXAMPLES in figures:
        lines += [
            "",
            "## Generated examples",
            "",
            "A few samples the track generates at this study's settings, on its grid.",
            "",
            f"![generated examples]({EXAMPLES})",
        ]
    plots = [name for name in figures if name != EXAMPLES]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{name}]({name})" for name in plots]
    lines += [
        "",
        "## Method",
        "",
        f"Budget `{report.budget['name']}`{_overrides_words(report.budget)}: {report.n_seeds} "
        f"paired comparison seeds {list(report.comparison_seeds)}; {_rate_words(report)}; "
        f"{_epoch_words(report.budget)}; batch {report.budget['batch_size']}, "
        f"{fmt(report.budget['n_train'])} training samples. Paired differences per seed; two-sided "
        "sign-flip permutation test (exact up to 20 pairs, else Monte Carlo); 95% interval by "
        "inverting that test (the shifts it does not reject, so it excludes 0 exactly when p < α; "
        "unadjusted beside a Holm-adjusted p), with the Student t-interval beside it; MDE of the "
        "sign-flip test at 80% power, simulated at the observed spread of the differences; a "
        f"significant effect smaller than {_min_effect_words(report)} is called negligible. The "
        "primary comparison (idea vs matched baseline) is tested alone at α, as is each mechanism "
        "question (ablation, control) and each model against the best reference; other baselines "
        "are Holm-adjusted among themselves (docs/analysis.md). References: "
        f"{(report.references or {}).get('method', '–')}. Device {report.device} "
        f"({report.precision}), {report.threads} thread(s).{_compile_words(report)} Versions: "
        + ", ".join(f"{k} {v}" for k, v in report.versions.items())
        + ".",
        "",
    ]
    return "\n".join(lines)


def _compile_words(report: Report) -> str:
    """`` Models compiled with torch.compile (inductor); trained eager where that failed: vit (2 of
    8 runs: Error: ...).`` with ``--compile``, else nothing."""
    if report.compiled is None:
        return ""
    failed = "; ".join(
        f"{name} ({model['runs']} of {model['of']} runs: {model['error']})"
        for name, model in report.compiled["eager_fallback"].items()
    )
    return f" Models compiled with torch.compile ({report.compiled['backend']})" + (
        f"; trained eager where that failed: {failed}." if failed else "."
    )


def _overrides_words(budget: dict) -> str:
    """`` (changed on the command line: epochs 5, n_train 256)`` when ``gridmix run`` changed the
    budget."""
    changed = budget.get("overrides") or {}
    if not changed:
        return ""
    words = ", ".join(
        f"{name} {', '.join(f'{v:g}' for v in value) if isinstance(value, list | tuple) else value}"
        for name, value in changed.items()
    )
    return f" (changed on the command line: {words})"


def _rate_words(report: Report) -> str:
    if not report.sweep_seeds:
        return f"one learning rate, {report.budget['lrs'][0]:g}, for every model (no sweep)"
    return (
        f"learning rates {report.budget['lrs']} chosen on the validation metric over the sweep "
        f"seeds {list(report.sweep_seeds)}, which never enter a comparison"
    )


def _epoch_words(budget: dict) -> str:
    """``8 epochs``, or with early stopping ``up to 60 epochs, stopping after 5 without a better
    validation metric (the best epoch's weights are tested)``."""
    if not budget.get("patience"):
        return f"{budget['epochs']} epochs"
    return (
        f"up to {budget['epochs']} epochs, stopping after {budget['patience']} without a better "
        "validation metric"
    )


def _comparison_table(comparisons: dict[str, Comparison], label: str) -> list[str]:
    lines = [
        f"| {label} | n | Δ mean (idea − {label}) | 95% CI (sign-flip, unadjusted) | wins | p "
        "(sign-flip) | p (Holm) | MDE (80%, sign-flip) | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, comp in comparisons.items():
        r = comp.result
        if r is not None:
            lines.append(
                f"| {name} | {r.n_pairs} | {fmt(r.delta_mean)} | {interval(r)} | "
                f"{r.idea_wins} | {fmt(r.p_value)} ({r.p_method}) | {fmt(r.p_holm)} | "
                f"{'unreachable' if r.mde is None else fmt(r.mde)} | {comp.verdict} |"
            )
        else:
            lines.append(f"| {name} | – | – | – | – | – | – | – | {comp.verdict}: {comp.reason} |")
    return lines


def _caveat_lines(report: Report) -> list[str]:
    """What limits the headline: seeds too few for α, arms at the floor or ceiling, a
    dataset-conditional test."""
    lines = []
    power, primary, secondary = report.power, report.power.primary, report.power.secondary
    if not primary.reachable:
        lines.append(
            f"- ⚠ With {power.n_seeds} seeds the primary comparison cannot reach α = "
            f"{power.alpha:g}: the exact sign-flip test's smallest p is {fmt(primary.min_p)}; it "
            f"needs {primary.seeds_needed} seeds."
        )
    if secondary and not secondary.reachable:
        lines.append(
            f"- ⚠ The {secondary.comparisons} secondary comparisons (Holm) cannot reach α: their "
            "smallest "
            f"adjusted p is {fmt(secondary.min_p_holm)}; they need {secondary.seeds_needed} seeds."
        )
    for name, arm in report.arms.items():
        # what a model without token mixing should do here
        if arm.role == "control" and arm.flag == "at chance":
            constant = (
                f"; on {_seeds(arm.constant_seeds)} it predicted one constant"
                if arm.constant_seeds
                else ""
            )
            lines.append(
                f"- {name} (control) is at chance on every seed ({fmt(report.chance)}), as a model "
                f"without token mixing is expected to be on a task that needs mixing{constant}."
            )
            continue
        if arm.flag:
            bound = report.chance if arm.flag == "at chance" else report.ceiling
            lines.append(
                f"- ⚠ {name} ({arm.role}): every seed {arm.flag} ({fmt(bound)}): "
                "its comparisons say little about mixing."
            )
        if arm.constant_seeds:
            lines.append(
                f"- ⚠ {name} ({arm.role}) predicted one constant (the same class or value for "
                f"every test sample) on {_seeds(arm.constant_seeds)}: there it ignored its inputs."
            )
    for comp in [*report.comparisons.values(), *report.mechanism.values()]:
        if comp.verdict == VERDICT_IDENTICAL:
            lines.append(
                f"- ⚠ {comp.a} and {comp.b} are identical on every seed (Δ = 0): the comparison "
                "says nothing."
            )
    if report.fixed_split:
        lines.append(
            "- The split is fixed for this dataset and the seeds vary initialisation and batch "
            "order, so the inference is conditional on this dataset (another sample of data could "
            "rank the models differently)."
        )
    return lines + ([""] if lines else [])


def _sweep_lines(report: Report) -> list[str]:
    sweep = report.idea_arm.sweep
    if not sweep:
        return [
            "",
            "## Learning rate",
            "",
            f"One rate, {report.budget['lrs'][0]:g}, for every model: no sweep.",
        ]
    lines = [
        "",
        "## Learning-rate sweep (validation metric, mean over the sweep seeds "
        f"{list(report.sweep_seeds)})",
        "",
        "| model | " + " | ".join(f"lr {fmt(point.lr)}" for point in sweep) + " |",
        "|---|" + "---|" * len(sweep),
    ]
    for name, arm in report.arms.items():
        cells = [
            fmt(point.mean) if point.eligible else "/".join(point.statuses) for point in arm.sweep
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def _section(title: str, render, *args) -> list[str]:
    """A report section's lines, or, when rendering it fails, the section as "–" with its error."""
    try:
        return render(*args)
    except Exception as error:
        return [
            "",
            f"## {title}",
            "",
            f"– (this section could not be rendered: {type(error).__name__}: {error})",
        ]


def _analysis(title: str, what: str, render, analysis: dict | None, *args) -> list[str]:
    """An analysis's section: nothing without it, ``{what} failed: …`` under ``title`` when it
    failed, else ``render(analysis, *args)`` as a :func:`_section`."""
    if not analysis:
        return []
    if "error" in analysis:
        return ["", f"## {title}", "", f"{what} failed: {analysis['error']}"]
    return _section(title, render, analysis, *args)


def _seeds(seeds) -> str:
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds))


def _negligible_words(comparison: Comparison) -> str:
    r = comparison.result
    if not negligible(comparison.verdict) or r.min_effect is None:
        return ""
    return (
        f" The effect |Δ| = {fmt(abs(r.delta_mean))} is below the practical threshold "
        f"{fmt(r.min_effect)} (`--min-effect`): significant but negligible."
    )


def _training_words(report: Report, comparison: Comparison) -> str:
    """On a significant primary verdict, the training checks that fire for its two arms."""
    flags = training_flags(report, [comparison.a, comparison.b])
    if not significant(comparison.verdict) or not flags:
        return ""
    return " ⚠ This verdict was reached while training checks fire: " + "; ".join(flags) + "."


def _beaten_words(report: Report) -> str:
    """The arms of the secondary and mechanism comparisons that significantly beat the idea (and a
    control that beats the matched baseline), each with its Δ and p: what a reviewer looks for
    first, in the headline."""
    beaten = []
    for comp in [*report.comparisons.values(), *report.mechanism.values()]:
        if comp.family == "primary" or comp.result is None or comp.a_better is not False:
            continue
        r = comp.result
        p = (
            f"p = {fmt(r.p_value)}, alone at α"
            if comp.holm_over == 1
            else f"Holm-adjusted p = {fmt(r.p_holm)} over {comp.holm_over}"
        )
        who = "the idea" if comp.a == report.idea else f"the {report.arms[comp.a].role} {comp.a}"
        beaten.append(
            f"{comp.b} ({report.arms[comp.b].role}) beats {who} (Δ = {comp.a} − {comp.b} = "
            f"{fmt(r.delta_mean)}, {comp.a} better on {r.idea_wins}/{r.n_pairs} seeds, {p})"
        )
    if not beaten:
        return ""
    return " **⚠ Significantly better than the idea or its baseline: " + "; ".join(beaten) + ".**"


def _min_effect_words(report: Report) -> str:
    spelled = report.min_effect
    return (
        f"{spelled} of the compared arm's mean"
        if spelled.endswith("%")
        else f"{spelled} (the metric's units)"
    )


def _mde_words(comparison: Comparison) -> str:
    """The primary comparison's MDE in words: the sign-flip test's, estimated from the observed
    spread."""
    r = comparison.result
    if r.mde is None:
        return (
            f"no effect is detectable with {r.n_pairs} pairs: the sign-flip test's smallest p, "
            f"2/2^{r.n_pairs}, is not below α = {r.alpha:g} (MDE unreachable)"
        )
    return (
        "the sign-flip test's minimum detectable effect at 80% power, estimated from the observed "
        f"spread, is {fmt(r.mde)} ({fmt(r.mde_rel_pct)}% of baseline)"
    )


def _markdown_sections(report: Report) -> list[str]:
    return (
        _section("Transfer to other grids", _transfer_lines, report)
        + _section("Mechanism", _mechanism_lines, report)
        + _analysis("Parity", "Parity audit", _parity_lines, report.analyses.get("parity"), report)
        + _analysis("Scaling", "Scaling analysis", _scaling_lines, report.analyses.get("scaling"))
        + _section("Failed or diverged runs", _failure_lines, report)
        + _section("Causality check", _causality_lines, report.causality)
        + _section("Data and code", _identity_lines, report)
        + _section("Timings", _timing_lines, report.timings)
    )


def _transfer_lines(report: Report) -> list[str]:
    """Every model tested on the other grids: a table of means, then per grid the seeds and the
    comparison."""
    transfer = report.transfer
    if transfer is None:
        return []
    trained = transfer.trained_grid
    lines = [
        "",
        f"## Transfer to other grids (secondary: the headline is trained and tested on {trained})",
        "",
        f"Each model's final runs, trained on {trained} (every comparison seed at its chosen "
        "learning rate), tested on the test split the track makes on each grid with the same seed "
        "and sizes, after moving the model there: its token mixers by their declared resolution "
        "change (`regrid`), its learned positions "
        'resampled, nothing retrained (docs/analysis.md, "Transfer"). Each grid\'s comparison of '
        f"the idea with the matched baseline is tested alone at α = {report.power.alpha:g}; none "
        "changes the verdict above.",
        "",
        "| model | "
        f"{' | '.join(f'{g} (trained)' if g == trained else g for g in transfer_order(report))} |",
        "|---|" + "---|" * (len(transfer.grids) + 1),
    ]
    points = {point.grid: point for point in transfer.grids}
    for name, arm in report.arms.items():
        cells = [
            f"{fmt(arm.mean)} ± {fmt(arm.std)} (n={arm.n})"
            if grid == trained
            else _transfer_cell(points[grid].arms[name])
            for grid in transfer_order(report)
        ]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    for point in transfer.grids:
        lines += [
            "",
            f"### {point.grid}",
            "",
            "| model | n | mean | std (ddof=0) | per seed | moved by / why not |",
            "|---|---|---|---|---|---|",
        ]
        for name, arm in point.arms.items():
            how = "; ".join(([arm.adapted] if arm.adapted else []) + list(arm.reasons))
            lines.append(
                f"| {name} | {len(arm.per_seed)} | {fmt(arm.mean)} | {fmt(arm.std)} | "
                f"{', '.join(fmt(v) for v in arm.per_seed)} | {how} |"
            )
        lines += ["", _transfer_verdict(point.comparison, point.grid)]
    return lines


def transfer_order(report: Report) -> list[str]:
    """The trained grid and the evaluation grids, by token count (then as asked)."""
    grids = [report.transfer.trained_grid] + [point.grid for point in report.transfer.grids]
    return sorted(grids, key=lambda grid: Grid.parse(grid).numel)


def _transfer_cell(arm: TransferArm) -> str:
    if arm.per_seed:
        missing = len(arm.statuses) - len(arm.per_seed)
        return f"{fmt(arm.mean)} ± {fmt(arm.std)} (n={len(arm.per_seed)}" + (
            f", {missing} not run)" if missing else ")"
        )
    return (
        "cannot run" if "cannot" in arm.statuses else "failed" if "failed" in arm.statuses else "–"
    )


def _transfer_verdict(comparison: Comparison | None, grid: str) -> str:
    if comparison is None:
        return f"At {grid}: no baseline to compare with."
    if comparison.result is None:
        return (
            f"At {grid}, {comparison.a} vs {comparison.b}: **{comparison.verdict}** "
            f"({comparison.reason})."
        )
    r = comparison.result
    mde = "unreachable" if r.mde is None else fmt(r.mde)
    return (
        f"At {grid}, {comparison.a} − {comparison.b} (secondary, alone at α = {r.alpha:g}): Δ = "
        f"{fmt(r.delta_mean)} ({intervals(r)}), idea better on {r.idea_wins}/{r.n_pairs} seeds, "
        f"sign-flip p = {fmt(r.p_value)} ({r.p_method}), MDE (80%) {mde} → "
        f"**{comparison.verdict}**."
    )


def _causality_lines(causality: dict | None) -> list[str]:
    """What the leak check before training checked, on which grid, with how many probes, and its
    result."""
    if not causality:
        return []
    lines = [
        "",
        "## Causality check",
        "",
        "Before training, each mixer and model below was checked for a dependence on later inputs "
        f"along the causal axes {tuple(causality['axes'])} (threshold probes, docs/mixers.md); a "
        "leak refuses the study.",
        "",
        "| checked | grid | probes | result |",
        "|---|---|---|---|",
    ]
    for kind in ("mixers", "models"):
        lines += [
            f"| {kind[:-1]} {name} | {entry['grid']} | {entry['probes']} | {entry['result']} |"
            for name, entry in causality.get(kind, {}).items()
        ]
    return lines


def _identity_lines(report: Report) -> list[str]:
    data, code = report.data, report.code or {}
    lines = ["", "## Data and code", ""]
    if data:
        source = (
            f"source `{data['source']}` (sha256 {data['source_hash']}), "
            if data.get("source")
            else "generated data, "
        )
        sizes = data["sizes"]
        lines.append(
            f"Data: {source}plugin {data['plugin']} {data['plugin_version']}; fingerprint "
            f"{data['hash']} (tensors {data['tensors']} at seed {data['seed']}, grid "
            f"{data['grid']}); splits train {sizes['train']} / val {sizes['val']} / test "
            f"{sizes['test']} samples."
        )
        # the track's own words: for sequence-csv the target column and input channels
        if data.get("description"):
            lines.append(f"Task: {data['description']}.")
    else:
        lines.append("Data: – (this ledger predates data fingerprints)")
    lines.append("Code: " + ", ".join(f"{k} {v}" for k, v in code.items() if v) + ".")
    lines += [f"- ⚠ {error}" for error in report.plot_errors]
    return lines


# mechanism comparison -> (what it asks, the effect's name when a is better)
MECHANISM_QUESTIONS = {
    "ablation": ("does the concentration constraint (the eigenvalue cap) help?", "the cap helps"),
    "idea_vs_control": (
        "does the idea's token mixing help over no mixing?",
        "the idea's mixing helps",
    ),
    "baseline_vs_control": (
        "does the baseline's mixing help over no mixing (is mixing needed here)?",
        "mixing helps the baseline",
    ),
}


def _mechanism_lines(report: Report) -> list[str]:
    lines = ["", "## Mechanism", ""]
    comparisons = report.mechanism
    if not comparisons:
        lines += [
            "No ablation or no-mixing control in this study (add them with --models); the "
            "constraint and the need for mixing are untested.",
            "",
        ]
    lines += [f"- Not asked: {note}." for note in report.notes]
    for name, comp in comparisons.items():
        question, effect = MECHANISM_QUESTIONS[name]
        r = comp.result
        if r is None:
            lines.append(f"- {question} {comp.a} vs {comp.b}: {comp.verdict} ({comp.reason})")
            continue
        if comp.verdict == VERDICT_CAP_INACTIVE:
            signature = report.mechanism_signature
            lines.append(
                f"- {question} **The cap was inactive**: the largest eigenvalue (factor singular "
                "value) of the idea's trained models is "
                f"{fmt(signature['observed_max_factor_singular'])} < "
                f"{fmt(signature['predicted_factor_bound'])} on every seed (reached would be at "
                f"least {CAP_REACHED:.0%} of it), so the ablation cannot test it: {comp.a} and "
                f"{comp.b} differ by Δ = {fmt(r.delta_mean)} on average, which says nothing about "
                "the cap."
            )
            continue
        answer = {
            True: f"yes, {effect} (significant)",
            False: f"no, the opposite (significant: {comp.b} is better)",
            None: comp.verdict,
        }[comp.a_better]
        lines.append(
            f"- {question} {comp.a} − {comp.b}: Δ = {fmt(r.delta_mean)} ({intervals(r)}), {comp.a} "
            f"better on {r.idea_wins}/{r.n_pairs} seeds, p = {fmt(r.p_value)} ({r.p_method}, alone "
            f"at α) → **{answer}**."
        )
    mech = report.mechanism_signature
    if mech and "error" in mech:
        return lines + ["", f"Parametrisation check: – (failed: {mech['error']})"]
    if mech:
        lines += [
            "",
            "Parametrisation check (every seed's trained idea model; a check that the code keeps "
            f"the certificate, not evidence that the idea works): {_certificate_words(mech)}; "
            "largest factor singular value over every layer, axis, head and seed "
            f"{fmt(mech['observed_max_factor_singular'])} (predicted bound "
            f"{fmt(mech['predicted_factor_bound'])}); certified ‖M‖₂ (grid tokens) ≤ "
            f"{fmt(mech.get('certified_operator_bound'))}; whole token map incl. prefix tokens "
            f"‖T‖₂ ≤ {fmt(mech.get('certified_token_map_bound'))}; probe ‖Mv‖/‖v‖ "
            f"{fmt(mech['probe_norm_ratio_after_mixing'])}; residual block Lipschitz estimate "
            f"{fmt(mech.get('residual_block_lipschitz'))} (power iteration; the block has no "
            "certificate).",
        ]
    return lines


def _certificate_words(mech: dict) -> str:
    """The check's outcome, and the factor nearest its bound (the one over it when it failed): what
    was compared."""
    outcome = "**passed**" if mech["confirmed"] else "**FAILED**"
    worst = mech.get("worst_factor")
    if not worst:
        return outcome
    where = ", ".join(
        [f"layer {worst['layer'] or '(model)'}"]
        + ([f"axis {worst['axis']}"] if worst.get("axis") is not None else [])
        + [f"head {worst['head']}"]
        + ([f"seed {worst['seed']}"] if "seed" in worst else [])
    )
    compared = (
        f"its largest singular value {worst['largest']:.7g} vs its certified bound "
        f"{worst['bound']:.7g} "
        f"(the bound itself must be ≤ the predicted {fmt(mech['predicted_factor_bound'])})"
    )
    if mech["confirmed"]:
        over = (
            f"; the one most over, {where}: {compared}, over by {worst['excess']:.2g} relative, "
            f"within the float round-off slack {worst['rtol']:.2g}"
            if worst["excess"] > 0
            else ""
        )
        return (
            f"{outcome} — every factor's largest singular value is within its certified bound and "
            f"every bound within the predicted one{over}"
        )
    return (
        f"{outcome} — {where}: {compared}, over by {worst['excess']:.2g} relative, beyond the "
        f"float round-off slack {worst['rtol']:.2g}: the parametrisation is broken"
    )


def _failure_lines(report: Report) -> list[str]:
    if not report.failures:
        return []
    return [
        "",
        "## Failed or diverged runs",
        "",
        "| model | lr | seed | status | error |",
        "|---|---|---|---|---|",
    ] + [
        f"| {f.model} | {fmt(f.lr)} | {f.seed} | {f.status} | {f.error} |" for f in report.failures
    ]


def _timing_lines(timings: dict) -> list[str]:
    machines = timings.get("machines") or []
    lines = [
        "",
        "## Timings",
        "",
        f"{timings['method']}; threads {timings['threads']}"
        + (f"; measured on {'; and on '.join(machines)}" if machines else "")
        + ".",
        "",
        "| model | runs | total s | median run s | median step ms |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {m} | {t['runs']} | {fmt(t['total_s'])} | {fmt(t['median_run_s'])} | "
        f"{fmt(t.get('median_step_ms'))} |"
        for m, t in timings["per_model"].items()
    ]
    if "step_method" in timings:
        lines += ["", f"Step: {timings['step_method']}."]
    if "references_s" in timings:
        lines += [
            "",
            f"References: {timings['references_s']:.1f} s of wall-clock for every comparison "
            f"seed's data and fits, against {timings['total_s']:.1f} s of training runs.",
        ]
    return lines


def _parity_lines(parity: dict, report: Report) -> list[str]:
    """The parity table, the idea's ratios to its matched baseline in words, and the one warning
    there is: the matched baseline's parameter count off the idea's by more than the tolerance
    (re-derived from the rows, so a ledger measured before this rule reads by it too). FLOPs are
    never a warning: saving them is the idea's point."""
    lines = [
        "",
        f"## Parity (the idea over each model, grid {parity['grid']}, batch {parity['batch']}; "
        "FLOPs of forward+backward by FlopCounterMode)",
        "",
        "| model | role | parameters | GFLOPs | parameters, idea / model | FLOPs, idea / model |",
        "|---|---|---|---|---|---|",
    ]
    for row in parity["rows"]:
        if row["skipped"]:
            lines.append(f"| {row['model']} | {row['role']} | – | – | – | {row['skipped']} |")
            continue
        lines.append(
            f"| {row['model']} | {row['role']} | {fmt(row['params'])} | {fmt(row['flops'] / 1e9)} "
            f"| {fmt(row['params_ratio'])} | {fmt(row['flops_ratio'])} |"
        )
    matched = parity.get("matched_baseline") or report.primary_baseline
    row = next((r for r in parity["rows"] if r["model"] == matched and not r["skipped"]), None)
    lines.append("")
    if row is not None:
        tolerance = parity.get("tolerance", 0.1)
        lines.append(
            f"- {report.idea} has {fmt(row['params_ratio'])} times the parameters and "
            f"{fmt(row['flops_ratio'])} times the FLOPs of its matched baseline {matched}."
        )
        if abs(row["params_ratio"] - 1) > tolerance:
            lines.append(
                f"- ⚠ {parameter_warning(report.idea, matched, row['params_ratio'], tolerance)}."
            )
    if parity.get(PARITY_KWARGS_KEY):
        lines.append(f"- width matched with {parity[PARITY_KWARGS_KEY]}")
    return lines


def _scaling_lines(scaling: dict) -> list[str]:
    lines = [
        "",
        f"## Scaling (forward+backward at batch {scaling['batch']}, {scaling['threads']} "
        f"thread(s), median of {scaling['repeats']} timed steps after a warm-up that lasts until "
        "two steps agree, the spread their 25th–75th percentiles; peak memory of a fresh process "
        "per point, see docs/analysis.md)",
        "",
    ]
    busy = busy_words(scaling)
    if busy:
        lines += [f"⚠ {busy[0].upper()}{busy[1:]}.", ""]
    excluded = scaling.get("excluded_grids") or {}
    if excluded:
        lines += [
            "Not measured, the track does not run them: "
            + "; ".join(f"{grid} ({why})" for grid, why in excluded.items())
            + ".",
            "",
        ]
    lines += markdown_table(
        ["model", "grid", "parameters", "GFLOPs", "time ms (25th–75th)", "peak MB", "note"],
        [
            [
                point["model"],
                point["grid"],
                "–" if point["params"] is None else f"{point['params']:,}",  # None: it failed
                _sig(point["gflops"]),
                _time_cell(point),
                _sig(point["peak_mb"]),
                point["skipped"] or "",
            ]
            for point in scaling["points"]
        ],
    )
    lines += [
        "",
        f"Exponents vs N (y ∝ N^a, least squares in log-log) only from {MIN_FIT_POINTS} grids or "
        "more, with the slope's 95% t-interval; the tail fit only where more grids were "
        "measured than it takes.",
        "",
    ]
    lines += markdown_table(
        ["model", "quantity", "grids", "exponent (95% interval)", "R²", "exponent (largest grids)"],
        [
            [
                fit["model"],
                fit["quantity"],
                str(fit.get("points", "–")),
                _exponent(fit),
                _sig(fit["r2"]) if _fitted(fit) else "–",
                _sig(fit["tail_exponent"]) if _fitted(fit) else "–",
            ]
            for fit in scaling["fits"]
        ],
    )
    return lines


def _sig(value: float | None) -> str:
    """A measured figure to three significant digits (timings vary more than a fourth shows)."""
    return fmt(value, 3)


def _time_cell(point: dict) -> str:
    """``11.7 (11.2–12.1)``: the median step and its quartiles in ms; the median alone where a
    ledger kept no quartiles."""
    timing = point.get("timing")
    if point["time_ms"] is None or not timing:
        return _sig(point["time_ms"])
    return f"{_sig(point['time_ms'])} ({_sig(timing['p25_s'] * 1e3)}–{_sig(timing['p75_s'] * 1e3)})"


def _fitted(fit: dict) -> bool:
    """Whether the fit rests on enough grids to be shown (a ledger written before the rule may hold
    fits through two)."""
    return fit.get("points", 0) >= MIN_FIT_POINTS and fit["exponent"] is not None


def _exponent(fit: dict) -> str:
    if not _fitted(fit):
        return "–"
    low, high = fit.get("exponent_low"), fit.get("exponent_high")
    interval = f" ({_sig(low)} … {_sig(high)})" if low is not None and high is not None else ""
    return f"{_sig(fit['exponent'])}{interval}"
