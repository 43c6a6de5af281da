"""The mixer registry: built-in and third-party mixers register through ``gridmix_mixers``, broken
ones are isolated, ``gridmix mixers`` lists them, any registered mixer trains as the idea or a
baseline in a track's backbone, a mixer that cannot serve a track is refused in one line, and the
leak check refuses a mixer that sees the future."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from typer.testing import CliRunner

from gridmix import MixerSpec, hookimpl, orchestrate
from gridmix.cli import app
from gridmix.core.grid import Grid
from gridmix.mixers.builtin import BUILTIN
from gridmix.mixers.causality import check_grid, first_leak
from gridmix.tracks.plugin_loader import load_registry
from tests.installed import install

EXAMPLE = Path(__file__).resolve().parents[1] / "plugins" / "gridmix-example-mixer"


class GlobalMean(torch.nn.Module):
    """Adds every token's mean to each token: it sees the future, whatever it declares."""

    def forward(self, x, attn_mask=None, is_causal=False):
        return x + x.mean(dim=1, keepdim=True)  # (B, N, C)


def leaky(dim, grid, **arguments):
    return GlobalMean()


LEAKY = SimpleNamespace(gridmix_mixers=hookimpl(lambda: [MixerSpec("leaky", leaky, causal="any")]))


@pytest.fixture
def registry(monkeypatch):
    """The installed registry plus a deliberately leaking mixer."""
    yield load_registry(extra_plugins=[LEAKY], refresh=True)
    monkeypatch.undo()
    load_registry(refresh=True)


@pytest.fixture
def example_installed(tmp_path, monkeypatch):
    """The example mixer package, 'installed' through a dist-info folder on sys.path (its real entry
    point)."""
    yield install(
        monkeypatch,
        tmp_path,
        {"gridmix-example-mixer": {"pooling": "gridmix_example_mixer"}},
        code=(EXAMPLE,),
    )
    monkeypatch.undo()
    sys.modules.pop("gridmix_example_mixer", None)
    load_registry(refresh=True)


def test_the_built_in_mixers_register_with_their_capabilities():
    mixers = load_registry(refresh=True).mixers
    assert {"attention", "concentration", "concentration-uncapped", "tokenwise"} <= set(
        mixers.names
    )
    assert (
        mixers["concentration"].ablation == "concentration-uncapped"
        and mixers["concentration"].mechanism
    )
    assert mixers["attention"].causal == "first" and mixers["concentration"].causal == "any"
    assert all(m.plugin == "builtin-mixers" for m in mixers)
    with pytest.raises(ValueError, match="unknown mixer 'atention'; did you mean 'attention'"):
        mixers["atention"]


def test_gridmix_mixers_lists_every_mixer_as_a_table_and_json(example_installed):
    listed = CliRunner().invoke(app, ["mixers", "--json"])
    assert listed.exit_code == 0, listed.output
    summary = json.loads(listed.output)
    by_name = {m["name"]: m for m in summary["mixers"]}
    assert by_name["pooling"]["plugin"] == "pooling" and by_name["pooling"]["grid_ranks"] == [
        1,
        2,
        3,
    ]
    assert (
        by_name["concentration"]["causal"] == "any"
        and by_name["concentration"]["resolution_change"]
    )
    table = CliRunner().invoke(app, ["mixers"], env={"COLUMNS": "200"})
    assert (
        table.exit_code == 0
        and "pooling" in table.output
        and "concentration-uncapped" in table.output
    )


@pytest.mark.parametrize(
    ("returned", "error"),
    [
        (lambda: [object()], "returned object"),
        (
            lambda: [MixerSpec("attention", leaky)],
            "mixer 'attention' is already provided by plugin 'builtin-mixers'",
        ),
        (lambda: 1 / 0, "ZeroDivisionError"),
    ],
)
def test_a_broken_mixer_plugin_is_reported_by_name_and_breaks_nothing_else(returned, error):
    broken = SimpleNamespace(__name__="broken-mixers", gridmix_mixers=hookimpl(returned))
    registry = load_registry(extra_plugins=[broken], refresh=True)
    try:
        assert [b.name for b in registry.broken] == ["broken-mixers"] and error in registry.broken[
            0
        ].error
        assert "concentration" in registry.mixers and "image" in registry.tracks
    finally:
        load_registry(refresh=True)


