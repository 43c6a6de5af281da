"""The sweep's report (``gridmix sweep``): every model's test metric against the swept values, the
primary comparison at every point, and where along a swept name the verdict changes; rebuilt from
the ledger alone.

:func:`build_sweep_report` reads the sweep's document (every point's study spec,
:mod:`gridmix.orchestrate.sweeping`) and the runs, and builds each point's full
:class:`~gridmix.report.types.Report` (:func:`gridmix.report.build.study_report`);
:class:`SweepReport` keeps them (:class:`PointReport`) with the :class:`Transition` s found along
each swept name. :func:`write_sweep_report` writes ``sweep_report.json``, ``sweep.md`` and
``sweep_points.png`` (:func:`gridmix.report.plots.plot_sweep_points`; ``sweep.png`` is a study's
learning-rate sweep).

Each point's comparison of the idea with its matched baseline is tested alone at α, as a plain
study's headline is; nothing is adjusted across points, and the report says so. A transition along a
swept name (others held fixed) is the smallest value from which on every point has one outcome (the
idea significantly better, or not significantly worse, …) where the point before it had another; a
point without a verdict (too few seeds, an arm at chance, a model that did not run) breaks every
transition through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gridmix.analysis.verdicts import VERDICT_NONE
from gridmix.core.grid import Grid
from gridmix.core.records import pick
from gridmix.report.build import study_report
from gridmix.report.format import fmt
from gridmix.report.reference_lines import interval
from gridmix.report.types import Comparison, Report
from gridmix.report.writing import write_with_plots
from gridmix.study.ledger import Ledger

OUTCOMES = (
    "better",
    "tie",
    "worse",
    "none",
)  # idea significantly better; no significant difference; worse; no verdict
# (what the idea does, the outcomes that hold from the value on, the outcomes the point before must
# have)
TRANSITIONS = (
    ("stops losing to", {"tie", "better"}, {"worse"}),
    ("starts beating", {"better"}, {"worse", "tie"}),
    ("starts losing to", {"worse"}, {"tie", "better"}),
    ("stops beating", {"tie", "worse"}, {"better"}),
)
WORDS = dict(
    better="idea better", tie="no significant difference", worse="idea worse", none="no verdict"
)


def outcome(comparison: Comparison | None) -> str:
    """A point's primary comparison as one of :data:`OUTCOMES`."""
    if comparison is None or comparison.result is None:
        return "none"
    if comparison.a_better is not None:
        return "better" if comparison.a_better else "worse"
    return "tie" if comparison.verdict == VERDICT_NONE else "none"


def order_key(name: str, value: object) -> tuple:
    """How the values of a swept name are ordered: grids by token count, numbers by size, text as
    written."""
    if name == "grid":
        return (0, Grid.parse(value).numel, str(value))
    return (0, value, "") if isinstance(value, (int, float)) else (1, 0, str(value))


@dataclass(frozen=True)
class SweepPoint:
    """A point of a sweep: the swept values there (``grid`` as text), planned or reported alike."""

    values: Mapping[str, object]

    @property
    def label(self) -> str:
        """The point named by its swept values, e.g. ``grid=8x8, depth=2``."""
        return ", ".join(f"{name}={value}" for name, value in self.values.items())


@dataclass(frozen=True)
class PointReport(SweepPoint):
    """One point: the swept values there and that study's report."""

    report: Report

    @property
    def outcome(self) -> str:
        return outcome(self.report.comparison)

    def to_dict(self) -> dict:
        report = self.report
        arms = {
            name: dict(
                pick(arm, "role", "lr", "mean", "std", "n"),
                per_seed=list(arm.per_seed),
                flag=arm.flag,
            )
            for name, arm in report.arms.items()
        }
        comparison = report.comparison
        return dict(
            values=dict(self.values),
            grid=report.grid,
            arms=arms,
            outcome=self.outcome,
            chance=report.chance,
            ceiling=report.ceiling,
            comparison=None if comparison is None else comparison.to_dict(),
            primary_reachable=report.power.primary.reachable,
            failures=[failure.to_dict() for failure in report.failures],
            data=report.data,
        )


@dataclass(frozen=True)
class Transition:
    """Along ``along`` (the other swept names held at ``fixed``), the idea ``kind``
    (:data:`TRANSITIONS`) the baseline at ``at``: the smallest value from which on every point's
    outcome is the new one."""

    along: str
    fixed: Mapping[str, object]
    kind: str
    at: object

    def __post_init__(self) -> None:
        if self.kind not in {kind for kind, _, _ in TRANSITIONS}:
            raise ValueError(
                f"transition {self.kind!r}; expected one of {[kind for kind, _, _ in TRANSITIONS]}"
            )

    def to_dict(self) -> dict:
        return dict(along=self.along, fixed=dict(self.fixed), kind=self.kind, at=self.at)


