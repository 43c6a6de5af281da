"""Every PNG gridmix draws (matplotlib, Agg backend): a study report's paired per-seed results,
learning-rate sweeps, training curves and transfer to other grids; a sweep over sizes; the scaling
study; the mixers' factor spectra.

* :func:`figure_paired`, :func:`figure_sweep`, :func:`figure_curves` and :func:`figure_transfer`
  (metric against the evaluation grid) read the :class:`~gridmix.report.types.Report` only, so
  ``gridmix report DIR`` redraws them;
  :func:`plot_report` saves every one the report has data for as ``paired.png``, ``sweep.png``,
  ``curves.png``, ``transfer.png`` (and ``scaling.png``, ``spectra.png``).
* :func:`plot_sweep_points` (:func:`figure_sweep_points`): a sweep's (``gridmix sweep``) metric
  against the swept values, per model, with each point's verdict.
* :func:`plot_scaling`: three log-log panels (wall-clock, FLOPs, peak memory of a forward+backward
  step against the token count N), one line per model, the tail exponent in the legend (fits of
  three grids or more) and N¹ / N² guides.
* :func:`plot_spectra`: one panel per mixer layer and axis with the singular values of the factor,
  every head (and every seed) a line, the predicted bound 1 dashed.

What every figure keeps to, so that none misleads at a glance:

* a colour is a role (:data:`ROLE_COLOURS`), the same in every report; every model has its own
  colour and line style (:func:`model_styles`), the same in every figure, and the lines are drawn
  widest first, so a model whose curve lies exactly on another's still shows
  as a rim around it;
* every seed has its own marker (:data:`SEED_MARKERS`);
* axes name the split their numbers come from (``cross-entropy (validation split)``); loss and
  metric axes are linear, with plain tick labels (no offset, no ``×10⁻¹``);
* a track's declared chance level and ceiling are drawn where a panel shows the metric (or named at
  its edge when they lie far outside the data); the naive references, measured on the test split,
  only on test panels;
* a paired panel states the mean difference with the 95% interval that inverts the sign-flip test
  (so it excludes 0 exactly when p < 0.05; "unbounded", as in the report, where too few seeds bound
  it) and the p; a seed whose difference is within :data:`TIE_FRACTION` of the seed spread is a tie
  (grey), neither better nor worse;
* legends sit outside the data; a panel without data says why in its place (:func:`note`).

Every ``figure_*`` function returns the figure unsaved (tests read its artists); the ``plot_*``
functions save and close it. The scaling and spectra plots accept the result objects or their
``to_dict()`` / JSON form, as stored in the report; the sweep's plot takes its report's JSON form.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    FixedFormatter,
    FixedLocator,
    FuncFormatter,
    LogLocator,
    MaxNLocator,
    NullFormatter,
    ScalarFormatter,
)

from gridmix.analysis.scaling import MIN_FIT_POINTS  # noqa: E402
from gridmix.analysis.verdicts import UNINFORMATIVE  # noqa: E402
from gridmix.core.files import replacing  # noqa: E402
from gridmix.core.grid import Grid  # noqa: E402
from gridmix.report.format import fmt  # noqa: E402
from gridmix.report.reference_lines import interval  # noqa: E402
from gridmix.report.types import Report  # noqa: E402

# a seed's |Δ| up to this fraction of the seed spread is a tie (grey), neither better nor worse
TIE_FRACTION = 0.1
SEED_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
LINE_STYLES = (
    "-",
    "--",
    "-.",
    ":",
    (0, (5, 1, 1, 1)),
    (0, (1, 1)),
    (0, (8, 2)),
    (0, (3, 1, 1, 1, 1, 1)),
)
ROLE_COLOURS = {
    "idea": "tab:blue",
    "baseline": "tab:orange",
    "ablation": "tab:purple",
    "control": "tab:brown",
}
"""One colour per role, the same in every figure of every report (the naive references are grey);
models of one role differ by line style."""
COLOURS = (
    "tab:pink",
    "tab:olive",
    "tab:cyan",
    "tab:gray",
)
"""For what has no role (a spectrum's seeds, a model of unknown role), in turn."""
BETTER, WORSE, TIE = "tab:green", "tab:red", "0.55"
BOUND_DASHES = {
    "chance": (0, (1, 2)),
    "ceiling": (0, (4, 2)),
}  # the track's chance level and ceiling, every figure
DPI = 110


def model_styles(names, roles: dict[str, str] | None = None) -> dict[str, dict]:
    """Per model (in order): its colour (its role's, :data:`ROLE_COLOURS`, given ``roles``; else
    :data:`COLOURS` in turn), line style, line width, marker size and z-order. Widths and sizes fall
    with the order and z-orders rise, so each later (thinner) line is drawn over the earlier (wider)
    ones and none can hide another: a line lying exactly on another shows it as a rim."""
    names, roles = list(names), roles or {}
    unroled = iter(range(len(names)))
    return {
        name: dict(
            color=ROLE_COLOURS.get(roles.get(name)) or COLOURS[next(unroled) % len(COLOURS)],
            linestyle=LINE_STYLES[i % len(LINE_STYLES)],
            linewidth=max(0.9, 2.8 - 0.45 * i),
            markersize=max(3.0, 8.0 - 1.2 * i),
            zorder=2 + i,
        )
        for i, name in enumerate(names)
    }


def _roles(report: Report) -> dict[str, str]:
    return {name: arm.role for name, arm in report.arms.items()}


def _legend_style(style: dict) -> dict:
    """A model's style for a legend entry (no z-order, a legible marker size)."""
    return {key: value for key, value in style.items() if key not in ("zorder", "markersize")}


def seed_marker(index: int) -> str:
    return SEED_MARKERS[index % len(SEED_MARKERS)]


def split_label(metric: str, split: str) -> str:
    """``"test cross-entropy"`` on the validation split reads ``"cross-entropy (validation
    split)"``."""
    base = metric[len("test ") :] if metric.lower().startswith("test ") else metric
    return f"{base} ({split} split)"


def tie_tolerance(a: list[float], b: list[float]) -> float:
    """How close two paired values must be to count as a tie: :data:`TIE_FRACTION` of the seed
    spread, the larger of the two arms' standard deviations over the paired seeds (0 when both are
    constant: then only equality)."""

    def std(values: list[float]) -> float:
        mean = sum(values) / len(values)
        return (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5

    return TIE_FRACTION * max(std(a), std(b)) if a and b else 0.0


def note(ax, text: str) -> None:
    """``text`` in the middle of an empty panel, in place of data it does not have."""
    ax.text(
        0.5,
        0.5,
        text,
        ha="center",
        va="center",
        wrap=True,
        fontsize=9,
        color="0.3",
        transform=ax.transAxes,
        gid="note",
    )
    ax.set_xticks([])
    ax.set_yticks([])


def _plain_ticks(ax, *, axis: str = "y") -> None:
    """Linear tick labels as plain numbers, no offset or scientific factor."""
    formatter = ScalarFormatter(useOffset=False)
    formatter.set_scientific(False)
    getattr(ax, f"{axis}axis").set_major_formatter(formatter)
    getattr(ax, f"{axis}axis").set_major_locator(MaxNLocator(nbins=6))


def _bounds(ax, report: Report, *, references: bool) -> str:
    """The track's chance level and ceiling (and, on a test panel, the naive references) as
    horizontal lines where they lie within the data's range (stretched by half its span); the words
    naming those beyond it, for the panel's x-label (outside the data), empty when none is."""
    lines = [(key, getattr(report, key), "black", dashes) for key, dashes in BOUND_DASHES.items()]
    if references:
        for i, (name, value) in enumerate(((report.references or {}).get("values") or {}).items()):
            lines.append((f"naive {name} (test split)", value, "0.45", ("--", "-.", ":")[i % 3]))
    low, high = ax.get_ylim()
    span = (high - low) or abs(high) or 1.0
    outside = []
    for label, value, colour, style in lines:
        if value is None:
            continue
        if low - span / 2 <= value <= high + span / 2:
            ax.axhline(
                value,
                color=colour,
                ls=style,
                lw=1,
                label=f"{label} {fmt(value)}",
                zorder=1,
                gid="bound",
            )
        else:
            outside.append(f"{label} {fmt(value)} {'↑' if value > high else '↓'}")
    return _wrapped(["off the axis:", *outside]) if outside else ""


def _wrapped(items: list[str], width: int = 56) -> str:
    """``items`` joined by commas in lines of at most ``width`` characters (an item is never split),
    so that a panel's label stays under its own panel."""
    lines, line = [], ""
    for i, item in enumerate(items):
        piece = item + ("," if 0 < i < len(items) - 1 else "")
        if line and len(line) + 1 + len(piece) > width:
            lines.append(line)
            line = piece
        else:
            line = f"{line} {piece}" if line else piece
    return "\n".join([*lines, line])


def _with_bounds(xlabel: str, beyond: str) -> str:
    return f"{xlabel}\n{beyond}" if beyond else xlabel


def _legend_outside(fig: Figure, handles: list, **options) -> None:
    """Puts ``fig``'s legend right of its panels, small and frameless (``options``: a title)."""
    fig.legend(handles=handles, loc="outside right upper", fontsize=7, frameon=False, **options)


def _save(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with replacing(path) as temp:
            fig.savefig(temp, dpi=DPI, format=path.suffix.lstrip(".") or "png")
    finally:
        plt.close(fig)
    return path


def figure_paired(report: Report) -> Figure:
    """Per seed, the idea's test metric against each other arm's: one line per seed (its marker),
    green where the idea is better, red where worse, grey within the tie tolerance; Δ with its 95%
    interval under each panel."""
    others = report.others
    fig, axes = plt.subplots(
        1,
        max(1, len(others)),
        figsize=(3.6 * max(1, len(others)) + 2.6, 4.2),
        squeeze=False,
        layout="constrained",
    )
    idea = report.idea_arm
    for ax, (name, arm) in zip(axes[0], others.items()):
        comp = report.comparison_with(name)
        ax.set_title(f"{name} ({arm.role})\n{comp.verdict if comp else 'not compared'}", fontsize=8)
        seeds = sorted(set(idea.by_seed) & set(arm.by_seed))
        if not seeds:
            statuses = ", ".join(
                f"{who} {'/'.join(sorted(set(a.per_seed_status)))}"
                for who, a in ((idea.name, idea), (name, arm))
            )
            note(ax, f"no seed where both finished\n({statuses})")
            continue
        a, b = [idea.by_seed[s] for s in seeds], [arm.by_seed[s] for s in seeds]
        tolerance = tie_tolerance(a, b)
        # both arms at the floor or ceiling: no seed's win or loss means anything
        bound = comp is not None and comp.verdict.startswith(UNINFORMATIVE.format(flag=""))
        for s, x, y in zip(seeds, a, b):
            tie = bound or abs(x - y) <= tolerance
            better = (x < y) == report.lower_is_better
            colour = TIE if tie else BETTER if better else WORSE
            ax.plot(
                [0, 1],
                [y, x],
                "-",
                marker=seed_marker(s),
                color=colour,
                alpha=0.8,
                ms=6,
                gid=f"seed {report.comparison_seeds[s]}",
            )
        ax.set_xticks([0, 1], [name, idea.name], rotation=8, fontsize=8)
        ax.set_xlim(-0.25, 1.25)
        ax.set_ylabel(split_label(report.metric, "test"))
        _plain_ticks(ax)
        beyond = _bounds(ax, report, references=True)
        r = comp.result if comp else None
        delta = (
            f"Δ = idea − {name} = {fmt(r.delta_mean)}\n95% sign-flip interval {interval(r)}, "
            f"sign-flip p = {fmt(r.p_value)}"
            if r is not None
            else f"not compared: {comp.reason if comp else 'no pair'}"
        )
        ax.set_xlabel(_with_bounds(delta, beyond), fontsize=7)
    legend = [
        Line2D([], [], color="0.2", marker=seed_marker(i), ls="-", label=f"seed {seed}")
        for i, seed in enumerate(report.comparison_seeds)
    ]
    legend += [
        Line2D([], [], color=colour, lw=2, label=words)
        for colour, words in (
            (BETTER, "idea better on that seed"),
            (WORSE, "idea worse"),
            (TIE, f"tie: |Δ| ≤ {TIE_FRACTION:g} × seed spread, or both arms at chance/ceiling"),
        )
    ]
    names = {h.get_label() for h in legend}
    for ax in axes[0]:
        legend += [
            h for h in ax.get_lines() if h.get_gid() == "bound" and h.get_label() not in names
        ]
        names |= {h.get_label() for h in legend}
    title = f"{report.track} {report.grid}: paired seeds, {split_label(report.metric, 'test')}"
    _legend_outside(fig, legend)
    fig.suptitle(f"{title} ({report.metric_direction})", fontsize=9)
    return fig


def figure_sweep(report: Report) -> Figure:
    """Mean validation metric against learning rate, one line per model (its style), the chosen rate
    ringed."""
    fig, ax = plt.subplots(figsize=(7.6, 4.0), layout="constrained")
    styles = model_styles(report.arms, _roles(report))
    lrs = sorted({point.lr for arm in report.arms.values() for point in arm.sweep})
    dodge = {
        name: 10 ** (0.012 * (i - (len(styles) - 1) / 2)) for i, name in enumerate(styles)
    }  # side by side
    failed = set()
    for name, arm in report.arms.items():
        style = styles[name]
        points = [(point.lr, point.mean) for point in arm.sweep if point.eligible]
        failed |= {point.lr for point in arm.sweep if not point.eligible}
        if not points:
            continue
        xs, ys = zip(*points)
        ax.plot(
            [x * dodge[name] for x in xs], ys, marker="o", label=name, gid=f"model {name}", **style
        )
        if arm.lr is not None and arm.lr in dict(points):
            ax.plot(
                [arm.lr * dodge[name]],
                [dict(points)[arm.lr]],
                "o",
                ms=style["markersize"] + 7,
                mfc="none",
                color=style["color"],
                zorder=style["zorder"],
            )
    if not ax.get_lines():
        note(ax, "no learning rate had every sweep seed finish, for any model")
        return fig
    for lr in sorted(failed):
        ax.axvline(lr, color="0.6", ls=":", lw=1, zorder=0)
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(lrs))
    ax.xaxis.set_major_formatter(FixedFormatter([f"{lr:g}" for lr in lrs]))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(min(lrs) / 1.6, max(lrs) * 1.6)
    ax.set_ylabel(split_label(report.metric, "validation"))
    _plain_ticks(ax)
    ax.set_xlabel(_with_bounds("learning rate", _bounds(ax, report, references=False)))
    handles = ax.get_legend_handles_labels()[0] + [
        Line2D(
            [],
            [],
            ls="none",
            marker="o",
            ms=11,
            mfc="none",
            color="0.3",
            label="the rate each model chose",
        )
    ]
    if failed:
        handles.append(
            Line2D([], [], color="0.6", ls=":", label="a run diverged or failed at this rate")
        )
    seeds = list(report.sweep_seeds)
    title = (
        f"learning-rate sweep on {report.track} {report.grid}: mean over the sweep seeds {seeds}"
    )
    ax.legend(
        handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False
    )
    ax.set_title(title, fontsize=9)  # above the axes: the legend takes the figure's right
    return fig


def figure_curves(report: Report) -> Figure:
    """Training loss and validation metric per epoch of every comparison seed's final run: one
    colour and line style per model, one marker per seed."""
    fig, (loss_ax, val_ax) = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
    styles = model_styles(report.arms, _roles(report))
    missing = []
    for name, arm in report.arms.items():
        style = styles[name]
        curves = [
            (i, loss, val)
            for i, (loss, val) in enumerate(zip(arm.train_loss, arm.val))
            if loss or val
        ]
        if not curves:
            missing.append(name)
        for i, loss, val in curves:
            seed = report.comparison_seeds[i]
            for ax, values in ((loss_ax, loss), (val_ax, val)):
                ax.plot(
                    range(1, len(values) + 1),
                    values,
                    marker=seed_marker(i),
                    alpha=0.85,
                    gid=f"model {name} seed {seed}",
                    label=name if i == curves[0][0] else None,
                    **style,
                )
    if missing and len(missing) == len(report.arms):
        for ax in (loss_ax, val_ax):
            note(ax, "no final run finished, for any model: nothing to draw")
        return fig
    loss_ax.set(
        xlabel="epoch",
        ylabel="training loss (train split)",
        title="training loss (every comparison seed)",
    )
    val_ax.set(
        xlabel="epoch",
        ylabel=split_label(report.metric, "validation"),
        title="validation metric (every comparison seed)",
    )
    for ax in (loss_ax, val_ax):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        _plain_ticks(ax)
        ax.title.set_fontsize(9)
    val_ax.set_xlabel(_with_bounds("epoch", _bounds(val_ax, report, references=False)))
    handles = [
        Line2D([], [], label=name, **_legend_style(styles[name]))
        for name in report.arms
        if name not in missing
    ]
    handles += [
        Line2D([], [], color="0.2", marker=seed_marker(i), ls="none", label=f"seed {seed}")
        for i, seed in enumerate(report.comparison_seeds)
    ]
    handles += [h for h in val_ax.get_lines() if h.get_gid() == "bound"]
    if missing:
        handles.append(Line2D([], [], ls="none", label=f"no finished run: {', '.join(missing)}"))
    _legend_outside(fig, handles)
    return fig


_PANELS = (
    ("time", "wall-clock, median", "ms per step", lambda p: p["time_ms"]),
    ("flops", "FLOPs", "GFLOP per step", lambda p: p["gflops"]),
    ("memory", "peak memory (above the interpreter)", "MB", lambda p: p["peak_mb"]),
)


MIN_Y_RATIO = 10.0  # a log panel's y-axis spans at least this ratio


def figure_scaling(scaling) -> Figure:
    """Log-log time, FLOPs and memory against N, one line per model; a panel no point measured says
    why."""
    data = scaling.to_dict() if hasattr(scaling, "to_dict") else scaling
    fits = {(f["model"], f["quantity"]): f for f in data["fits"]}
    styles = model_styles(data["models"], data.get("roles"))
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8), layout="constrained")
    slopes = False
    for (quantity, title, unit, value), ax in zip(_PANELS, axes):
        ax.set_title(title, fontsize=9)
        for model in data["models"]:
            points = sorted(
                (p["tokens"], value(p))
                for p in data["points"]
                if p["model"] == model and value(p) is not None
            )
            if not points:
                continue
            fit = fits.get((model, quantity), {})
            # a slope through two points always fits exactly: shown only when at least three grids
            # were measured
            slope = (
                fit.get("tail_exponent") or fit.get("exponent")
                if fit.get("points", 0) >= MIN_FIT_POINTS
                else None
            )
            slopes |= slope is not None
            ax.plot(
                *zip(*points),
                marker="o",
                label=model if slope is None else f"{model} (slope {slope:.2f})",
                gid=f"model {model}",
                **styles[model],
            )
        if not ax.get_lines():
            note(ax, f"{title}: no point measured\n{_why_unmeasured(data, quantity)}")
            continue
        _guides(ax)
        ax.set(xscale="log", yscale="log", xlabel="tokens N", ylabel=unit)
        tokens = sorted({p["tokens"] for p in data["points"]})
        ax.xaxis.set_major_locator(FixedLocator(tokens))
        for axis in (ax.xaxis, ax.yaxis):  # plain numbers (256, 1,024; 30, 60), never 3×10²
            axis.set_major_formatter(FuncFormatter(lambda value, _: fmt(float(value), 3)))
            axis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.14), frameon=False, ncol=2)
    suffix = f"; slope: the largest grids' (fits of {MIN_FIT_POINTS}+ grids)" if slopes else ""
    excluded = data.get("excluded_grids") or {}
    unmeasured = (
        "\nnot measured, the track does not run them: "
        + "; ".join(f"{grid} ({why})" for grid, why in excluded.items())
        if excluded
        else ""
    )
    fig.suptitle(
        f"scaling on track {data['track']}: one forward+backward step, batch {data['batch']}, "
        f"{data['device']}, {data['threads']} thread(s), median of {data['repeats']}{suffix}"
        f"{unmeasured}",
        fontsize=10,
    )
    return fig


