"""Testing a trained model on grids it was not trained on (``gridmix run --eval-grids``), inside its
run.

After a run trains (and after its mechanism analysis), the trained model is moved to each evaluation
grid by :func:`gridmix.models.regrid.regrid_model` (its mixers by their declared ``regrid``, learned
positions resampled) and tested on the test split the track makes on that grid with the run's seed
and split sizes, with the track's metric. Each grid's outcome is one entry of the row's
``extras["transfer"]``:

- ``{"status": "ok", "test_metric": …, "adapted": "2 × concentration by its regrid; pos_embed
  resampled"}``;
- ``{"status": "cannot", "reason": …}``: the model cannot run there (its mixer declares no
  resolution change, a parameter's shape depends on the grid, the model does not support the grid,
  the track's task is not defined there); reported as such, never as a failure of the run;
- ``{"status": "failed", "reason": …}``: the evaluation itself raised, or its metric was not finite;
  the run stands.

Everything happens under a forked random state, so the run's other numbers do not depend on whether
it was also tested elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from gridmix.core.grid import Grid
from gridmix.models.regrid import CannotRegrid, regrid_model
from gridmix.study.train import predict
from gridmix.tracks import ModelSpec, Track, TrackData

TRANSFER_STATUSES = (
    "ok",
    "cannot",
    "failed",
)  # a seed's evaluation at a grid, as its run records it
TRANSFER_MISSING = (
    "missing"  # the report's addition: the seed's run did not finish, so it has no evaluation
)


def evaluate_transfer(
    track: Track,
    spec: ModelSpec,
    model: torch.nn.Module,
    *,
    grid: str,
    eval_grids: tuple[str, ...],
    data_at: Callable[[str], TrackData],
    model_kwargs: dict,
    batch_size: int,
    precision: str,
) -> dict:
    """Per grid of ``eval_grids``, the outcome of testing ``model`` (trained on ``grid``) there
    (module docstring); ``data_at(grid)`` makes the track's data on a grid for the run's seed and
    sizes."""
    from gridmix.tracks.plugin_loader import load_registry

    regrids = {mixer.name: mixer.regrid for mixer in load_registry().mixers}
    device = next(model.parameters()).device
    devices = [device] if device.type == "cuda" else []
    outcomes = {}
    with torch.random.fork_rng(devices=devices):
        for target in eval_grids:
            try:
                outcomes[target] = _evaluate(
                    track,
                    spec,
                    model,
                    Grid.parse(grid),
                    Grid.parse(target),
                    data_at,
                    regrids=regrids,
                    model_kwargs=model_kwargs,
                    batch_size=batch_size,
                    device=device,
                    precision=precision,
                )
            except CannotRegrid as reason:
                outcomes[target] = dict(status="cannot", reason=str(reason))
            except Exception as error:  # recorded beside the run's own numbers, which stand
                outcomes[target] = dict(status="failed", reason=f"{type(error).__name__}: {error}")
    return outcomes


def _evaluate(
    track: Track,
    spec: ModelSpec,
    model: torch.nn.Module,
    old: Grid,
    new: Grid,
    data_at,
    *,
    regrids,
    model_kwargs: dict,
    batch_size: int,
    device: torch.device,
    precision: str,
) -> dict:
    reason = track.fixed_grid or track.supports(new) or spec.supports(new)
    if reason:
        raise CannotRegrid(reason)
    fresh = spec.build(new, **model_kwargs).to(device)
    moved, how = regrid_model(model, fresh, old, new, regrids=regrids)
    test = data_at(str(new)).test
    predictions = predict(moved, test, batch_size=batch_size, device=device, precision=precision)
    value = float(track.metric(predictions, test.targets))
    if not math.isfinite(value):
        return dict(status="failed", reason=f"non-finite test metric ({value}) on {new}")
    return dict(status="ok", test_metric=value, adapted=how)
