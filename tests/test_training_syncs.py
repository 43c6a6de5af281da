"""A training step never waits for the device: every read of a device value (a loss, a finiteness
check, a data-dependent shape) happens once per epoch, not once per step. Counted on the CPU under a
dispatch mode, on every built-in track that generates its data, for each of its models: a run with
twice the steps per epoch makes exactly as many such reads."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gridmix.core.grid import Grid
from gridmix.study.train import first_non_finite, train_run
from gridmix.tracks.plugin_loader import load_registry

# ops that make the host wait for the device: a scalar read, or an output whose shape depends on
# the values (the host must learn the shape before it can go on)
SYNCING = {
    torch.ops.aten._local_scalar_dense,
    torch.ops.aten.nonzero,
    torch.ops.aten.masked_select,
    torch.ops.aten.unique_consecutive,
    torch.ops.aten._unique2,
    torch.ops.aten.item,
    torch.ops.aten.is_nonzero,
}


class CountSyncs(TorchDispatchMode):
    """Counts the syncing ops dispatched while it is active."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket in SYNCING:
            self.count += 1
        return func(*args, **(kwargs or {}))


SMALL_GRIDS = {"image": "8x8", "sequence": "16", "mqar": "16", "video": "4x4x4"}


def syncs(track, model: str, grid: Grid, steps: int) -> int:
    budget = dataclasses.replace(
        track.budget("smoke"), epochs=1, batch_size=4, n_train=4 * steps, n_val=8, n_test=8
    )
    data = track.make_data(grid, 0, budget.sizes)
    with CountSyncs() as counter:
        result = train_run(
            track,
            track.model(model),
            grid,
            lr=1e-3,
            seed=0,
            budget=budget,
            data=data,
            device=torch.device("cpu"),
        )
    assert result.status == "ok", result.error
    return counter.count


@pytest.mark.parametrize("track_name", sorted(SMALL_GRIDS))
def test_no_step_of_any_model_waits_for_the_device(track_name):
    track = load_registry().track(track_name)
    grid = Grid.parse(SMALL_GRIDS[track_name])
    per_model = {
        spec.name: (syncs(track, spec.name, grid, 2), syncs(track, spec.name, grid, 4))
        for spec in track.models
        if spec.supports(grid) is None
    }
    assert per_model, f"no model of {track_name} runs on {grid}"
    assert {name: two for name, (two, four) in per_model.items()} == {
        name: four for name, (two, four) in per_model.items()
    }


def test_the_first_non_finite_loss_is_found_with_its_step():
    assert first_non_finite([0.5, 0.4, float("nan"), float("inf")]) == (
        2,
        pytest.approx(float("nan"), nan_ok=True),
    )
    assert first_non_finite([0.5, 0.4]) is None
    assert first_non_finite([]) is None


def test_a_non_finite_loss_is_caught_at_the_end_of_its_epoch_with_its_step():
    track = load_registry().track("sequence")
    calls = []

    def fragile(predictions, targets):  # finite for two steps, then not
        calls.append(1)
        loss = track.loss(predictions, targets)
        return loss * float("nan") if len(calls) > 2 else loss

    grid = Grid.parse("16")
    budget = dataclasses.replace(
        track.budget("smoke"), epochs=3, batch_size=4, n_train=16, n_val=8, n_test=8
    )
    result = train_run(
        dataclasses.replace(track, loss=fragile),
        track.model("transformer"),
        grid,
        lr=1e-3,
        seed=0,
        budget=budget,
        data=track.make_data(grid, 0, budget.sizes),
        device=torch.device("cpu"),
    )
    assert result.status == "diverged" and result.epochs_done == 0 and not result.train_loss
    assert result.error == "non-finite training loss (nan) at epoch 0, step 2"
    assert len(calls) == 4  # the rest of the epoch ran: the check reads the losses once