def _why_unmeasured(data: dict, quantity: str) -> str:
    """Why no point has the panel's quantity: the points' own reasons when they give one."""
    reasons = sorted({p["skipped"] for p in data["points"] if p.get("skipped")})
    if quantity == "memory" and not reasons:
        return (
            "(peak memory is measured in a fresh process per point;\n`gridmix scale "
            "--no-memory` skips it)"
        )
    return "(" + "; ".join(reasons[:3]) + ")" if reasons else "(every point failed)"


def plot_scaling(scaling, path: str | Path) -> Path:
    """Log-log time, FLOPs and memory against N, one line per model; ``scaling``: a ScalingResult or
    its dict."""
    return _save(figure_scaling(scaling), path)


def _guides(ax) -> None:
    """Grey N¹ and N² reference slopes from the panel's lowest first point, clipped to the data's
    range."""
    lines = ax.get_lines()
    xs = sorted({x for line in lines for x in line.get_xdata()})
    ys = [y for line in lines for y in line.get_ydata()]
    low, high = min(ys) / 1.5, max(ys) * 1.5
    if high / low < MIN_Y_RATIO:  # never a zoom that makes 8.5 and 9.3 look far apart
        middle = (low * high) ** 0.5
        low, high = middle / MIN_Y_RATIO**0.5, middle * MIN_Y_RATIO**0.5
    ax.set_ylim(low, high)
    if len(xs) < 2:
        return
    y0 = min(line.get_ydata()[0] for line in lines)
    for power, style in ((1, ":"), (2, "--")):
        ax.plot(
            [xs[0], xs[-1]],
            [y0, y0 * (xs[-1] / xs[0]) ** power],
            style,
            color="0.6",
            lw=1,
            label=f"∝ N^{power}",
            zorder=1,
        )


