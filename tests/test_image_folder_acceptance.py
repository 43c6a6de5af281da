"""The image-folder acceptance check, small: on a generated glyph folder, the matched baseline
trained with the track's default recipe reaches majority-class accuracy plus half the gap to a
logistic-regression probe.

The full check (the default study, every model, six seeds, shifted glyphs) is
``benchmarks/check_real_data.py`` (docs/real-data.md quotes its result); it takes minutes. Here:
glyphs without shift (12x12 PNGs, 50 per class), grid 8x8, the matched baseline alone on seed 0 at
1e-2 (the largest rate the default sweep tries), the default budget with its epoch cap lowered from
60 to 30 (patience 8 as in the default).
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest
import torch
from gridmix_tracks.image_folder import image_folder_track

from gridmix.analysis.references import naive_references
from gridmix.core.grid import Grid
from gridmix.study.train import train_run

CHECK = Path(__file__).resolve().parents[1] / "benchmarks" / "check_real_data.py"


@pytest.fixture(scope="module")
def check_real_data():
    spec = importlib.util.spec_from_file_location("check_real_data", CHECK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_matched_baseline_reaches_majority_plus_half_the_gap_to_a_linear_probe(
    tmp_path, check_real_data, one_thread
):
    root = check_real_data.write_glyph_folder(tmp_path / "glyphs", per_class=50, size=12)
    track = image_folder_track(root)
    grid = Grid((8, 8))
    budget = dataclasses.replace(track.budget("default"), epochs=30)
    assert budget.patience == 8 and 1e-2 in budget.lrs
    data = track.make_data(grid, 0, budget.sizes)
    matched = track.model(track.matched_baseline)
    run = train_run(
        track, matched, grid, lr=1e-2, seed=0, budget=budget, data=data, device=torch.device("cpu")
    )
    assert run.status == "ok", run.error
    result = check_real_data.acceptance(data, {matched.name: run.test_metric}, matched.name)
    assert result["majority"] == pytest.approx(
        naive_references(track, grid, budget.sizes)["values"]["majority class"]
    )
    # the classes are learnable, linearly even
    assert result["logistic_probe"] > result["majority"] + 0.3
    assert result["passes"], result


def test_generated_glyph_folder_is_an_image_folder_of_four_balanced_classes(
    tmp_path, check_real_data
):
    root = check_real_data.write_glyph_folder(tmp_path / "glyphs", per_class=3)
    track = image_folder_track(root)
    assert "4 classes, 12 images" in track.description
    assert sorted(p.name for p in root.iterdir()) == ["L", "O", "T", "X"]