@dataclass(frozen=True)
class SweepReport:
    """The sweep: its track, what it swept (names and values in order), every point's report, the
    transitions."""

    track: str
    over: tuple[tuple[str, tuple], ...]
    points: tuple[PointReport, ...]
    transitions: tuple[Transition, ...]

    def __post_init__(self) -> None:
        if not self.points:
            raise ValueError(
                f"sweep of track {self.track!r} holds no points; expected at least one"
            )
        names = [name for name, _ in self.over]
        if any(list(point.values) != names for point in self.points):
            raise ValueError(f"sweep points name other values than the swept {names}")

    @property
    def first(self) -> Report:
        return self.points[0].report

    def lines(self, along: str) -> list[tuple[dict, list[PointReport]]]:
        """:func:`lines` of this sweep's points."""
        return lines(self.points, along)

    def to_dict(self) -> dict:
        first = self.first
        return dict(
            kind="gridmix-sweep",
            track=self.track,
            idea=first.idea,
            baseline=first.primary_baseline,
            metric=first.metric,
            metric_direction=first.metric_direction,
            budget=first.budget,
            over=[[name, list(values)] for name, values in self.over],
            points=[point.to_dict() for point in self.points],
            transitions=[transition.to_dict() for transition in self.transitions],
        )


def lines(points: tuple[PointReport, ...], along: str) -> list[tuple[dict, list[PointReport]]]:
    """The points along ``along`` for each combination of the other swept values (in the sweep's
    order), each line in order of ``along`` (:func:`order_key`)."""
    groups: dict[tuple, list[PointReport]] = {}
    for point in points:
        fixed = tuple((name, value) for name, value in point.values.items() if name != along)
        groups.setdefault(fixed, []).append(point)
    return [
        (dict(fixed), sorted(line, key=lambda p: order_key(along, p.values[along])))
        for fixed, line in groups.items()
    ]


def transitions(
    points: tuple[PointReport, ...], over: tuple[tuple[str, tuple], ...]
) -> tuple[Transition, ...]:
    """Every transition along every swept name (module docstring)."""
    found = []
    for along, _ in over:
        for fixed, line in lines(points, along):
            outcomes = [point.outcome for point in line]
            for kind, holds, before in TRANSITIONS:
                at = next(
                    (
                        i
                        for i in range(1, len(outcomes))
                        if outcomes[i - 1] in before and all(o in holds for o in outcomes[i:])
                    ),
                    None,
                )
                if at is not None:
                    found.append(
                        Transition(along=along, fixed=fixed, kind=kind, at=line[at].values[along])
                    )
    return tuple(found)


def build_sweep_report(ledger: Ledger) -> SweepReport:
    """The report of the ledger's sweep; ``ValueError`` when it holds none."""
    document = ledger.sweep()
    if document is None:
        raise ValueError(
            f"the ledger {str(ledger.path)!r} holds no sweep; run `gridmix sweep` first"
        )
    rows = {row.key: row for row in ledger.rows()}
    where = str(ledger.path)
    over = tuple((name, tuple(values)) for name, values in document["over"])
    points = tuple(
        PointReport(
            values={name: point["values"][name] for name, _ in over},  # stored with sorted keys
            report=study_report(point["study"], rows, where=where),
        )
        for point in document["points"]
    )
    return SweepReport(
        track=document["track"], over=over, points=points, transitions=transitions(points, over)
    )