def figure_spectra(mechanism: dict) -> Figure:
    """Factor spectra per layer and axis with the predicted bound dashed; ``mechanism``: one seed's
    or combined. Each seed has its own colour, line style and marker, drawn widest first so no seed
    hides another."""
    seeds = mechanism.get("per_seed") or [dict(mechanism, seed=None)]
    layers = seeds[0]["layers"]
    columns = max(len(layer["axes"]) for layer in layers)
    fig, axes = plt.subplots(
        len(layers),
        columns,
        figsize=(4.2 * columns + 1.8, 2.9 * len(layers)),
        squeeze=False,
        layout="constrained",
    )
    bound = mechanism["predicted_factor_bound"]
    styles = model_styles([signature["seed"] for signature in seeds])
    for row, layer in enumerate(layers):
        for col in range(columns):
            ax = axes[row][col]
            if col >= len(layer["axes"]):
                ax.axis("off")
                continue
            for index, signature in enumerate(seeds):
                axis = signature["layers"][row]["axes"][col]
                style = styles[signature["seed"]]
                for values in axis["singular_values"]:
                    ax.plot(
                        range(1, len(values) + 1),
                        values,
                        alpha=0.8,
                        gid=f"seed {signature['seed']}",
                        marker=seed_marker(index) if len(values) <= 32 else None,
                        **style,
                    )
            ax.axhline(bound, color="black", ls="--", lw=1.2, zorder=1)
            first = layer["axes"][col]
            ax.set(
                title=f"{layer['name']} axis {col} ({first['kind']}, n={first['length']})",
                xlabel="index",
                ylabel="singular value",
                ylim=(0, bound * 1.08),
            )
            ax.title.set_fontsize(9)
            ax.grid(True, alpha=0.3)
    handles = [
        Line2D(
            [],
            [],
            marker=seed_marker(i) if len(seeds) > 1 else None,
            label=f"seed {s['seed']}" if s["seed"] is not None else "the idea's model",
            **_legend_style(styles[s["seed"]]),
        )
        for i, s in enumerate(seeds)
    ]
    handles.append(
        Line2D([], [], color="black", ls="--", lw=1.2, label=f"predicted bound {bound:g}")
    )
    _legend_outside(
        fig,
        handles,
        title="seeds, a line per head" if len(seeds) > 1 else "one line per head",
        title_fontsize=7,
    )
    verdict = "confirmed" if mechanism["confirmed"] else "NOT confirmed"
    fig.suptitle(
        f"factor spectra ({len(seeds)} seed(s)): every factor within its bound — {verdict}; "
        f"certified ‖M‖₂ ≤ {fmt(mechanism['certified_operator_bound'])}",
        fontsize=10,
    )
    return fig


