"""Every PNG gridmix draws (matplotlib, Agg backend): a study report's paired per-seed results, learning-rate sweeps
and training curves; the scaling study; the mixers' factor spectra.

* :func:`plot_paired`, :func:`plot_sweep`, :func:`plot_curves` read the :class:`~gridmix.report.types.Report`
  only, so ``gridmix report DIR`` redraws them; :func:`plot_report` draws every one the report has data for.
* :func:`plot_scaling`: three log-log panels (wall-clock, FLOPs, peak memory of a forward+backward step
  against the token count N), one line per model, the tail exponent in the legend and N¹ / N² guides.
* :func:`plot_spectra`: one panel per mixer layer and axis with the singular values of the factor, every
  head (and every seed) a line, the predicted bound 1 dashed.

The scaling and spectra plots accept the result objects or their ``to_dict()`` / JSON form, as stored in the report.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from gridmix.report.types import Report  # noqa: E402

REFERENCE_STYLES = ("--", ":", "-.", (0, (6, 2, 1, 2, 1, 2)))  # one line style per reference, cycled
REFERENCES_NOTE = "flat grey lines: references' test metric, mean over seeds"


def _draw_references(ax, report: Report) -> None:
    """The references (majority class, persistence, ...) as grey horizontal lines at their means over the
    comparison seeds, labelled with their names (the figure says what the lines are: REFERENCES_NOTE)."""
    for i, (name, value) in enumerate(((report.references or {}).get("values") or {}).items()):
        ax.axhline(value, color="grey", ls=REFERENCE_STYLES[i % len(REFERENCE_STYLES)], lw=1, label=name)


def plot_paired(report: Report, path: Path) -> Path:
    """Per seed, the idea's test metric against each other arm's: one line per seed and arm."""
    idea = report.idea_arm
    others = report.others
    fig, axes = plt.subplots(1, max(1, len(others)), figsize=(4.2 * max(1, len(others)), 3.8), squeeze=False)
    for ax, (name, arm) in zip(axes[0], others.items()):
        idea_by_seed = idea.by_seed
        base_by_seed = arm.by_seed
        seeds = sorted(set(idea_by_seed) & set(base_by_seed))
        for s in seeds:
            better = (idea_by_seed[s] < base_by_seed[s]) == report.lower_is_better
            color = "tab:grey" if idea_by_seed[s] == base_by_seed[s] else "tab:green" if better else "tab:red"
            ax.plot([0, 1], [base_by_seed[s], idea_by_seed[s]], "-o", color=color, alpha=0.7)
        _draw_references(ax, report)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6)
        ax.set_xticks([0, 1], [name, idea.name], rotation=10)
        comp = report.comparison_with(name)
        family = comp.family if comp else "mechanism"
        ax.set_title(f"{arm.role} ({family}): {comp.verdict if comp else '–'}", fontsize=8)
        ax.set_ylabel(report.metric)
    note = f"; {REFERENCES_NOTE}" if (report.references or {}).get("values") else ""
    fig.suptitle(f"{report.track} {report.grid}: paired seeds ({report.metric_direction})\n"
                 f"green = idea better on that seed, red = worse, grey = tie{note}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_sweep(report: Report, path: Path) -> Path:
    """Mean validation metric against learning rate, one line per model; the chosen rate circled."""
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for name, arm in report.arms.items():
        points = [(point.lr, point.mean) for point in arm.sweep if point.eligible]
        if points:
            lrs, means = zip(*points)
            (line,) = ax.plot(lrs, means, "-o", label=name)
            if arm.lr is not None:
                ax.plot([arm.lr], [dict(points)[arm.lr]], "o", ms=13, mfc="none", color=line.get_color())
        for point in arm.sweep:
            if not point.eligible:
                ax.axvline(point.lr, color="grey", ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("learning rate")
    ax.set_ylabel(f"validation {report.metric}")
    ax.set_title("learning-rate sweep (dotted: a run diverged or failed)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_curves(report: Report, path: Path) -> Path:
    """Training loss and validation metric per epoch of every seed's final run, one colour per model."""
    fig, (loss_ax, val_ax) = plt.subplots(1, 2, figsize=(10, 3.8))
    for i, (name, arm) in enumerate(report.arms.items()):
        color = f"C{i}"
        for s, (loss, val) in enumerate(zip(arm.train_loss, arm.val)):
            label = name if s == 0 else None
            loss_ax.plot(range(1, len(loss) + 1), loss, color=color, alpha=0.6, label=label)
            val_ax.plot(range(1, len(val) + 1), val, color=color, alpha=0.6, label=label)
    loss_ax.set(xlabel="epoch", ylabel="training loss", yscale="log", title="training loss (every seed)")
    val_ax.set(xlabel="epoch", ylabel=f"validation {report.metric}", title="validation metric (every seed)")
    if (report.references or {}).get("values"):
        val_ax.set_title(f"validation metric (every seed)\n{REFERENCES_NOTE}", fontsize=9)
    _draw_references(val_ax, report)
    for ax in (loss_ax, val_ax):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    loss_ax.legend(fontsize=8)
    if (report.references or {}).get("values"):
        val_ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


_PANELS = (("time", "wall-clock, median", "ms per step", lambda p: p["time_ms"]),
           ("flops", "FLOPs", "GFLOP per step", lambda p: p["gflops"]),
           ("memory", "peak memory (above the interpreter)", "MB", lambda p: p["peak_mb"]))


MIN_FIT_POINTS = 3


