"""The causal operator tracks of ``gridmix scale``: causal where they say so, and measured on 1-D
and video grids."""

import json

import pytest
import torch
from typer.testing import CliRunner

from gridmix.analysis.causal_scaling import sequence, video
from gridmix.analysis.scaling import ScalingConfig, resolve_track, scale_track
from gridmix.cli import app
from gridmix.tracks import DataSizes

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


@pytest.mark.parametrize("make, grid", [(sequence, "16"), (video, "4x2x3")])
def test_only_the_symmetric_mixer_sees_the_last_time_step_from_earlier_ones(make, grid):
    track = make()
    grid = track.check_grid(grid)
    # (S, C, *grid)
    x = track.make_data(grid, 0, DataSizes(n_train=2, n_val=1, n_test=1)).train.inputs
    changed = x.clone()
    changed[:, :, -1] += 1.0  # the last time step (the last frame on a video grid)
    moved = {}
    for spec in track.models:
        torch.manual_seed(0)
        model = spec.build(grid).eval()
        with torch.no_grad():
            # on earlier steps
            moved[spec.name] = (model(changed) - model(x))[:, :, :-1].abs().max().item()
    assert (
        moved["mixer-causal"] == moved["mixer-causal-ss"] == moved["sdpa-causal"] == 0.0
        and moved["mixer"] > 0.0
    )


def test_scale_measures_the_causal_mixer_and_causal_sdpa_on_sequences_and_a_causal_time_video_grid(
    tmp_path,
):
    ref = "gridmix.analysis.causal_scaling:sequence"
    args = [
        "scale",
        "--track",
        ref,
        "--grids",
        "32,64",
        "--no-memory",
        "--repeats",
        "1",
        "--warmup",
        "0",
        "--threads",
        "1",
        "--out",
        str(tmp_path),
        "--json",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    saved = json.loads(result.stdout)
    assert saved["track"] == "causal-sequence" and saved["grids"] == ["32", "64"]
    measured = {(p["model"], p["grid"]) for p in saved["points"] if p["time_ms"] is not None}
    models = ("mixer-causal", "mixer-causal-ss", "sdpa-causal", "mixer")
    assert measured == {(m, g) for m in models for g in ("32", "64")}
    ref = "gridmix.analysis.causal_scaling:video"
    clip = scale_track(
        resolve_track(ref),
        ["2x4x4"],
        models=["mixer-causal"],
        config=ScalingConfig(batch=2, threads=1, repeats=1, warmup=0, track_ref=ref),
    )
    assert clip.points[0].timing is not None and clip.points[0].memory is not None, clip.points[
        0
    ].notes


def test_a_track_reference_that_does_not_load_is_a_one_line_error():
    result = CliRunner().invoke(
        app, ["scale", "--track", "gridmix.analysis.nowhere:sequence"], env={"COLUMNS": "300"}
    )
    assert result.exit_code == 2 and "cannot be loaded" in result.output
    assert len(result.output.strip().splitlines()) == 1