def plot_spectra(mechanism: dict, path: str | Path) -> Path:
    return _save(figure_spectra(mechanism), path)


def figure_transfer(report: Report) -> Figure:
    """Test metric against the grid's token count, one line per model (mean ± std, every seed a
    dot), the training grid marked; a model that could not run at a grid has no point there (its
    legend entry says where)."""
    transfer = report.transfer
    points = {point.grid: point for point in transfer.grids}
    grids = sorted([transfer.trained_grid, *points], key=lambda grid: Grid.parse(grid).numel)
    fig, ax = plt.subplots(figsize=(8.4, 4.2))
    styles = model_styles(report.arms, _roles(report))
    for index, (name, arm) in enumerate(report.arms.items()):
        shown, absent = [], []
        for grid in grids:
            values = (
                arm.per_seed if grid == transfer.trained_grid else points[grid].arms[name].per_seed
            )
            if values:
                shown.append((Grid.parse(grid).numel, values))
            else:
                absent.append(grid)
        if not shown:
            continue
        style = styles[name]
        # side by side per grid
        xs = [x * 2 ** (0.04 * (index - (len(report.arms) - 1) / 2)) for x, _ in shown]
        means = [sum(v) / len(v) for _, v in shown]
        spread = [(sum((y - m) ** 2 for y in v) / len(v)) ** 0.5 for (_, v), m in zip(shown, means)]
        label = name + (f" (cannot run at {', '.join(absent)})" if absent else "")
        ax.errorbar(xs, means, yerr=spread, marker="o", capsize=3, label=label, **style)
        for x, (_, values) in zip(xs, shown):
            ax.plot(
                [x] * len(values),
                values,
                ".",
                color=style["color"],
                alpha=0.4,
                zorder=style["zorder"],
            )
    trained = Grid.parse(transfer.trained_grid).numel
    ax.axvline(trained, color="grey", ls="--", lw=1)
    ax.annotate(
        f"trained on {transfer.trained_grid}",
        (trained, 0),
        xycoords=("data", "axes fraction"),
        xytext=(3, 4),
        textcoords="offset points",
        fontsize=8,
        color="grey",
    )
    ax.set_xscale("log", base=2)
    ax.set_xticks([Grid.parse(grid).numel for grid in grids], grids)
    ax.minorticks_off()
    beyond = _bounds(ax, report, references=False)  # the chance level a model may sit at
    ax.set(
        xlabel=_with_bounds("evaluation grid (log scale in tokens)", beyond), ylabel=report.metric
    )
    if ax.get_legend_handles_labels()[0]:
        # outside the data
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title(
        f"{report.track}: trained on {transfer.trained_grid}, tested on other grids "
        f"({report.metric_direction})\nmean ± std over the comparison seeds; dots: single seeds",
        fontsize=9,
    )
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