def render_sweep_markdown(report: SweepReport, *, figures: list[str] = ()) -> str:
    """``sweep.md``: the transitions first, then every point's models and comparison, the seeds, the
    method."""
    first, names = report.first, [name for name, _ in report.over]
    baseline = first.primary_baseline or "–"
    lines = [
        f"# gridmix sweep: {first.idea} vs {baseline} on {report.track} over {', '.join(names)}",
        "",
        f"{first.metric} ({first.metric_direction}); at every point a study of its own, its "
        f"primary comparison (idea − {baseline}) tested alone at α = {first.power.alpha:g}.",
        "",
    ]
    lines += _verdict_lines(report)
    models = list(dict.fromkeys(name for point in report.points for name in point.report.arms))
    lines += [
        "",
        "## Every point (test metric, mean ± std (ddof=0) over the comparison seeds, n)",
        "",
        "| "
        + " | ".join(names + models)
        + " | Δ idea − baseline | 95% sign-flip interval | p (sign-flip) | MDE 80% | verdict |",
        "|" + "---|" * (len(names) + len(models) + 5),
    ]
    for point in report.points:
        cells = [str(point.values[name]) for name in names]
        for model in models:
            arm = point.report.arms.get(model)
            cells.append("–" if arm is None else f"{fmt(arm.mean)} ± {fmt(arm.std)} ({arm.n})")
        lines.append("| " + " | ".join(cells + _comparison_cells(point.report.comparison)) + " |")
    lines += [
        "",
        "## Per seed (test metric of each comparison seed that finished)",
        "",
        "| point | model | lr | per seed |",
        "|---|---|---|---|",
    ]
    for point in report.points:
        lines += [
            f"| {point.label} | {name} | {fmt(arm.lr)} | "
            f"{', '.join(fmt(v) for v in arm.per_seed)} |"
            for name, arm in point.report.arms.items()
        ]
    failures = [(point, failure) for point in report.points for failure in point.report.failures]
    if failures:
        lines += [
            "",
            "## Failed or diverged runs",
            "",
            "| point | model | lr | seed | status | error |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {point.label} | {f.model} | {fmt(f.lr)} | {f.seed} | {f.status} | {f.error} |"
            for point, f in failures
        ]
    if figures:
        lines += ["", "## Plots", ""] + [f"![{name}]({name})" for name in figures]
    budget = first.budget
    lines += [
        "",
        "## Method",
        "",
        f"Budget `{budget['name']}` at every point: {first.n_seeds} paired comparison seeds "
        f"{list(first.comparison_seeds)}, learning rates {budget['lrs']} chosen per point and "
        f"model on the validation metric of the sweep seeds {list(first.sweep_seeds)}, "
        f"{budget['epochs']} epochs. Each point is a study of its own, its runs stored in this "
        "directory's ledger under their run keys (a point run before, by `gridmix run` or an "
        "earlier sweep into this directory, is reused, not retrained). Every point's comparison "
        "is the exact sign-flip test alone at α, as a study's headline; nothing is adjusted "
        f"across the {len(report.points)} points: with no difference anywhere, each point still "
        f"comes out significant with probability up to α, so up to {len(report.points)} × α = "
        f"{fmt(len(report.points) * first.power.alpha)} false verdicts are expected across them. "
        "MDE: the sign-flip test's at 80% power, at the observed spread "
        '(docs/analysis.md, "Quality against scale").',
        "",
    ]
    return "\n".join(lines)


def _comparison_cells(comparison: Comparison | None) -> list[str]:
    if comparison is None:
        return ["–", "–", "–", "–", "no baseline"]
    r = comparison.result
    if r is None:
        return ["–", "–", "–", "–", f"{comparison.verdict} ({comparison.reason})"]
    mde = "unreachable" if r.mde is None else fmt(r.mde)
    return [
        fmt(r.delta_mean),
        interval(r),
        f"{fmt(r.p_value)} ({r.p_method})",
        mde,
        comparison.verdict,
    ]


def _verdict_lines(report: SweepReport) -> list[str]:
    """Per swept name and line: every point's outcome in order, then the transitions found there (or
    none)."""
    lines = ["## Where the verdict changes", ""]
    baseline = report.first.primary_baseline or "the baseline"
    for along, _ in report.over:
        for fixed, points in report.lines(along):
            where = f" ({', '.join(f'{k}={v}' for k, v in fixed.items())})" if fixed else ""
            sequence = ", ".join(
                f"{point.values[along]}: {WORDS[point.outcome]}" for point in points
            )
            found = [t for t in report.transitions if t.along == along and dict(t.fixed) == fixed]
            said = "; ".join(f"the idea {t.kind} {baseline} at {along}={t.at}" for t in found)
            lines.append(
                f"- Along {along}{where}: {sequence}. "
                + (f"**{said[0].upper() + said[1:]}.**" if said else "No transition.")
            )
    if all(point.outcome == "none" for point in report.points):
        lines.append(
            "- No point has a verdict (its seeds cannot reach α, an arm sits at chance or "
            "ceiling, or a model did not run), so no transition can be read off this sweep."
        )
    return lines


def write_sweep_report(report: SweepReport, out: str | Path) -> list[Path]:
    """Write ``sweep_report.json``, ``sweep.md`` and the plot into ``out``; return the paths."""
    from gridmix.report.plots import plot_sweep_points  # matplotlib only where a plot is drawn

    out = Path(out)
    return write_with_plots(
        (out / "sweep_report.json", out / "sweep.md"),
        report.to_dict(),
        lambda drawn: render_sweep_markdown(report, figures=[p.name for p in drawn.values()]),
        [("sweep", lambda: plot_sweep_points(report.to_dict(), out / "sweep_points.png"))],
    )
