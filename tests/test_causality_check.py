"""The leak check before training sees a leak at any offset up to the grid's length, in a registered
mixer and in a track's own model, refuses it in one line, and the study, its JSON report and
report.md say what it checked."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from gridmix_tracks import mqar
from torch import nn
from typer.testing import CliRunner

from gridmix import MixerSpec, hookimpl, orchestrate
from gridmix.cli import app
from gridmix.core.grid import Grid
from gridmix.mixers.causality import check_grid, first_leak, thresholds
from gridmix.report.build import build_report
from gridmix.report.markdown import render_markdown
from gridmix.report.types import Report
from gridmix.study.ledger import Ledger
from gridmix.tracks.plugin_loader import load_registry
from tests import report_example


class Lookahead(nn.Module):
    """``y_t = W(x_t + x_{t+offset})`` (zero past the end): it sees ``offset`` steps ahead, whatever
    it declares."""

    def __init__(self, dim: int, offset: int, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.offset, self.proj = offset, nn.Linear(dim, dim, dtype=dtype)

    def forward(self, x, attn_mask=None, is_causal=False):
        B, N, C = x.shape
        # (B, N, C)
        ahead = torch.cat([x[:, self.offset :], x.new_zeros(B, min(self.offset, N), C)], dim=1)
        return self.proj(x + ahead)  # (B, N, C)


class DilatedConv(nn.Module):
    """A depthwise convolution along the sequence, kernel 9, dilation 2: left-padded it is causal
    (it reaches 16 steps back); centred it also reaches 8 steps ahead."""

    def __init__(self, dim: int, *, centred: bool, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.conv = nn.Conv1d(dim, dim, 9, dilation=2, groups=dim, dtype=dtype)
        self.pad = (8, 8) if centred else (16, 0)

    def forward(self, x, attn_mask=None, is_causal=False):
        tokens = F.pad(x.transpose(1, 2), self.pad)  # (B, C, N + 16)
        return self.conv(tokens).transpose(1, 2)  # (B, N, C)


def lookahead(
    dim, grid, *, num_heads, causal_axes=(), num_prefix_tokens=0, dtype=None, **timm_kwargs
):
    return Lookahead(dim, 8, dtype=dtype)


def dilated(centred: bool):
    def build(
        dim, grid, *, num_heads, causal_axes=(), num_prefix_tokens=0, dtype=None, **timm_kwargs
    ):
        return DilatedConv(dim, centred=centred, dtype=dtype)

    return build


class Peek(nn.Module):
    """A model reading every token 3 steps ahead of where it predicts (wrapping around): a leak
    outside its mixer."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, tokens):
        return self.inner(tokens.roll(-3, dims=1))  # (B, L, V)


def peeking_track():
    """``mqar`` renamed ``mqar-peek``, its idea wrapped in :class:`Peek` (its mixer, concentration,
    stays causal)."""
    track = mqar.make_track()
    idea = track.idea
    peeking = dataclasses.replace(
        idea, build=lambda grid, **model_kwargs: Peek(idea.build(grid, **model_kwargs))
    )
    models = tuple(peeking if spec.name == idea.name else spec for spec in track.models)
    return dataclasses.replace(track, name="mqar-peek", models=models)


PLUGIN = SimpleNamespace(
    gridmix_mixers=hookimpl(
        lambda: [
            MixerSpec("lookahead", lookahead, causal="any", grid_ranks=(1,)),
            MixerSpec("dilated", dilated(False), causal="any", grid_ranks=(1,)),
            MixerSpec("centred", dilated(True), causal="any", grid_ranks=(1,)),
        ]
    ),
    gridmix_tracks=hookimpl(lambda: [peeking_track()]),
)


@pytest.fixture
def registry(monkeypatch):
    """The installed registry plus the mixers and the track above."""
    yield load_registry(extra_plugins=[PLUGIN], refresh=True)
    monkeypatch.undo()
    load_registry(refresh=True)