_OUTCOME_WORDS = dict(better="idea better", tie="n.s.", worse="idea worse", none="no verdict")


def _position(name: str, value) -> float:
    """Where a swept value sits on the x axis: a grid at its token count, a number at itself."""
    return float(Grid.parse(value).numel) if name == "grid" else float(value)


def plot_sweep_points(sweep: dict, path: str | Path) -> Path:
    """:func:`figure_sweep_points`, saved."""
    return _save(figure_sweep_points(sweep), path)


def figure_sweep_points(sweep: dict) -> Figure:
    """Each model's test metric (mean ± std over seeds, every seed a dot) against the first swept
    name, one panel per combination of the others, each point's primary verdict written above it and
    the track's chance level (and ceiling) drawn through the points; ``sweep``: the sweep report's
    ``to_dict()`` (``sweep_report.json``)."""
    (along, values), *_ = sweep["over"]
    numeric = along == "grid" or all(isinstance(v, (int, float)) for v in values)
    panels: dict[tuple, list[dict]] = {}
    for point in sweep["points"]:
        fixed = tuple((k, v) for k, v in point["values"].items() if k != along)
        panels.setdefault(fixed, []).append(point)
    models = list(dict.fromkeys(name for point in sweep["points"] for name in point["arms"]))
    roles = {name: arm.get("role") for p in sweep["points"] for name, arm in p["arms"].items()}
    styles = model_styles(models, roles)
    fig, axes = plt.subplots(
        1, len(panels), figsize=(max(6.4, 5.6 * len(panels)) + 2.4, 4.6), squeeze=False
    )
    for ax, (fixed, points) in zip(axes[0], panels.items()):
        order = [values.index(point["values"][along]) for point in points]
        points = [point for _, point in sorted(zip(order, points), key=lambda pair: pair[0])]
        xs = [_position(along, p["values"][along]) if numeric else i for i, p in enumerate(points)]
        logarithmic = numeric and min(xs) > 0 and max(xs) / min(xs) >= 4
        for index, model in enumerate(models):
            shift = 0.03 * (index - (len(models) - 1) / 2)  # side by side at each point
            moved = [
                x * 2**shift if logarithmic else x + shift * (max(xs) - min(xs) or 1) for x in xs
            ]
            shown = [
                (x, p["arms"][model])
                for x, p in zip(moved, points)
                if p["arms"].get(model, {}).get("n")
            ]
            if not shown:
                continue
            style = styles[model]
            ax.errorbar(
                [x for x, _ in shown],
                [arm["mean"] for _, arm in shown],
                yerr=[arm["std"] for _, arm in shown],
                marker="o",
                capsize=3,
                label=model,
                **style,
            )
            for x, arm in shown:
                ax.plot(
                    [x] * arm["n"],
                    arm["per_seed"],
                    ".",
                    color=style["color"],
                    alpha=0.4,
                    zorder=style["zorder"],
                )
        for key, dashes in BOUND_DASHES.items():
            levels = [point.get(key) for point in points]
            if all(level is not None for level in levels):
                shown = sorted(set(levels))
                ax.plot(
                    xs,
                    levels,
                    color="black",
                    ls=dashes,
                    lw=1,
                    zorder=1,
                    gid=key,
                    label=f"{key} {fmt(shown[0])}" if len(shown) == 1 else f"{key} (per point)",
                )
        for x, point in zip(xs, points):
            ax.annotate(
                _OUTCOME_WORDS[point["outcome"]],
                (x, 1),
                xycoords=("data", "axes fraction"),
                xytext=(0, 4),
                textcoords="offset points",
                ha="center",
                fontsize=7,
                color="0.3",
            )
        if logarithmic:
            ax.set_xscale("log", base=2)
            ax.minorticks_off()
        ax.set_xticks(xs, [str(p["values"][along]) for p in points])
        unit = (
            " (tokens" + (", log scale)" if logarithmic else ")")
            if along == "grid"
            else (" (log scale)" if logarithmic else "")
        )
        ax.set(xlabel=along + unit, ylabel=f"{sweep['metric']} (test split)")
        ax.set_title(", ".join(f"{k}={v}" for k, v in fixed), fontsize=9, loc="left", pad=16)
        ax.grid(True, alpha=0.3)
        _plain_ticks(ax)
    last = axes[0][-1]
    if last.get_legend_handles_labels()[0]:
        # outside the data
        last.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    fig.suptitle(
        f"{sweep['track']}: {sweep['metric']} against {along} ({sweep['metric_direction']})\nmean "
        "± std over "
        f"seeds (dots: single seeds); above each point: idea vs {sweep['baseline']}, alone at α",
        fontsize=9,
    )
    fig.tight_layout()
    return fig


