"""The references see what the models see: ridge on per-window-normalised windows where that
forecasts better, 1-NN on raw or standardised inputs as validation chooses, one chance level that is
the training mean scored on the arms' test windows, a penalty at the edge of its grid flagged, and
the headline naming the best reference with its p."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from gridmix_tracks.common import accuracy, mse
from gridmix_tracks.sequence_csv import csv_sequence_track

from gridmix.analysis.probes import LOGISTIC_L2, RIDGE_ALPHAS
from gridmix.analysis.references import (
    chance_level,
    naive_references,
    seed_references,
    study_references,
)
from gridmix.core.grid import Grid
from gridmix.report.build import build_report
from gridmix.report.reference_lines import reference_headline, reference_lines
from gridmix.study.ledger import Ledger
from gridmix.tracks import DataSizes, Split, TrackData
from tests import report_example

SIZES = DataSizes(n_train=200, n_val=100, n_test=100)


def write_series(path, values):
    path.write_text("value\n" + "\n".join(f"{v:.8f}" for v in values))
    return path


def raw_ridge_test_mse(data: TrackData) -> float:
    """The ridge autoregression on the windows as given (normal equations, unpenalised intercept),
    its penalty chosen on validation: what the reference was before it also tried
    per-window-normalised windows."""
    x = data.train.inputs.flatten(1).double().numpy()  # (S, F)
    scale = ((x - x.mean(0)) ** 2).sum() / x.shape[1]
    design = np.hstack([x, np.ones((len(x), 1))])

    def forecast(split, alpha):
        penalty = np.diag([alpha * scale] * x.shape[1] + [0.0])
        weights = np.linalg.solve(
            design.T @ design + penalty, design.T @ data.train.targets.double().numpy()
        )
        inputs = np.hstack([split.inputs.flatten(1).double().numpy(), np.ones((len(split), 1))])
        return torch.from_numpy(inputs @ weights).float()  # (S, H)

    alpha = min(RIDGE_ALPHAS, key=lambda a: mse(forecast(data.val, a), data.val.targets))
    return mse(forecast(data.test, alpha), data.test.targets)


def test_ridge_on_per_window_normalised_windows_wins_on_a_drifting_level(tmp_path):
    # A short series (240 values: 130 training windows of 32 steps) whose level wanders as a random
    # walk under a 12-step cycle: the test windows' level lies outside the training windows', and a
    # ridge on the raw windows, fitted on few windows, does not hold the window's own level;
    # normalised per window (as RevIN normalises the models' inputs) it starts from that level, and
    # validation says so.
    rng = np.random.default_rng(4)
    t = np.arange(240)
    values = (
        0.5 * np.cumsum(rng.normal(size=t.size))
        + np.sin(2 * np.pi * t / 12)
        + 0.3 * rng.normal(size=t.size)
    )
    track = csv_sequence_track(write_series(tmp_path / "drift.csv", values))
    refs = naive_references(track, Grid((32,)), SIZES)
    ridge = refs["values"]["ridge autoregression"]
    # chosen on validation
    assert refs["details"]["ridge autoregression"]["inputs"] == "per-window normalised"
    assert ridge < 0.75 * raw_ridge_test_mse(track.make_data(Grid((32,)), 0, SIZES))
    assert ridge == min(refs["values"].values())


def test_chance_is_the_training_parts_mean_scored_on_the_test_windows(tmp_path):
    # A trend: the training windows' targets (rows 48 … 279) have a mean well above the training
    # part's (rows 0 … 279), and the test windows (32 of them, each 16 steps) weigh the test rows
    # unevenly.
    t = np.arange(400)
    values = 0.01 * t + np.sin(2 * np.pi * t / 7)
    track = csv_sequence_track(write_series(tmp_path / "trend.csv", values))
    sizes, grid = DataSizes(n_train=64, n_val=32, n_test=8), Grid((48,))
    data = track.make_data(grid, 0, sizes)
    # the training part's mean is 0 once standardised
    by_hand = float((data.test.targets.double() ** 2).mean())
    refs = study_references(track, grid, sizes, [0, 1], fixed_split=True)
    assert chance_level(track, grid, sizes) == pytest.approx(by_hand, rel=1e-6)
    assert refs["values"]["training mean"] == pytest.approx(by_hand, rel=1e-6)
    assert refs["details"]["training mean"][0] == {"mean": 0.0, "of": "the training part"}
    # The old definitions: every test row (the track's chance), the training windows' targets (the
    # reference).
    train = values[:280]
    every_test_row = float((((values[340:] - train.mean()) / train.std()) ** 2).mean())
    window_mean = float(
        ((data.test.targets.double() - data.train.targets.double().mean()) ** 2).mean()
    )
    assert (
        abs(every_test_row - by_hand) > 0.02 * by_hand
        and abs(window_mean - by_hand) > 0.1 * by_hand
    )


def test_chance_of_a_track_without_a_training_mean_is_its_own():
    track = SimpleNamespace(training_mean=None, chance=0.25)
    assert chance_level(track, Grid((4,)), SIZES) == 0.25


def nn_split(rng, n: int, *, informative_scale: float, noise_scale: float) -> Split:
    """Feature 0 carries the label (class means 0 and 1, times ``informative_scale``, spread 0.1 of
    it); the nine others are noise of spread ``noise_scale``."""
    labels = torch.from_numpy(rng.integers(0, 2, size=n))
    x = rng.normal(size=(n, 10)) * noise_scale
    x[:, 0] = (labels.numpy() + 0.1 * rng.normal(size=n)) * informative_scale
    return Split(torch.from_numpy(x).float(), labels)


@pytest.mark.parametrize(
    ("informative_scale", "noise_scale", "chosen"),
    [
        (
            10.0,
            0.01,
            "raw",
        ),  # raw distances follow the label; standardising blows the noise up to the label's size
        (
            0.01,
            10.0,
            "standardised",
        ),  # raw distances follow the noise; standardised, the label counts as much
    ],
)
def test_1nn_takes_raw_or_standardised_inputs_as_validation_chooses(
    informative_scale, noise_scale, chosen
):
    rng = np.random.default_rng(1)
    data = TrackData(
        *(
            nn_split(rng, n, informative_scale=informative_scale, noise_scale=noise_scale)
            for n in (200, 100, 200)
        )
    )
    refs = seed_references(
        SimpleNamespace(metric=accuracy, direction="higher", extra_metrics={}, training_mean=None),
        data,
    )
    details = refs["details"]["1-NN"]
    other = next(inputs for inputs in details["validation_hits"] if inputs != chosen)
    assert (
        details["inputs"] == chosen
        and details["validation_hits"][chosen] > details["validation_hits"][other]
    )
    assert refs["values"]["1-NN"] > 0.9


def test_a_penalty_at_the_edge_of_its_grid_is_flagged():
    # Targets that are pure noise: the ridge forecast is best as the training mean, the largest
    # penalty; the logistic probe on labels independent of the inputs is best as the class prior,
    # its largest L2.
    rng = np.random.default_rng(2)

    def split(n):
        return Split(
            torch.from_numpy(rng.normal(size=(n, 1, 8))).float(),
            torch.from_numpy(rng.normal(size=(n, 2))).float(),
        )

    track = SimpleNamespace(
        metric=mse,
        direction="lower",
        extra_metrics={},
        seasons=(),
        training_mean=None,
        make_data=lambda grid, seed, sizes: TrackData(split(40), split(200), split(20)),
    )
    refs = study_references(track, Grid((8,)), SIZES, [0], fixed_split=True)
    ridge = refs["details"]["ridge autoregression"][0]
    assert ridge["alpha"] == RIDGE_ALPHAS[-1] and ridge["edge"] == "largest"
    text = "\n".join(
        reference_lines(
            SimpleNamespace(references=refs, metric="test MSE", reference_comparisons={})
        )
    )
    assert "**Penalty at the edge of its grid**" in text
    assert "ridge autoregression chose 100, the largest of 1e-06 … 100, on 1/1 seeds" in text
    inside = dict(
        refs,
        details={
            name: [dict(d, edge=None) for d in per_seed]
            for name, per_seed in refs["details"].items()
        },
    )
    assert "edge of its grid" not in "\n".join(
        reference_lines(
            SimpleNamespace(references=inside, metric="test MSE", reference_comparisons={})
        )
    )

    def labels(n):
        return Split(
            torch.from_numpy(rng.normal(size=(n, 16))).float(),
            torch.from_numpy(rng.integers(0, 2, size=n)),
        )

    probe = seed_references(
        SimpleNamespace(metric=accuracy, direction="higher", extra_metrics={}),
        TrackData(labels(30), labels(200), labels(20)),
    )["details"]["logistic probe"]
    assert probe["l2"] in (LOGISTIC_L2[0], LOGISTIC_L2[-1]) and probe["edge"] in (
        "smallest",
        "largest",
    )


def test_the_headline_names_the_best_reference_every_arm_it_beats_and_each_p(tmp_path):
    with Ledger(report_example.fill(tmp_path), create=False) as ledger:
        report = build_report(ledger)
    headline = reference_headline(report)
    # the control, far above persistence on every seed
    nomix = report.reference_comparisons["nomix"].result
    assert headline.startswith(
        "**Best reference: persistence (test MSE 0.58, mean over seeds): the idea beats it "
        "(Δ = -0.08, p = 0.03125)"
    )
    assert (
        f"; it also beats control nomix (Δ = {nomix.delta_mean:.4g}, p = {nomix.p_value:.4g})"
        in headline
    )