def plot_scaling(scaling, path: str | Path) -> Path:
    """Log-log time, FLOPs and memory against N, one line per model; ``scaling``: a ScalingResult or its dict."""
    data = scaling.to_dict() if hasattr(scaling, "to_dict") else scaling
    path = Path(path)
    fits = {(f["model"], f["quantity"]): f for f in data["fits"]}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), constrained_layout=True)
    for (quantity, title, unit, value), ax in zip(_PANELS, axes):
        for index, model in enumerate(data["models"]):
            points = sorted((p["tokens"], value(p)) for p in data["points"]
                            if p["model"] == model and value(p) is not None)
            if not points:
                continue
            fit = fits.get((model, quantity), {})
            # a slope through two points always fits exactly: shown only when at least three grids were measured
            slope = fit.get("tail_exponent") if fit.get("points", 0) >= MIN_FIT_POINTS else None
            name = model if slope is None else f"{model} (slope {slope:.2f})"
            ax.plot(*zip(*points), marker="o", color=f"C{index}", label=name)
        _guides(ax)
        ax.set(xscale="log", yscale="log", xlabel="tokens N", ylabel=unit, title=title)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_lines():
            ax.legend(fontsize=8, title=f"slope: largest grids (fits of {MIN_FIT_POINTS}+ grids)", title_fontsize=8)
    fig.suptitle(f"scaling on track {data['track']}: one forward+backward step, batch {data['batch']}, "
                 f"{data['device']}, {data['threads']} thread(s), median of {data['repeats']}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _guides(ax) -> None:
    """Grey N¹ and N² reference slopes from the panel's lowest first point, clipped to the data's range."""
    lines = ax.get_lines()
    if not lines:
        return
    xs = sorted({x for line in lines for x in line.get_xdata()})
    ys = [y for line in lines for y in line.get_ydata()]
    if len(xs) < 2:
        return
    y0 = min(line.get_ydata()[0] for line in lines)
    for power, style in ((1, ":"), (2, "--")):
        ax.plot([xs[0], xs[-1]], [y0, y0 * (xs[-1] / xs[0]) ** power], style, color="0.6", lw=1,
                label=f"∝ N^{power}")
    ax.set_ylim(min(ys) / 1.5, max(ys) * 1.5)


def plot_spectra(mechanism: dict, path: str | Path) -> Path:
    """Factor spectra per layer and axis with the predicted bound dashed; ``mechanism``: one seed's or combined."""
    path = Path(path)
    seeds = mechanism.get("per_seed") or [dict(mechanism, seed=None)]
    layers = seeds[0]["layers"]
    columns = max(len(layer["axes"]) for layer in layers)
    fig, axes = plt.subplots(len(layers), columns, figsize=(4.2 * columns, 2.9 * len(layers)), squeeze=False,
                             constrained_layout=True)
    bound = mechanism["predicted_factor_bound"]
    for row, layer in enumerate(layers):
        for col in range(columns):
            ax = axes[row][col]
            if col >= len(layer["axes"]):
                ax.axis("off")
                continue
            for index, signature in enumerate(seeds):
                axis = signature["layers"][row]["axes"][col]
                for head, values in enumerate(axis["singular_values"]):
                    label = (f"seed {signature['seed']}" if signature["seed"] is not None else "heads") if head == 0 \
                        else None
                    ax.plot(range(1, len(values) + 1), values, color=f"C{index % 10}", lw=1, alpha=0.7,
                            marker="." if len(values) <= 32 else None, label=label)
            ax.axhline(bound, color="black", ls="--", lw=1.2, label=f"predicted bound {bound:g}")
            first = layer["axes"][col]
            ax.set(title=f"{layer['name']} axis {col} ({first['kind']}, n={first['length']})",
                   xlabel="index", ylabel="singular value", ylim=(0, bound * 1.08))
            ax.title.set_fontsize(9)
            ax.grid(True, alpha=0.3)
            if row == 0 and col == 0:
                ax.legend(fontsize=7, loc="upper right")
    verdict = "confirmed" if mechanism["confirmed"] else "NOT confirmed"
    fig.suptitle(f"factor spectra ({len(seeds)} seed(s)): every factor within its bound — {verdict}; "
                 f"certified ‖M‖₂ ≤ {mechanism['certified_operator_bound']:.3f}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_report(report: Report, out: Path, *, errors: list[str] | None = None) -> list[Path]:
    """Every plot the report has data for; returns the files written.

    A plot that fails (a file-system error aside, which propagates) is skipped and its error appended to
    ``errors``, so one bad section never costs the report the others.
    """
    out = Path(out)
    wanted = [("curves", lambda: plot_curves(report, out / "curves.png"))]
    if report.idea_arm.sweep:  # a single learning rate is not swept
        wanted.insert(0, ("sweep", lambda: plot_sweep(report, out / "sweep.png")))
    if report.others:
        wanted.insert(0, ("paired", lambda: plot_paired(report, out / "paired.png")))
    scaling, signature = report.analyses.get("scaling"), report.mechanism_signature
    if scaling and "error" not in scaling:
        wanted.append(("scaling", lambda: plot_scaling(scaling, out / "scaling.png")))
    if signature and "error" not in signature:
        wanted.append(("spectra", lambda: plot_spectra(signature, out / "spectra.png")))
    paths = []
    for name, draw in wanted:
        try:
            paths.append(draw())
        except OSError:
            raise
        except Exception as error:
            plt.close("all")
            if errors is not None:
                errors.append(f"{name} plot: {type(error).__name__}: {error}")
    return paths
