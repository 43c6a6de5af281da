"""Naive references a reviewer checks first, on the same test split as the models (what the report says of them is
:mod:`gridmix.report.references`).

Classification (int64 class labels ``(S,)``): the majority class of the training split, predicted as the
training class frequencies (log-probabilities whose argmax is the majority class), so that an accuracy scores
the majority class and a cross-entropy the class prior, never a confident one-hot guess. Forecasting (inputs
``(S, C, L)``, a context window whose channel 0 is the forecast series' own past and whose other channels, if
any, are covariates, and float targets ``(S, H)``, the next values): persistence (the window's last value for
every step ahead) and seasonal naive (the value one season earlier; the season is chosen on the validation
split among :data:`SEASONS` that fit in the window). Each is scored with the track's own metric, so it is in
the models' units, and with the track's :attr:`~gridmix.tracks.Track.extra_metrics` (e.g. MASE). For
forecasting the report also gives each model's metric relative to persistence (below 1 beats persistence) and
the mean over seeds of the extra metrics each run measured on its test predictions (:func:`with_model_metrics`).

The references use the data of seed 0; where a track's split does not depend on the seed they are exactly the
models' test split. Shape legend: S samples, L context length, H horizon.
"""

from __future__ import annotations

import numpy as np
import torch

from gridmix.grid import Grid
from gridmix.tracks import DataSizes, Track

SEASONS = (4, 7, 12, 24, 52)


def naive_references(track: Track, grid: Grid, sizes: DataSizes) -> dict:
    """``{"kind", "values": {name: metric}}`` for the track's data, or ``{"kind": "none"}`` if no reference fits.

    With :attr:`Track.extra_metrics` (e.g. MASE), ``"extra_metrics": {name: {metric name: value}}`` scores each
    reference with them too.
    """
    data = track.make_data(grid, 0, sizes)
    train, val, test = data.train, data.val, data.test
    if test.targets.dtype == torch.int64 and test.targets.ndim == 1:
        k = int(max(train.targets.max(), test.targets.max())) + 1
        counts = torch.bincount(train.targets, minlength=k).float()  # (K,)
        prior = (counts + 0.5) / (counts.sum() + 0.5 * k)  # the training frequencies, smoothed: no class at p = 0
        forecasts = {"majority class": prior.log().expand(len(test), k)}  # (S, K): argmax is the majority class
        kind = "classification"
    elif test.inputs.ndim == 3 and test.targets.ndim == 2 and test.targets.is_floating_point():
        forecasts = {"persistence": _persistence(test.inputs, test.targets.shape[1])}  # (S, H)
        seasons = [m for m in SEASONS if m <= test.inputs.shape[-1]]
        if seasons:
            best = min(seasons, key=lambda m: track.metric(_seasonal(val.inputs, val.targets.shape[1], m), val.targets)
                       * (1 if track.direction == "lower" else -1))
            forecasts[f"seasonal naive (season {best}, chosen on validation)"] = _seasonal(
                test.inputs, test.targets.shape[1], best)  # (S, H)
        kind = "forecasting"
    else:
        return {"kind": "none", "values": {}}
    references = {"kind": kind, "values": {name: track.metric(f, test.targets) for name, f in forecasts.items()}}
    if track.extra_metrics:
        references["extra_metrics"] = {name: {metric: float(measure(f, test.targets))
                                              for metric, measure in track.extra_metrics.items()}
                                       for name, f in forecasts.items()}
    return references


def _persistence(inputs: torch.Tensor, horizon: int) -> torch.Tensor:
    return inputs[:, 0, -1:].expand(-1, horizon)  # (S, H): channel 0 is the forecast series' past


def _seasonal(inputs: torch.Tensor, horizon: int, season: int) -> torch.Tensor:
    L = inputs.shape[-1]
    steps = torch.arange(horizon) % season  # the value one season (or several) before each step ahead
    return inputs[:, 0, L - season + steps]  # (S, H)


def with_model_metrics(references: dict | None, final_rows: dict[str, list]) -> dict | None:
    """``references`` with ``"models": {model: {metric name: mean over seeds}}`` of the runs' extra test metrics.

    ``final_rows`` holds per model its final runs' ledger rows (``None`` where missing); a run that failed or
    has no ``extras["test_metrics"]`` (e.g. a ledger written before the track had them) is left out. The
    references are returned as they are when no run measured any extra metric.
    """
    models = {}
    for model, rows in final_rows.items():
        measured = [row.extras["test_metrics"] for row in rows
                    if row is not None and row.status == "ok" and "test_metrics" in row.extras]
        if measured:
            names = {name for metrics in measured for name in metrics}
            models[model] = {name: float(np.mean([m[name] for m in measured if name in m])) for name in sorted(names)}
    if not models:
        return references
    return dict(references or {"kind": "none", "values": {}}, models=models)
