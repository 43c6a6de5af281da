"""Plots of the scaling study and of the mixers' factor spectra (matplotlib, Agg backend, PNG).

* :func:`plot_scaling`: three log-log panels (wall-clock, FLOPs, peak memory of a forward+backward step
  against the token count N), one line per model, the tail exponent in the legend and N¹ / N² guides.
* :func:`plot_spectra`: one panel per mixer layer and axis with the singular values of the factor, every
  head (and every seed) a line, the predicted bound 1 dashed.

Both accept the result objects or their ``to_dict()`` / JSON form, as stored in the report.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

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
