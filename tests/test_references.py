"""The references (training mean, persistence, seasonal naive, ridge autoregression; majority class,
logistic probe, 1-NN) against hand computations on small fixed fixtures, on generated series that
each one should win, per comparison seed, and what the report says of them and of the training
checks."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from gridmix_tracks.common import accuracy, mean_cross_entropy, mse
from gridmix_tracks.sequence_csv import csv_sequence_track

from gridmix.analysis.probes import RIDGE_ALPHAS, dominant_period
from gridmix.analysis.references import (
    SEASONS,
    naive_references,
    seed_references,
    study_references,
    with_model_metrics,
)
from gridmix.core.grid import Grid
from gridmix.report.reference_lines import (
    edge_learning_rates,
    improving_at_cap,
    overfitting,
    training_lines,
)
from gridmix.report.types import Arm
from gridmix.tracks import DataSizes, Split, TrackData

SIZES = DataSizes(n_train=200, n_val=100, n_test=100)


def write_series(path, values) -> str:
    path.write_text("value\n" + "\n".join(f"{v:.8f}" for v in values))
    return path


def fake_track(metric, direction: str, *, extra_metrics=None, seasons=()):
    """What the references read of a track: its metric, direction, extra metrics and known
    seasons."""
    return SimpleNamespace(
        metric=metric,
        direction=direction,
        extra_metrics=extra_metrics or {},
        seasons=seasons,
        training_mean=None,
    )


def test_seasonal_naive_finds_the_season_of_a_periodic_csv(tmp_path):
    t = np.arange(600)
    track = csv_sequence_track(write_series(tmp_path / "cyclic.csv", np.sin(2 * np.pi * t / 12)))
    refs = naive_references(track, Grid((32,)), SIZES)
    assert refs["kind"] == "forecasting" and refs["details"]["seasonal naive"]["season"] == 12
    assert refs["values"]["seasonal naive"] < 1e-8 < refs["values"]["persistence"]


def test_an_11_periodic_series_is_forecast_11_steps_back(tmp_path):
    # The yearly case: a cycle of 11 steps, which the fixed seasons (4, 7, 12, 24, 52) miss; the
    # training windows' dominant period finds it, and the user's season
    # (GRIDMIX_SEQUENCE_CSV_SEASON) is a candidate too.
    assert 11 not in SEASONS
    t = np.arange(900)
    values = (
        np.sin(2 * np.pi * t / 11)
        + 0.5 * np.sin(4 * np.pi * t / 11 + 1)
        + 0.05 * np.random.default_rng(0).normal(size=t.size)
    )
    path = write_series(tmp_path / "eleven.csv", values)
    refs = naive_references(csv_sequence_track(path), Grid((32,)), SIZES)
    seasonal = refs["details"]["seasonal naive"]
    assert (
        seasonal["dominant_period"] == 11
        and seasonal["season"] == 11
        and 11 in seasonal["candidates"]
    )
    data = csv_sequence_track(path).make_data(Grid((32,)), 0, SIZES)
    # (S, H): the value 11 steps before each step
    by_hand = data.test.inputs[:, 0, 32 - 11 + np.arange(16) % 11]
    assert refs["values"]["seasonal naive"] == pytest.approx(
        mse(by_hand, data.test.targets), rel=1e-6
    )
    season_12 = mse(data.test.inputs[:, 0, 32 - 12 + np.arange(16) % 12], data.test.targets)
    assert refs["values"]["seasonal naive"] < season_12 / 5
    with_season = naive_references(csv_sequence_track(path, season=11), Grid((32,)), SIZES)
    assert with_season["details"]["seasonal naive"]["track_seasons"] == [11]


def test_dominant_period_of_a_trend_is_none_and_of_a_cycle_is_its_length():
    t = torch.arange(40.0)
    # a line: the autocorrelation only falls
    assert dominant_period((t * 0.3 + 1.0).expand(5, 1, 40)) is None
    # (5, 1, 40)
    cycle = torch.sin(2 * np.pi * (t[None, :] + torch.arange(5.0)[:, None]) / 9)[:, None]
    assert dominant_period(cycle) == 9  # not its multiple 18


def test_a_linear_series_is_won_by_the_ridge_autoregression(tmp_path):
    # An AR(2) process: its best forecast is linear in the window; no seasonal or naive reference
    # comes close.
    rng = np.random.default_rng(4)
    x = np.zeros(1200)
    for i in range(2, x.size):
        x[i] = 1.6 * x[i - 1] - 0.8 * x[i - 2] + rng.normal()
    refs = naive_references(
        csv_sequence_track(write_series(tmp_path / "ar.csv", x[200:])), Grid((32,)), SIZES
    )
    values = refs["values"]
    best = min(values, key=values.get)
    assert best == "ridge autoregression" and values[best] < 0.7 * min(
        v for k, v in values.items() if k != best
    )


def forecasting_fixture() -> TrackData:
    """Windows of 4 steps (1 channel) and horizons of 2, every value chosen here."""

    def split(windows, targets):
        return Split(
            torch.tensor(windows, dtype=torch.float32)[:, None],
            torch.tensor(targets, dtype=torch.float32),
        )

    train = split(
        [[0, 1, 2, 3], [1, 0, 1, 0], [2, 2, 1, 1], [3, 1, 0, 2], [0, 0, 1, 3], [1, 2, 3, 4]],
        [[4, 5], [1, 0], [0, 1], [1, 3], [4, 6], [5, 6]],
    )
    val = split([[1, 1, 1, 1], [0, 2, 0, 2]], [[1, 1], [0, 2]])
    test = split([[2, 3, 2, 3], [4, 3, 2, 1], [0, 1, 0, 1]], [[2, 3], [0, -1], [0, 1]])
    return TrackData(train, val, test)


def test_forecasting_references_equal_their_hand_computations():
    data = forecasting_fixture()
    track = fake_track(mse, "lower", seasons=(2,))
    refs = seed_references(track, data)
    y = data.test.targets.double().numpy()
    mean = data.train.targets.double().mean().item()  # 36 / 12
    assert mean == 3.0 and refs["values"]["training mean"] == pytest.approx(((y - 3.0) ** 2).mean())
    persistence = np.array([[3, 3], [1, 1], [1, 1]])
    assert refs["values"]["persistence"] == pytest.approx(((y - persistence) ** 2).mean())
    # Seasons that fit in the 4-step window: 4 (fixed) and 2 (the track's); on train + val windows
    # season 2 wins.
    assert refs["details"]["seasonal naive"]["candidates"] == [2, 4]
    assert refs["details"]["seasonal naive"]["season"] == 2
    assert refs["values"]["seasonal naive"] == pytest.approx(
        ((y - np.array([[2, 3], [2, 1], [0, 1]])) ** 2).mean()
    )

    # Ridge by the normal equations with an unpenalised intercept (not the SVD the code uses), on
    # the windows as given and on each window normalised by its own mean and spread (targets alike,
    # forecasts mapped back), at every penalty: the chosen pair has the least validation MSE, and
    # its test MSE is the reference's value.
    def normalised(split, per_window):
        x = split.inputs[:, 0].double().numpy()  # (S, L)
        if not per_window:
            return x, np.zeros((len(x), 1)), np.ones((len(x), 1))
        mean, std = x.mean(1, keepdims=True), x.std(1, keepdims=True) + 1e-5
        return (x - mean) / std, mean, std

    def fit(per_window, alpha):
        x, mean, std = normalised(data.train, per_window)
        t = (data.train.targets.double().numpy() - mean) / std
        scale = ((x - x.mean(0)) ** 2).sum() / x.shape[1]
        design = np.hstack([x, np.ones((len(x), 1))])
        penalty = np.diag([alpha * scale] * x.shape[1] + [0.0])
        weights = np.linalg.solve(design.T @ design + penalty, design.T @ t)  # (F + 1, H)

        def forecast(split):
            features, shift, factor = normalised(split, per_window)
            return np.hstack([features, np.ones((len(split), 1))]) @ weights * factor + shift

        return forecast

    def val_mse(choice):
        return ((fit(*choice)(data.val) - data.val.targets.double().numpy()) ** 2).mean()

    per_window, alpha = min(((p, a) for p in (False, True) for a in RIDGE_ALPHAS), key=val_mse)
    chosen = refs["details"]["ridge autoregression"]
    assert chosen["alpha"] == alpha and chosen["inputs"] == (
        "per-window normalised" if per_window else "standardised"
    )
    by_hand = ((fit(per_window, alpha)(data.test) - y) ** 2).mean()
    assert refs["values"]["ridge autoregression"] == pytest.approx(by_hand, rel=1e-5)


def classification_fixture() -> TrackData:
    """Two features, three classes; 1-NN by hand (standardised features: the training mean and
    spread below)."""

    def split(points, labels):
        return Split(torch.tensor(points, dtype=torch.float32), torch.tensor(labels))

    train = split([[0, 0], [0, 1], [4, 0], [4, 1], [0, 8], [1, 8], [0, 0.5]], [0, 0, 1, 1, 2, 2, 0])
    # the last: nearest is class 2
    val = split([[0.2, 0.2], [3.5, 0.5], [0.5, 7.0], [3.9, 7.5]], [0, 1, 2, 1])
    # the last: nearest is class 1
    test = split([[0.1, 0.9], [4.2, 0.1], [0.8, 7.9], [3.0, 0.2]], [0, 1, 2, 0])
    return TrackData(train, val, test)


def test_classification_references_equal_their_hand_computations():
    data = classification_fixture()
    refs = seed_references(fake_track(accuracy, "higher"), data)
    assert refs["details"]["majority class"] == {"class": 0}
    assert refs["values"]["majority class"] == 0.5  # classes 0, 1, 2, 0: class 0 twice
    # every test point but the last takes its nearest training point's class
    assert refs["values"]["1-NN"] == 0.75
    assert refs["details"]["1-NN"]["validation_accuracy"] == pytest.approx((3 + 0.5) / (4 + 1))
    assert refs["values"]["logistic probe"] >= 0.75  # three linearly separable clusters
    # Under a cross-entropy 1-NN puts q = 3.5/5 on its neighbour's label and (1 - q)/2 on each other
    # class.
    ce = seed_references(fake_track(mean_cross_entropy, "lower"), data)
    q = 3.5 / 5
    assert ce["values"]["1-NN"] == pytest.approx(
        -(3 * np.log(q) + np.log((1 - q) / 2)) / 4, rel=1e-6
    )
    counts = np.array([3, 2, 2]) + 0.5
    prior = counts / counts.sum()
    assert ce["values"]["majority class"] == pytest.approx(
        -np.log(prior[[0, 1, 2, 0]]).mean(), rel=1e-6
    )


def test_the_logistic_probe_separates_what_a_line_separates_and_1nn_does_not_need_to():
    rng = np.random.default_rng(0)

    def split(n):
        x = rng.normal(size=(n, 1, 4, 4)).astype(np.float32)
        return Split(
            torch.from_numpy(x),
            torch.from_numpy((x[:, 0, 0, 0] + x[:, 0, 3, 3] > 0).astype(np.int64)),
        )

    refs = seed_references(
        fake_track(accuracy, "higher"), TrackData(split(400), split(100), split(200))
    )
    assert (
        refs["values"]["logistic probe"]
        > 0.9
        > refs["values"]["1-NN"]
        > refs["values"]["majority class"] - 0.2
    )


def test_majority_class_comes_from_the_training_split():
    def split(y):
        return Split(inputs=torch.zeros(len(y), 1, 2, 2), targets=torch.tensor(y))

    data = TrackData(train=split([2, 2, 2, 0]), val=split([0]), test=split([2, 0, 0, 1]))
    assert seed_references(fake_track(accuracy, "higher"), data)["values"]["majority class"] == 0.25
    # Under a cross-entropy the reference is the smoothed training prior: counts (1, 0, 3) + 0.5
    # over 4 + 1.5, not a confident guess; the value is the test labels' mean negative
    # log-probability under it.
    prior = {0: 1.5 / 5.5, 1: 0.5 / 5.5, 2: 3.5 / 5.5}
    expected = -np.mean([np.log(prior[y]) for y in (2, 0, 0, 1)])
    value = seed_references(fake_track(mean_cross_entropy, "lower"), data)["values"][
        "majority class"
    ]
    assert value == pytest.approx(expected, rel=1e-6)


def test_references_are_computed_on_every_seeds_own_data():
    # each seed its own targets: the training mean moves with the seed
    def make_data(grid, seed, sizes):
        def split(n, offset):
            x = torch.full((n, 1, 4), float(seed))
            return Split(x, torch.full((n, 2), float(seed + offset)))

        return TrackData(split(6, 1), split(2, 1), split(3, 2))

    track = SimpleNamespace(make_data=make_data, **vars(fake_track(mse, "lower")))
    refs = study_references(track, Grid((4,)), SIZES, [0, 1, 2], fixed_split=False)
    assert refs["seeds"] == [0, 1, 2] and refs["per_seed"]["training mean"] == [
        1.0,
        1.0,
        1.0,
    ]  # (s + 2 − (s + 1))²
    assert (
        refs["per_seed"]["persistence"] == [4.0, 4.0, 4.0] and refs["values"]["persistence"] == 4.0
    )
    assert [d["mean"] for d in refs["details"]["training mean"]] == [1.0, 2.0, 3.0]
    # computed once, on seed 0
    fixed = study_references(track, Grid((4,)), SIZES, [0, 1, 2], fixed_split=True)
    assert [d["mean"] for d in fixed["details"]["training mean"]] == [1.0, 1.0, 1.0] and fixed[
        "fixed_split"
    ]


def test_persistence_is_exact_after_a_level_shift(tmp_path):
    refs = naive_references(
        csv_sequence_track(write_series(tmp_path / "flat.csv", [0.0] * 300 + [1.0] * 300)),
        Grid((16,)),
        SIZES,
    )
    assert refs["values"]["persistence"] == 0.0  # the test windows lie on the constant tail


def arm(name: str, role: str, mean: float, lr: float, val: tuple) -> Arm:
    return Arm(
        name=name,
        role=role,
        lr=lr,
        sweep=(),
        per_seed_status=("ok",) * len(val),
        train_loss=((),) * len(val),
        val=val,
        per_seed=(mean,) * len(val),
        mean=mean,
        std=0.0,
    )


def report(
    lr_idea: float = 3e-3,
    *,
    idea_mean: float = 0.3,
    base_mean: float = 0.45,
    idea_val=((3, 2, 1), (3, 1, 2)),
    base_val=((3, 1, 2), (2, 1)),
    lrs=(1e-3, 2e-3, 3e-3),
    patience=None,
) -> SimpleNamespace:
    """The fields of a :class:`gridmix.report.types.Report` that the training checks and plots
    read."""
    return SimpleNamespace(
        arms={
            "idea": arm("idea", "idea", idea_mean, lr_idea, idea_val),
            "vit": arm("vit", "baseline", base_mean, 2e-3, base_val),
        },
        n_seeds=len(idea_val),
        metric="test MSE",
        lower_is_better=True,
        chance=None,
        ceiling=None,
        budget={"lrs": list(lrs), "epochs": 3, "patience": patience},
        references={"kind": "forecasting", "values": {"persistence": 0.5, "seasonal naive": 0.4}},
        data=None,
    )


def test_learning_rate_on_the_edge_of_a_sweep_of_three_is_flagged_and_two_rates_are_not():
    assert edge_learning_rates(report()) == {"idea": 3e-3}
    assert "idea chose 0.003" in "\n".join(training_lines(report()))
    assert edge_learning_rates(report(lr_idea=2e-3)) == {}
    # with two rates every choice is an edge: nothing to flag
    two = report(lr_idea=3e-3, lrs=(1e-3, 3e-3))
    assert edge_learning_rates(two) == {}
    assert "every choice is at an edge of the sweep" in "\n".join(training_lines(two))


def test_runs_still_improving_at_the_epoch_cap_are_flagged():
    assert improving_at_cap(report()) == {"idea": 1}  # vit's short curve stopped early
    assert "idea in 1 of 2 seeds" in "\n".join(training_lines(report()))


def test_an_early_overfitting_run_is_flagged_with_or_without_patience():
    # Best validation at epoch 1 of 8, then worse by far more than the spread of the seeds' best
    # values (0.01).
    overfit = (
        (0.50, 0.62, 0.70, 0.78, 0.80, 0.85, 0.86, 0.90),
        (0.51, 0.60, 0.72, 0.75, 0.81, 0.84, 0.88, 0.91),
    )
    steady = (
        (0.9, 0.8, 0.7, 0.6, 0.55, 0.5, 0.5, 0.49),
        (0.9, 0.8, 0.7, 0.6, 0.55, 0.52, 0.5, 0.5),
    )
    noisy = (
        (0.50, 0.49, 0.52, 0.51, 0.53, 0.52, 0.50, 0.52),
        (0.60, 0.58, 0.62, 0.61, 0.63, 0.62, 0.60, 0.61),
    )
    flagged = report(idea_val=overfit, base_val=steady)
    assert overfitting(flagged) == {"idea": 2}
    assert "**Overfitting**" in "\n".join(
        training_lines(flagged)
    ) and "idea in 2 of 2 seeds" in "\n".join(training_lines(flagged))
    # worse by less than the seeds' spread
    assert overfitting(report(idea_val=noisy, base_val=steady)) == {}
    # With patience the best epoch's model was restored and tested, but validation still got worse
    # after it.
    assert overfitting(report(idea_val=overfit, base_val=steady, patience=3)) == {"idea": 2}


def test_plots_draw_the_references_as_labelled_lines_on_test_panels_only():
    import matplotlib.pyplot as plt

    from gridmix.report.plots import _bounds

    fig, (test_ax, val_ax) = plt.subplots(1, 2)
    for ax in (test_ax, val_ax):
        ax.plot([0, 1], [0.3, 0.45])
    assert _bounds(test_ax, report(), references=True) == ""  # both within the data's range
    assert [line.get_ydata()[0] for line in test_ax.get_lines()[1:]] == [0.5, 0.4]
    assert test_ax.get_legend_handles_labels()[1] == [
        "naive persistence (test split) 0.5",
        "naive seasonal naive (test split) 0.4",
    ]
    _bounds(val_ax, report(), references=False)  # a validation panel: no test-split reference
    assert len(val_ax.get_lines()) == 1
    plt.close(fig)


def test_model_metrics_are_means_over_the_finished_seeds_only():
    def row(status, mase):
        return SimpleNamespace(
            status=status, extras={"test_metrics": {"MASE (m=1)": mase}} if mase else {}
        )

    refs = {"kind": "forecasting", "values": {"persistence": 0.5}}
    rows = {
        "idea": [row("ok", 0.8), row("ok", 1.0), row("diverged", 9.0), None],
        "vit": [row("ok", None), row("failed", 3.0)],
    }
    merged = with_model_metrics(refs, rows)
    assert (
        merged["models"] == {"idea": {"MASE (m=1)": pytest.approx(0.9)}}
        and merged["values"] == refs["values"]
    )
    # nothing measured: unchanged
    assert with_model_metrics(refs, {"vit": [row("ok", None)]}) is refs
    assert with_model_metrics(None, {"vit": [row("ok", None)]}) is None