def test_a_mixer_adding_the_input_8_steps_ahead_is_refused_before_training(registry, tmp_path):
    with pytest.raises(
        ValueError,
        match=r"^mixer 'lookahead' leaks the future on causal axes \(0,\): on the check "
        r"grid 32 its output at \(0,\) has gradient .* with respect to the later "
        r"input at \(8,\);",
    ):
        orchestrate.plan_study("mqar", budget="smoke", idea="lookahead")
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--track",
            "mqar",
            "--idea",
            "lookahead",
            "--budget",
            "smoke",
            "--out",
            str(tmp_path / "out"),
        ],
        env={"COLUMNS": "300"},
    )
    # after the study's notes
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and len(errors) == 1, result.output
    assert "mixer 'lookahead' leaks the future" in errors[0] and not (tmp_path / "out").exists()


def test_a_centred_dilated_convolution_is_refused_and_a_left_padded_one_accepted(registry):
    with pytest.raises(
        ValueError, match=r"mixer 'centred' leaks .* output at \(0,\) .* later input at \(2,\)"
    ):
        orchestrate.plan_study("mqar", budget="smoke", baselines=("centred",))
    study = orchestrate.plan_study("mqar", budget="smoke", baselines=("dilated",)).study
    assert study.causality["axes"] == [0]
    assert study.causality["mixers"]["dilated"] == {"grid": "32", "probes": 31, "result": "passed"}
    assert set(study.causality["models"]) == set(study.models)
    assert all(
        entry == {"grid": "32", "probes": 31, "result": "passed"}
        for entry in study.causality["models"].values()
    )


def test_a_model_that_reads_ahead_outside_its_mixer_is_refused(registry):
    with pytest.raises(
        ValueError,
        match=r"^model 'transformer-concentration' leaks the future on causal axes "
        r"\(0,\): on grid 32 its prediction at \(0,\) changes by .* when only the "
        r"inputs after position 0 on axis 0 change",
    ):
        orchestrate.plan_study("mqar-peek", budget="smoke")


def test_the_probes_see_every_offset_from_the_early_outputs_at_a_bounded_count():
    # short: every threshold
    assert [p.threshold for p in thresholds(Grid((20,)), (0,))] == list(range(19))
    long = [p.threshold for p in thresholds(Grid((4096,)), (0,))]
    assert len(long) == 32 and long[:16] == list(range(16)) and long[-1] == 4094
    assert len(thresholds(Grid((300, 300)), (0, 1))) == 32
    assert check_grid(Grid((64, 64)), (0,)) == Grid((64, 6)) and check_grid(
        Grid((64, 64)), (1,)
    ) == Grid((6, 64))
    assert check_grid(Grid((8192,)), (0,)) == Grid((2048,)) and check_grid(
        Grid((4096, 64)), (0,)
    ) == Grid((341, 6))
    for offset in (1, 8, 100, 1000, 2047):
        leak = first_leak(
            lambda dtype, offset=offset: Lookahead(8, offset, dtype=dtype),
            Grid((2048,)),
            (0,),
            dim=8,
        )
        assert (leak.output, leak.later) == ((0,), (offset,)), offset


def _report_with(tmp_path, causality: dict) -> Report:
    with Ledger(report_example.fill(tmp_path), create=False) as ledger:
        ledger.set_study(dict(report_example.study().to_dict(), causality=causality))
        return build_report(ledger)


def test_the_report_says_what_the_check_checked(registry, tmp_path):
    causality = orchestrate.plan_study(
        "mqar", budget="smoke", baselines=("dilated",)
    ).study.causality
    report = _report_with(tmp_path, causality)
    written = json.loads(json.dumps(report.to_dict()))
    assert written["causality"] == causality and Report.from_dict(written) == report
    markdown = render_markdown(report)
    assert "## Causality check" in markdown and "causal axes (0,)" in markdown
    assert "| mixer dilated | 32 | 31 | passed |" in markdown
    assert "| model transformer-dilated | 32 | 31 | passed |" in markdown
    # a track without causal axes: no record, no section
    plain = _report_with(tmp_path / "plain", {})
    assert "causality" not in plain.to_dict() and "Causality check" not in render_markdown(plain)
