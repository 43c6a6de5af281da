"""PNG plots of a study report: paired per-seed results, learning-rate sweeps, training curves.

Scaling and spectra plots come from :mod:`gridmix.analysis.plots` when the report holds those
sections. Everything here reads the report dict only, so ``gridmix report DIR`` redraws them.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402


def _arms(report: dict) -> dict[str, dict]:
    return {report["idea"]["name"]: report["idea"], **report["baselines"]}


def _draw_references(ax, report: dict) -> None:
    """The naive references (majority class, persistence, ...) as dashed horizontal lines, labelled."""
    for i, (name, value) in enumerate(((report.get("references") or {}).get("values") or {}).items()):
        ax.axhline(value, color="grey", ls=("--", ":", "-.")[i % 3], lw=1, label=f"{name} (test)")


def plot_paired(report: dict, path: Path) -> Path:
    """Per seed, the idea's test metric against each baseline's: one line per seed and baseline."""
    idea = report["idea"]
    baselines = report["baselines"]
    fig, axes = plt.subplots(1, max(1, len(baselines)), figsize=(4.2 * max(1, len(baselines)), 3.8), squeeze=False)
    for ax, (name, arm) in zip(axes[0], baselines.items()):
        idea_by_seed = _by_seed(idea)
        base_by_seed = _by_seed(arm)
        seeds = sorted(set(idea_by_seed) & set(base_by_seed))
        for s in seeds:
            better = (idea_by_seed[s] < base_by_seed[s]) == report["metric_direction"].startswith("lower")
            color = "tab:grey" if idea_by_seed[s] == base_by_seed[s] else "tab:green" if better else "tab:red"
            ax.plot([0, 1], [base_by_seed[s], idea_by_seed[s]], "-o", color=color, alpha=0.7)
        _draw_references(ax, report)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        ax.set_xticks([0, 1], [name, idea["name"]], rotation=10)
        comparison = arm.get("comparison") or {}
        family = comparison.get("family", "mechanism")
        ax.set_title(f"{arm.get('role', '')} ({family}): {comparison.get('verdict', '–')}", fontsize=8)
        ax.set_ylabel(report["metric"])
    fig.suptitle(f"{report['track']} {report['grid']}: paired seeds ({report['metric_direction']})\n"
                 "green = idea better on that seed, red = worse, grey = tie", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _by_seed(arm: dict) -> dict[int, float]:
    values = iter(arm["full"]["per_seed"])
    return {s: next(values) for s, status in enumerate(arm["per_seed_status"]) if status == "ok"}


def plot_sweep(report: dict, path: Path) -> Path:
    """Mean validation metric against learning rate, one line per model; the chosen rate circled."""
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for name, arm in _arms(report).items():
        points = [(e["cfg"]["lr"], e["mean"]) for e in arm["sweep"] if e["eligible"]]
        if points:
            lrs, means = zip(*points)
            (line,) = ax.plot(lrs, means, "-o", label=name)
            best = arm["best_cfg"]["lr"]
            if best is not None:
                ax.plot([best], [dict(points)[best]], "o", ms=13, mfc="none", color=line.get_color())
        for e in arm["sweep"]:
            if not e["eligible"]:
                ax.axvline(e["cfg"]["lr"], color="grey", ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("learning rate")
    ax.set_ylabel(f"validation {report['metric']}")
    ax.set_title("learning-rate sweep (dotted: a run diverged or failed)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_curves(report: dict, path: Path) -> Path:
    """Training loss and validation metric per epoch of every seed's final run, one colour per model."""
    fig, (loss_ax, val_ax) = plt.subplots(1, 2, figsize=(10, 3.8))
    for i, (name, arm) in enumerate(_arms(report).items()):
        color = f"C{i}"
        for s, (loss, val) in enumerate(zip(arm["curves"]["train_loss"], arm["curves"]["val"])):
            label = name if s == 0 else None
            loss_ax.plot(range(1, len(loss) + 1), loss, color=color, alpha=0.6, label=label)
            val_ax.plot(range(1, len(val) + 1), val, color=color, alpha=0.6, label=label)
    loss_ax.set(xlabel="epoch", ylabel="training loss", yscale="log", title="training loss (every seed)")
    val_ax.set(xlabel="epoch", ylabel=f"validation {report['metric']}", title="validation metric (every seed)")
    _draw_references(val_ax, report)
    for ax in (loss_ax, val_ax):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    loss_ax.legend(fontsize=8)
    if (report.get("references") or {}).get("values"):
        val_ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_report(report: dict, out: Path, *, errors: list[str] | None = None) -> list[Path]:
    """Every plot the report has data for; returns the files written.

    A plot that fails (a file-system error aside, which propagates) is skipped and its error appended to
    ``errors``, so one bad section never costs the report the others.
    """
    from gridmix.analysis import plots

    out = Path(out)
    wanted = [("curves", lambda: plot_curves(report, out / "curves.png"))]
    if report["idea"]["sweep"]:  # a single learning rate is not swept
        wanted.insert(0, ("sweep", lambda: plot_sweep(report, out / "sweep.png")))
    if report["baselines"]:
        wanted.insert(0, ("paired", lambda: plot_paired(report, out / "paired.png")))
    if report.get("scaling") and "error" not in report["scaling"]:
        wanted.append(("scaling", lambda: plots.plot_scaling(report["scaling"], out / "scaling.png")))
    if report.get("mechanism_signature") and "error" not in report["mechanism_signature"]:
        wanted.append(("spectra", lambda: plots.plot_spectra(report["mechanism_signature"], out / "spectra.png")))
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
