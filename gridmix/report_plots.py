"""PNG plots of a study report: paired per-seed results, learning-rate sweeps, training curves.

Scaling and spectra plots come from :mod:`gridmix.analysis.plots` when the report holds those
sections. Everything here reads the :class:`~gridmix.report_types.Report` only, so ``gridmix report DIR``
redraws them.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from gridmix.report_types import Report  # noqa: E402


def _draw_references(ax, report: Report) -> None:
    """The naive references (majority class, persistence, ...) as dashed horizontal lines, labelled."""
    for i, (name, value) in enumerate(((report.references or {}).get("values") or {}).items()):
        ax.axhline(value, color="grey", ls=("--", ":", "-.")[i % 3], lw=1, label=f"{name} (test)")


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
            ax.legend(fontsize=7)
        ax.set_xticks([0, 1], [name, idea.name], rotation=10)
        comp = report.comparison_with(name)
        family = comp.family if comp else "mechanism"
        ax.set_title(f"{arm.role} ({family}): {comp.verdict if comp else '–'}", fontsize=8)
        ax.set_ylabel(report.metric)
    fig.suptitle(f"{report.track} {report.grid}: paired seeds ({report.metric_direction})\n"
                 "green = idea better on that seed, red = worse, grey = tie", fontsize=9)
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


def plot_report(report: Report, out: Path, *, errors: list[str] | None = None) -> list[Path]:
    """Every plot the report has data for; returns the files written.

    A plot that fails (a file-system error aside, which propagates) is skipped and its error appended to
    ``errors``, so one bad section never costs the report the others.
    """
    from gridmix.analysis import plots

    out = Path(out)
    wanted = [("curves", lambda: plot_curves(report, out / "curves.png"))]
    if report.idea_arm.sweep:  # a single learning rate is not swept
        wanted.insert(0, ("sweep", lambda: plot_sweep(report, out / "sweep.png")))
    if report.others:
        wanted.insert(0, ("paired", lambda: plot_paired(report, out / "paired.png")))
    scaling, signature = report.analyses.get("scaling"), report.mechanism_signature
    if scaling and "error" not in scaling:
        wanted.append(("scaling", lambda: plots.plot_scaling(scaling, out / "scaling.png")))
    if signature and "error" not in signature:
        wanted.append(("spectra", lambda: plots.plot_spectra(signature, out / "spectra.png")))
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
