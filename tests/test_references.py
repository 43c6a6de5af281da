"""Naive references (majority class, persistence, seasonal naive) and what the report says of them."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from gridmix_tracks.sequence_csv import csv_sequence_track

from gridmix.analysis.references import naive_references, with_model_metrics
from gridmix.grid import Grid
from gridmix.report.references import edge_learning_rates, improving_at_cap, reference_lines
from gridmix.report.types import Arm
from gridmix.tracks import DataSizes, Split, TrackData

SIZES = DataSizes(n_train=200, n_val=100, n_test=100)


def test_seasonal_naive_finds_the_season_of_a_periodic_csv(tmp_path):
    t = np.arange(600)
    path = tmp_path / "cyclic.csv"
    path.write_text("value\n" + "\n".join(f"{v:.6f}" for v in np.sin(2 * np.pi * t / 12)))
    track = csv_sequence_track(path)
    refs = naive_references(track, Grid((32,)), SIZES)
    seasonal = {k: v for k, v in refs["values"].items() if k.startswith("seasonal naive")}
    assert refs["kind"] == "forecasting" and list(seasonal) == ["seasonal naive (season 12, chosen on validation)"]
    assert list(seasonal.values())[0] < 1e-8 < refs["values"]["persistence"]


def test_persistence_is_exact_after_a_level_shift(tmp_path):
    path = tmp_path / "flat.csv"
    path.write_text("value\n" + "\n".join(str(v) for v in [0.0] * 300 + [1.0] * 300))
    refs = naive_references(csv_sequence_track(path), Grid((16,)), SIZES)
    assert refs["values"]["persistence"] == 0.0  # the test windows lie on the constant tail


def test_majority_class_comes_from_the_training_split():
    class Fake:
        direction = "higher"
        extra_metrics = {}

        @staticmethod
        def metric(logits, labels):
            return (logits.argmax(-1) == labels).float().mean().item()

        @staticmethod
        def make_data(grid, seed, sizes):
            split = lambda y: Split(inputs=torch.zeros(len(y), 1, 2, 2), targets=torch.tensor(y))  # noqa: E731
            return TrackData(train=split([2, 2, 2, 0]), val=split([0]), test=split([2, 0, 0, 1]))

    assert naive_references(Fake, Grid((2, 2)), SIZES)["values"] == {"majority class": 0.25}

    class FakeCrossEntropy(Fake):
        direction = "lower"

        @staticmethod
        def metric(logits, labels):
            return torch.nn.functional.cross_entropy(logits, labels).item()

    # Under a cross-entropy the reference is the smoothed training prior: counts (1, 0, 3) + 0.5 over 4 + 1.5, not a
    # confident guess; the value is the test labels' mean negative log-probability under it.
    prior = {0: 1.5 / 5.5, 1: 0.5 / 5.5, 2: 3.5 / 5.5}
    expected = -np.mean([np.log(prior[y]) for y in (2, 0, 0, 1)])
    value = naive_references(FakeCrossEntropy, Grid((2, 2)), SIZES)["values"]["majority class"]
    assert value == pytest.approx(expected, rel=1e-6)


def arm(name: str, role: str, mean: float, lr: float, val: tuple) -> Arm:
    return Arm(name=name, role=role, lr=lr, sweep=(), per_seed_status=("ok", "ok"), train_loss=((), ()), val=val,
               per_seed=(mean, mean), mean=mean, std=0.0)


def report(idea_mean: float, base_mean: float, lr_idea: float = 3e-3) -> SimpleNamespace:
    """The fields of a :class:`gridmix.report.types.Report` that the references' lines and plots read."""
    return SimpleNamespace(arms={"idea": arm("idea", "idea", idea_mean, lr_idea, ((3, 2, 1), (3, 1, 2))),
                                 "vit": arm("vit", "baseline", base_mean, 2e-3, ((3, 1, 2), (2, 1)))},
                           n_seeds=2, metric="test MSE", lower_is_better=True, chance=None, ceiling=None,
                           budget={"lrs": [1e-3, 2e-3, 3e-3], "epochs": 3},
                           references={"kind": "forecasting",
                                       "values": {"persistence": 0.5, "seasonal naive (season 4)": 0.4}})


def test_headline_says_when_every_model_is_worse_than_the_naive_reference():
    text = "\n".join(reference_lines(report(0.6, 0.45)))
    assert "**Every model is worse than the naive reference** seasonal naive (season 4) (0.4 test MSE)" in text
    assert "| idea | no | no | 1.2 |" in text and "| vit | no | yes | 0.9 |" in text
    assert "Every model is worse" not in "\n".join(reference_lines(report(0.3, 0.45)))


def test_learning_rate_on_the_edge_of_the_sweep_is_flagged():
    assert edge_learning_rates(report(0.3, 0.45)) == {"idea": 3e-3}
    assert "idea chose 0.003" in "\n".join(reference_lines(report(0.3, 0.45)))
    assert edge_learning_rates(report(0.3, 0.45, lr_idea=2e-3)) == {}


def test_runs_still_improving_at_the_epoch_cap_are_flagged():
    assert improving_at_cap(report(0.3, 0.45)) == {"idea": 1}  # vit's short curve stopped early
    assert "idea in 1 of 2 seeds" in "\n".join(reference_lines(report(0.3, 0.45)))


def test_plots_draw_the_references_as_labelled_lines_on_test_panels_only():
    import matplotlib.pyplot as plt

    from gridmix.report.plots import _bounds

    fig, (test_ax, val_ax) = plt.subplots(1, 2)
    for ax in (test_ax, val_ax):
        ax.plot([0, 1], [0.3, 0.45])
    assert _bounds(test_ax, report(0.3, 0.45), references=True) == ""  # both within the data's range
    assert [line.get_ydata()[0] for line in test_ax.get_lines()[1:]] == [0.5, 0.4]
    assert test_ax.get_legend_handles_labels()[1] == ["naive persistence (test split) 0.5",
                                                      "naive seasonal naive (season 4) (test split) 0.4"]
    _bounds(val_ax, report(0.3, 0.45), references=False)  # a validation panel: no test-split reference
    assert len(val_ax.get_lines()) == 1
    plt.close(fig)


def test_model_metrics_are_means_over_the_finished_seeds_only():
    def row(status, mase):
        return SimpleNamespace(status=status, extras={"test_metrics": {"MASE (m=1)": mase}} if mase else {})

    refs = {"kind": "forecasting", "values": {"persistence": 0.5}}
    rows = {"idea": [row("ok", 0.8), row("ok", 1.0), row("diverged", 9.0), None],
            "vit": [row("ok", None), row("failed", 3.0)]}
    merged = with_model_metrics(refs, rows)
    assert merged["models"] == {"idea": {"MASE (m=1)": pytest.approx(0.9)}} and merged["values"] == refs["values"]
    assert with_model_metrics(refs, {"vit": [row("ok", None)]}) is refs  # nothing measured: unchanged
    assert with_model_metrics(None, {"vit": [row("ok", None)]}) is None