def plot_report(report: Report, out: Path, *, errors: list[str] | None = None) -> list[Path]:
    """Every plot the report has data for; returns the files written.

    A plot that fails (a file-system error aside, which propagates) is skipped and its error
    appended to ``errors``, so one bad section never costs the report the others.
    """
    wanted = [("curves", lambda: figure_curves(report))]  # (name, drawn into name.png)
    if report.idea_arm.sweep:  # a single learning rate is not swept
        wanted.insert(0, ("sweep", lambda: figure_sweep(report)))
    if report.others:
        wanted.insert(0, ("paired", lambda: figure_paired(report)))
    scaling, signature = report.analyses.get("scaling"), report.mechanism_signature
    if scaling and "error" not in scaling:
        wanted.append(("scaling", lambda: figure_scaling(scaling)))
    if signature and "error" not in signature:
        wanted.append(("spectra", lambda: figure_spectra(signature)))
    if report.transfer is not None:
        wanted.append(("transfer", lambda: figure_transfer(report)))
    paths = []
    for name, draw in wanted:
        try:
            paths.append(_save(draw(), Path(out) / f"{name}.png"))
        except OSError:
            raise
        except Exception as error:
            plt.close("all")
            if errors is not None:
                errors.append(f"{name} plot: {type(error).__name__}: {error}")
    return paths
