"""Per-window instance normalisation: forecasts move with the window's level and scale, and the CSV
track uses it."""

from __future__ import annotations

import torch
from gridmix_tracks.instance_norm import RevIN
from gridmix_tracks.sequence_csv import csv_sequence_track

from gridmix.core.grid import Grid


def test_forecasts_are_equivariant_to_the_windows_level_and_scale():
    model = RevIN(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8, 3)))
    x = torch.randn(4, 1, 8)  # (S, 1, L)
    assert torch.allclose(model(3 * x + 100), 3 * model(x) + 100, atol=1e-3)
    assert not torch.allclose(model.model(3 * x + 100), 3 * model.model(x) + 100, atol=1e-3)


def test_csv_track_models_are_wrapped(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("\n".join(str(i % 7) for i in range(300)))
    track = csv_sequence_track(path)
    for spec in track.models:
        assert isinstance(spec.build(Grid((16,))), RevIN) and "RevIN" in spec.description
