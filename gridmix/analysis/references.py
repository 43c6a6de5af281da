"""References a reviewer checks first, computed on every comparison seed's own split and scored with
the track's own metric, so that the report tests each model against them seed by seed (what the
report says of them: :mod:`gridmix.report.reference_lines`; the fitted ones:
:mod:`gridmix.analysis.probes`).

Classification (int64 class labels ``(S,)``): the majority class of the training split (predicted as
the smoothed training class frequencies, so an accuracy scores the majority class and a
cross-entropy the class prior); with floating-point inputs also a logistic-regression probe and 1-NN
on the flattened inputs (raw or standardised, as validation chooses). Forecasting (inputs ``(S, C,
L)``, a window whose channel 0 is the forecast series' own past, float targets ``(S, H)``): the
training mean (the track's ``training_mean``, the mean of its series' training part, where it
declares one, else the mean of every training target, for every step); persistence (the window's
last value); seasonal naive (the value one season earlier, the season chosen on the training and
validation windows among :data:`SEASONS`, the track's own :attr:`~gridmix.tracks.Track.seasons` and
the dominant period of the training windows, those that fit in the window); and a ridge
autoregression from the whole window (every channel) to the horizon, on the window as given or
normalised per window as the forecasting tracks' models see it (RevIN), chosen on validation. Every
one is fitted on the rows the models train on (the track's own splits) and scored on the test rows
they are tested on, with the track's metric and its :attr:`~gridmix.tracks.Track.extra_metrics`
(e.g. MASE). :func:`chance_level` is the study's chance level: for a track with a ``training_mean``,
the training-mean reference's value.

:func:`study_references` computes them per comparison seed (once where the split is fixed: every
seed has the same data) and keeps ``per_seed`` values beside their means (``values``);
:func:`with_model_metrics` adds the models' extra metrics. Shape legend: S samples, K classes, L
context length, H horizon.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from gridmix.analysis.probes import (
    dominant_period,
    logistic_logits,
    nearest_neighbour_logits,
    ridge_forecasts,
)
from gridmix.core.grid import Grid
from gridmix.tracks import DataSizes, Split, Track, TrackData

SEASONS = (4, 7, 12, 24, 52)
# Of the stored references: 3 fits ridge on per-window-normalised windows too, 1-NN on raw inputs
# too, the training mean of a one-series track is its training part's (2: every comparison seed's
# values; 1: seed 0's only).
VERSION = 3
# The fits are small (a probe's step is one (S, F) × (F, K) product): on one thread they take
# milliseconds a step, where two threads sharing busy cores stall on every hand-off; one thread also
# makes them the same on any machine.
REFERENCE_THREADS = 1
METHODS = {  # how each kind's references are fitted (the report's method line)
    "classification": "majority class from the training frequencies; logistic probe by torch "
    "L-BFGS (float32, standardised flattened inputs, L2 chosen on validation); 1-NN by "
    "torch.cdist (flattened inputs, raw or standardised as validation chose)",
    "forecasting": "training mean, persistence and seasonal naive by formula (the season chosen "
    "on the training and validation windows); ridge autoregression in closed form (numpy float64 "
    "SVD; the windows as given or normalised per window, and the penalty, chosen on validation)",
    "none": "none fits this track's data",
}


def naive_references(track: Track, grid: Grid, sizes: DataSizes, *, seed: int = 0) -> dict:
    """The references on one seed's data: ``{"kind", "values": {name: metric}, "details": {name:
    {...}}}`` (and ``"extra_metrics"`` with the track's extra metrics), or ``{"kind": "none",
    "values": {}}`` if none fits."""
    return seed_references(track, track.make_data(grid, seed, sizes))


def seed_references(track: Track, data: TrackData) -> dict:
    """:func:`naive_references` of data already made."""
    train, val, test = data.train, data.val, data.test

    # lower is better, whatever the track's direction
    def score(predictions: torch.Tensor, split: Split) -> float:
        value = track.metric(predictions.to(torch.float32), split.targets)
        return value if track.direction == "lower" else -value

    if test.targets.dtype == torch.int64 and test.targets.ndim == 1:
        forecasts, details = _classification(train, val, test, score)
        kind = "classification"
    elif test.inputs.ndim == 3 and test.targets.ndim == 2 and test.targets.is_floating_point():
        forecasts, details = _forecasting(train, val, test, score, track)
        kind = "forecasting"
    else:
        return {"kind": "none", "values": {}}
    references = {
        "kind": kind,
        "values": {
            name: float(track.metric(f.to(torch.float32), test.targets))
            for name, f in forecasts.items()
        },
        "details": details,
    }
    if track.extra_metrics:
        references["extra_metrics"] = {
            name: {
                metric: float(measure(f.to(torch.float32), test.targets))
                for metric, measure in track.extra_metrics.items()
            }
            for name, f in forecasts.items()
        }
    return references


def _classification(train: Split, val: Split, test: Split, score) -> tuple[dict, dict]:
    k = int(max(train.targets.max(), val.targets.max(), test.targets.max())) + 1
    counts = torch.bincount(train.targets, minlength=k).float()  # (K,)
    # the training frequencies, smoothed: no class at p = 0
    prior = (counts + 0.5) / (counts.sum() + 0.5 * k)
    forecasts = {
        "majority class": prior.log().expand(len(test), k)
    }  # (S, K): argmax is the majority class
    details = {"majority class": {"class": int(counts.argmax())}}
    if train.inputs.is_floating_point():
        forecasts["logistic probe"], details["logistic probe"] = logistic_logits(
            train, val, test, k, score
        )
        forecasts["1-NN"], details["1-NN"] = nearest_neighbour_logits(train, val, test, k)
    return forecasts, details


def _forecasting(train: Split, val: Split, test: Split, score, track: Track) -> tuple[dict, dict]:
    horizon, length, known = test.targets.shape[1], test.inputs.shape[-1], track.seasons
    forecasts, details = {}, {}
    forecasts["training mean"], details["training mean"] = training_mean_forecast(
        track, train, test
    )
    forecasts["persistence"], details["persistence"] = (
        _persistence(test.inputs, horizon),
        {},
    )  # (S, H)
    period = dominant_period(train.inputs)
    candidates = sorted(
        {m for m in (*SEASONS, *known, *([period] if period else ())) if 2 <= m <= length}
    )
    if candidates:
        fit = Split(torch.cat([train.inputs, val.inputs]), torch.cat([train.targets, val.targets]))
        season = min(candidates, key=lambda m: score(_seasonal(fit.inputs, horizon, m), fit))
        forecasts["seasonal naive"] = _seasonal(test.inputs, horizon, season)  # (S, H)
        details["seasonal naive"] = {
            "season": season,
            "candidates": candidates,
            "dominant_period": period,
            "track_seasons": sorted(known),
        }
    forecasts["ridge autoregression"], details["ridge autoregression"] = ridge_forecasts(
        train, val, test, score
    )
    return forecasts, details


def training_mean_forecast(track: Track, train: Split, test: Split) -> tuple[torch.Tensor, dict]:
    """The training-mean reference's test forecasts (S, H) and details: the track's
    :attr:`~gridmix.tracks.Track.training_mean` (the mean of the series' training part) where it
    declares one, else the mean of every training target, for every step."""
    declared = track.training_mean is not None
    mean = float(track.training_mean) if declared else float(train.targets.double().mean())
    return torch.full(test.targets.shape, mean), {
        "mean": mean,
        "of": "the training part" if declared else "the training targets",
    }


def chance_level(track: Track, grid: Grid, sizes: DataSizes) -> float | None:
    """The study's chance level: the track's :attr:`~gridmix.tracks.Track.chance` (its value on
    ``grid`` where it is a function of the grid), or, where the
    track declares its ``training_mean``, the training-mean reference's value, the track's metric of
    that mean forecast on the test windows of the fixed split (those every arm is tested on), so the
    report names one number for both."""
    if track.training_mean is None:
        return track.chance(grid) if callable(track.chance) else track.chance
    data = track.make_data(grid, 0, sizes)
    forecast, _ = training_mean_forecast(track, data.train, data.test)  # (S, H)
    return float(track.metric(forecast.to(torch.float32), data.test.targets))


def _persistence(inputs: torch.Tensor, horizon: int) -> torch.Tensor:
    return inputs[:, 0, -1:].expand(-1, horizon)  # (S, H): channel 0 is the forecast series' past


def _seasonal(inputs: torch.Tensor, horizon: int, season: int) -> torch.Tensor:
    L = inputs.shape[-1]
    # the value one season (or several) before each step ahead
    steps = torch.arange(horizon) % season
    return inputs[:, 0, L - season + steps]  # (S, H)


def study_references(
    track: Track, grid: Grid, sizes: DataSizes, seeds: list[int], *, fixed_split: bool
) -> dict:
    """The references on every seed of ``seeds``: ``kind``, ``seeds``, ``per_seed`` (name → one
    value per seed), ``values`` (their means), ``details`` (name → one dict per seed: the season,
    penalty, … chosen), ``extra_metrics`` (name → metric → mean over seeds), ``fixed_split``,
    ``method``, ``version`` and ``seconds`` (the wall-clock they took). With ``fixed_split`` every
    seed has the same data: computed once, repeated. Torch runs them on REFERENCE_THREADS thread(s),
    and the caller's thread count is restored."""
    started, threads = time.perf_counter(), torch.get_num_threads()
    torch.set_num_threads(REFERENCE_THREADS)
    per_seed: list[dict] = []
    try:
        for seed in seeds:
            per_seed.append(
                per_seed[0]
                if fixed_split and per_seed
                else naive_references(track, grid, sizes, seed=seed)
            )
    finally:
        torch.set_num_threads(threads)
    first = per_seed[0]
    where = (
        "once on the fixed split (every seed has the same data)"
        if fixed_split
        else "on every comparison seed's split"
    )
    result = {
        "kind": first["kind"],
        "seeds": list(seeds),
        "version": VERSION,
        "fixed_split": fixed_split,
        "method": f"{METHODS[first['kind']]}; {where}",
    }
    names = list(first["values"])
    result["per_seed"] = {name: [refs["values"][name] for refs in per_seed] for name in names}
    result["values"] = {name: float(np.mean(values)) for name, values in result["per_seed"].items()}
    result["details"] = {name: [refs["details"][name] for refs in per_seed] for name in names}
    if "extra_metrics" in first:
        result["extra_metrics"] = {
            name: {
                metric: float(np.mean([refs["extra_metrics"][name][metric] for refs in per_seed]))
                for metric in first["extra_metrics"][name]
            }
            for name in names
        }
    result["seconds"] = time.perf_counter() - started
    return result


def with_model_metrics(references: dict | None, final_rows: dict[str, list]) -> dict | None:
    """``references`` with ``"models": {model: {metric name: mean over seeds}}`` of the runs' extra
    test metrics.

    ``final_rows`` holds per model its final runs' ledger rows (``None`` where missing); a run that
    failed or has no ``extras["test_metrics"]`` (e.g. a ledger written before the track had them) is
    left out. The references are returned as they are when no run measured any extra metric.
    """
    models = {}
    for model, rows in final_rows.items():
        measured = [
            row.extras["test_metrics"]
            for row in rows
            if row is not None and row.status == "ok" and "test_metrics" in row.extras
        ]
        if measured:
            names = {name for metrics in measured for name in metrics}
            models[model] = {
                name: float(np.mean([m[name] for m in measured if name in m]))
                for name in sorted(names)
            }
    if not models:
        return references
    return dict(references or {"kind": "none", "values": {}}, models=models)
