"""Early stopping: stops after ``patience`` epochs without improvement and restores the best epoch's
weights."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gridmix.study.early_stopping import EarlyStopping
from gridmix.study.train import train_run
from gridmix.tracks.plugin_loader import load_registry


def test_stops_after_patience_and_restores_the_best_weights():
    model = torch.nn.Linear(1, 1, bias=False)
    stopper = EarlyStopping(2, direction="higher")
    stops = []
    for epoch, val in enumerate([0.1, 0.5, 0.4, 0.3, 0.9]):
        torch.nn.init.constant_(model.weight, float(epoch))
        stops.append(stopper.update(val, model))
        if stops[-1]:
            break
    assert stops == [False, False, False, True]  # two epochs without beating 0.5
    stopper.restore(model)
    assert model.weight.item() == 1.0 and stopper.summary()["best_epoch"] == 1


def test_improving_at_cap_and_no_patience_keeps_the_last_model():
    stopper = EarlyStopping(None, direction="lower")
    model = torch.nn.Linear(1, 1)
    assert not any(stopper.update(val, model) for val in [3.0, 2.0, 1.0])
    assert stopper.summary() == {
        "patience": None,
        "best_epoch": 2,
        "epochs": 3,
        "stopped_early": False,
        "improving_at_cap": True,
    }
    with pytest.raises(ValueError, match="patience=0"):
        EarlyStopping(0, direction="lower")


def test_train_run_with_patience_reports_the_best_epoch():
    track = load_registry().track("sequence")
    budget = dataclasses.replace(track.budget("smoke"), epochs=4, patience=1)
    data = track.make_data(track.default_grid, 0, budget.sizes)
    result = train_run(
        track,
        track.model("transformer"),
        track.default_grid,
        lr=3e-3,
        seed=0,
        budget=budget,
        data=data,
        device=torch.device("cpu"),
    )
    training = result.extras["training"]
    assert result.status == "ok" and training["patience"] == 1
    assert result.val_metric == min(result.val_curve) == result.val_curve[training["best_epoch"]]
    assert len(result.val_curve) == training["epochs"] <= 4