def test_a_mixer_checks_its_declared_capabilities():
    with pytest.raises(ValueError, match="causal 'sometimes'; expected one of"):
        MixerSpec("x", leaky, causal="sometimes")
    with pytest.raises(ValueError, match="name 'Has Space'"):
        MixerSpec("Has Space", leaky)
    spec = MixerSpec("two-d", leaky, grid_ranks=(2,), max_tokens=64)
    assert spec.unfit(Grid((8, 8))) is None
    assert "takes 2-d grids; got the 1-d grid 8" in spec.unfit(Grid((8,)))
    assert "at most 64 tokens" in spec.unfit(Grid((16, 16)))
    assert "sees every token (not causal)" in spec.unfit(Grid((8, 8)), causal_axes=(0,))
    assert "takes no prefix tokens" in spec.unfit(Grid((8, 8)), num_prefix_tokens=1)


def test_the_leak_check_refuses_a_leaking_mixer_naming_the_first_position(registry):
    grid = check_grid(Grid((32,)), (0,))
    leak = first_leak(lambda dtype: GlobalMean(), grid, (0,), dim=8)
    assert leak.output == (0,) and leak.later == (1,)
    with pytest.raises(
        ValueError,
        match=r"mixer 'leaky' leaks the future on causal axes \(0,\): on the check grid 32 "
        r"its output at \(0,\) has gradient",
    ):
        orchestrate.plan_study("mqar", budget="smoke", idea="leaky")


@pytest.mark.parametrize("grid,axes", [(Grid((8,)), (0,)), (Grid((4, 5)), (0,))])
def test_every_built_in_causal_mixer_passes_the_leak_check(grid, axes):
    for mixer in load_registry(refresh=True).mixers:
        if mixer.unfit(grid, causal_axes=axes) is not None:
            continue
        layer = mixer.layer(grid, causal_axes=axes)
        assert (
            first_leak(
                lambda dtype, layer=layer: layer(8, num_heads=2, qkv_bias=True, dtype=dtype),
                grid,
                axes,
                dim=8,
            )
            is None
        ), mixer.name


def test_the_idea_is_any_registered_mixer_with_its_declared_ablation_and_the_control(
    example_installed,
):
    notes = []
    planned = orchestrate.plan_study(
        "image", budget="smoke", idea="pooling", baselines=("concentration",), note=notes.append
    )
    study = planned.study
    assert study.idea == "vit-pooling" and study.models == (
        "vit-pooling",
        "vit",
        "vit-tokenwise",
        "vit-concentration",
    )
    assert study.roles == {
        "vit-pooling": "idea",
        "vit": "baseline",
        "vit-tokenwise": "control",
        "vit-concentration": "baseline",
    }
    assert (
        notes
        == [
            "the idea's mixer 'pooling' declares no ablation, so the question whether its "
            "mechanism helps is left out",
            "the idea's mixer 'pooling' declares no mechanism analysis: the parametrisation "
            "check does not apply",
        ]
        == list(study.notes)
    )
    assert (
        planned.track.idea.name == "vit-pooling"
        and planned.track.model("vit-concentration").role == "baseline"
    )
    default = orchestrate.plan_study("image", budget="smoke").study  # the default study is today's
    assert default.models == (
        "vit-concentration",
        "vit",
        "vit-concentration-uncapped",
        "vit-tokenwise",
    )
    with_ablation = orchestrate.plan_study("sequence", budget="smoke", idea="concentration").study
    assert (
        with_ablation.roles["transformer-concentration-uncapped"] == "ablation"
        and not with_ablation.notes
    )


@pytest.mark.parametrize(
    ("track", "idea", "message"),
    [
        (
            "mqar",
            "pooling",
            "--idea pooling: mixer 'pooling' cannot serve track 'mqar' on 32: mixer 'pooling' "
            "sees every token (not causal); this model needs causal axes (0,)",
        ),
        ("image", "poolin", "unknown mixer 'poolin'; did you mean 'pooling'"),
        ("image", "attention", "'vit' is the matched baseline of track 'image'"),
    ],
)
def test_a_mixer_that_cannot_serve_the_track_is_refused_in_one_line(
    example_installed, tmp_path, track, idea, message
):
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--track",
            track,
            "--idea",
            idea,
            "--budget",
            "smoke",
            "--out",
            str(tmp_path / "out"),
        ],
        env={"COLUMNS": "300"},
    )
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert message in result.output
    assert not (tmp_path / "out").exists()


