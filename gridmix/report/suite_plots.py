"""The suite's plot per track (``gridmix suite``): the test metric against the rung, one line per
mixer with its 95% interval across seeds as error bars, the track's chance level and ceiling drawn;
it draws only what :mod:`gridmix.report.suite_report` computed, in the house style of
:mod:`gridmix.report.plots` (a colour per role, a line style per mixer, the legend outside), but for
the peers: every mixer beside attention that is neither the idea, its ablation nor the control gets
a colour of its own, since telling the peers apart is what the profile is for."""

from __future__ import annotations

from pathlib import Path

from gridmix.core.files import replacing
from gridmix.report.plots import BOUND_DASHES, DPI, model_styles, note, plt


def figure_suite_track(track: dict) -> plt.Figure:
    """One track's profile (a track of ``suite.json``): every mixer's mean against the rung (in the
    ladder's order), its interval as error bars, a rung without it left out; chance and ceiling as
    horizontal lines."""
    rungs = track["rungs"]
    mixers = list(dict.fromkeys(m for rung in rungs for m in rung["arms"]))
    roles = {m: arm["role"] for rung in rungs for m, arm in rung["arms"].items()}
    # a peer (a baseline other than attention) is drawn as a model without a role: a colour each
    roles = {m: None if m != track["baseline"] and r == "baseline" else r for m, r in roles.items()}
    styles = model_styles(mixers, roles)
    fig, ax = plt.subplots(figsize=(6.4 + 2.4, 4.4), layout="constrained")
    shown = False
    for index, mixer in enumerate(mixers):
        shift = 0.06 * (index - (len(mixers) - 1) / 2)  # side by side at each rung
        points = [
            (i + shift, rung["arms"][mixer])
            for i, rung in enumerate(rungs)
            if rung["arms"].get(mixer, {}).get("n")
        ]
        if not points:
            continue
        shown = True
        xs = [x for x, _ in points]
        means = [arm["mean"] for _, arm in points]
        low = [arm["mean"] - (arm["interval"] or [arm["mean"]] * 2)[0] for _, arm in points]
        high = [(arm["interval"] or [arm["mean"]] * 2)[1] - arm["mean"] for _, arm in points]
        style = styles[mixer]
        ax.errorbar(
            xs,
            means,
            yerr=[low, high],
            marker="o",
            capsize=3,
            label=mixer,
            color=style["color"],
            linestyle=style["linestyle"],
            linewidth=style["linewidth"],
            markersize=style["markersize"],
            zorder=style["zorder"],
        )
    if not shown:
        note(ax, "no mixer has a finished comparison seed at any rung")
        return fig
    for bound in ("chance", "ceiling"):
        if track[bound] is not None:
            ax.axhline(track[bound], color="0.4", linestyle=BOUND_DASHES[bound], linewidth=1.0)
            ax.annotate(
                bound,
                (1.0, track[bound]),
                xycoords=("axes fraction", "data"),
                fontsize=7,
                color="0.3",
                ha="right",
                va="bottom",
            )
    ax.set_xticks(range(len(rungs)), [f"{r['rung']}\n{r['grid']}" for r in rungs])
    ax.set_xlabel("rung (grid)")
    arrow = "↓" if track["direction"] == "lower" else "↑"
    ax.set_ylabel(f"{track['metric']} {arrow} (test split)")
    ax.set_title(f"{track['track']}: mean over seeds, 95% t-interval bars", fontsize=10, loc="left")
    fig.legend(loc="outside right upper", fontsize=7, frameon=False)
    return fig


def plot_suite_track(track: dict, path: str | Path) -> Path:
    """:func:`figure_suite_track`, saved as PNG at ``path`` (written whole or not at all)."""
    fig, path = figure_suite_track(track), Path(path)
    try:
        with replacing(path) as temp:
            fig.savefig(temp, dpi=DPI, format="png")
    finally:
        plt.close(fig)
    return path