def test_the_example_mixer_runs_as_the_idea_end_to_end(example_installed, tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--track",
            "sequence",
            "--idea",
            "pooling",
            "--budget",
            "smoke",
            "--threads",
            "1",
            "--no-scaling",
            "--out",
            str(tmp_path / "run"),
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "run" / "bench_report.json").read_text())
    assert report["model"] == "transformer-pooling" and report["primary_baseline"] == "transformer"
    assert report["notes"][0].startswith("the idea's mixer 'pooling' declares no ablation")
    markdown = (tmp_path / "run" / "report.md").read_text()
    assert "Not asked: the idea's mixer 'pooling' declares no mechanism analysis" in markdown


def test_the_example_mixer_gets_its_profile_from_the_suite(example_installed, tmp_path):
    result = CliRunner().invoke(
        app,
        ["suite", "--idea", "pooling", "--baselines", "global-filter", "--tracks", "recall"]
        + ["--budget", "smoke", "--threads", "1", "--jobs", "1", "--out", str(tmp_path)],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    profile = json.loads((tmp_path / "suite.json").read_text())
    (track,) = profile["tracks"]
    assert [rung["rung"] for rung in track["rungs"]] == ["pairs-1", "pairs-2"]
    for rung in track["rungs"]:
        assert set(rung["arms"]) == {"pooling", "attention", "global-filter"}
        assert rung["arms"]["pooling"]["n"] == 2
    assert set(profile["aggregate"]) == {"pooling", "attention", "global-filter"}
    assert track["params"]["pooling"] > 0 and track["flops"]["pooling"] > 0
    assert "pooling" in (tmp_path / "suite.md").read_text()


SMALL = {"sequence": "24", "image": "8x8", "video": "4x8x8", "mqar": "32"}


@pytest.mark.parametrize("track_name", sorted(SMALL))
def test_every_track_trains_every_mixer_that_fits_in_its_backbone(track_name):
    """One forward and backward of each mixer's model on the track's own data; the ones that do not
    fit say why."""
    registry = load_registry(refresh=True)
    track, grid = registry.track(track_name), Grid.parse(SMALL[track_name])
    data = track.make_data(grid, 0, track.budget("smoke").sizes)
    built, refused = [], []
    for mixer in registry.mixers:
        spec = track.model_for_mixer(mixer.name)
        reason = spec.supports(grid)
        if reason:
            refused.append(mixer.name)
            assert mixer.name in reason
            continue
        torch.manual_seed(0)
        model = spec.build(grid)
        loss = track.loss(model(data.train.inputs[:2]), data.train.targets[:2])
        loss.backward()
        assert torch.isfinite(loss) and any(p.grad is not None for p in model.parameters()), (
            mixer.name
        )
        built.append(mixer.name)
    assert {"attention", "concentration", "tokenwise"} <= set(built)
    if track_name == "mqar":  # causal: the symmetric-only mixers cannot serve it
        assert {"global-filter", "token-mlp"} <= set(refused) and "linear-attention" in built
    if track_name in ("sequence", "mqar"):
        assert "divided-attention" in refused  # 2-d and up


@pytest.mark.parametrize("name", ["global-filter", "token-mlp", "s4nd", "hyena", "mamba"])
def test_the_per_channel_mixers_refuse_a_bad_dim_in_the_contracts_words(name):
    with pytest.raises(ValueError, match=r"^dim=0; expected a positive integer \(channels\)$"):
        BUILTIN[name].build(0, Grid.parse("4x4"), num_heads=1)


@pytest.mark.parametrize(
    "base, method",
    [
        ("gridmix.mixers.grids:GridMixer", "mix"),
        ("gridmix.mixers.projections:GridAttention", "attend"),
        ("gridmix.mixers.axial:_LinesMixer", "_build"),
    ],
)
def test_a_mixer_base_names_the_method_a_subclass_left_out_when_it_is_built(base, method):
    module, name = base.split(":")
    incomplete = type("Incomplete", (getattr(importlib.import_module(module), name),), {})
    with pytest.raises(TypeError, match=f"abstract method '?{method}'?"):
        incomplete(8, Grid.parse("4x4"), num_heads=2)
