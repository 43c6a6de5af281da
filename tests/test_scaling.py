"""The scaling study on a tiny 2-D track: every point measured or skipped with a reason, exponents
fitted.

The toy track lives here, importable as ``tests.test_scaling:TOY``, so the memory subprocess can
rebuild its points; its models avoid timm so that each subprocess starts quickly.
"""

import dataclasses
import json
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from typer.testing import CliRunner

from gridmix import ConcentrationMixer, Grid, hookimpl
from gridmix.analysis.scaling import (
    ScalingConfig,
    fit_exponents,
    fit_power_law,
    memory_step,
    resolve_track,
    scale_track,
    scaling_grids,
)
from gridmix.cli import app
from gridmix.tracks import DataSizes, ModelSpec, Split, Track, TrackData
from gridmix.tracks.plugin_loader import load_registry

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


DIM = 16


class Attention(nn.Module):
    """Dense multi-head self-attention through SDPA (B, N, C) -> (B, N, C)."""

    def __init__(self, dim: int, heads: int = 2):
        super().__init__()
        self.heads, self.qkv, self.proj = heads, nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        return self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, N, C))


class Block(nn.Module):
    """Pre-norm residual block: x + mix(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, mixer: nn.Module, dim: int, mlp_ratio: float):
        super().__init__()
        hidden = int(dim * mlp_ratio)
        self.norm1, self.attn, self.norm2 = nn.LayerNorm(dim), mixer, nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ToyNet(nn.Module):
    """(B, 1, H, W) -> (B, 3) logits: per-token embedding, one block, mean pooling."""

    def __init__(self, grid: Grid, mixer: nn.Module, mlp_ratio: float = 2.0):
        super().__init__()
        self.embed = nn.Linear(1, DIM)
        self.pos = nn.Parameter(0.02 * torch.randn(1, grid.numel, DIM))
        self.block = Block(mixer, DIM, mlp_ratio)
        self.head = nn.Linear(DIM, 3)

    def forward(self, x):
        tokens = self.embed(x.flatten(2).transpose(1, 2)) + self.pos  # (B, N, C)
        return self.head(self.block(tokens).mean(1))


def toy_data(grid: Grid, seed: int, sizes: DataSizes) -> TrackData:
    gen = torch.Generator().manual_seed(seed)

    def split(n):
        x = torch.randn(n, 1, *grid, generator=gen)
        return Split(x, (x.flatten(1).sum(1) > 0).long() + (x[:, 0, 0, 0] > 1).long())

    return TrackData(split(sizes.n_train), split(sizes.n_val), split(sizes.n_test))


def broken(grid, **kwargs):
    raise RuntimeError("this model cannot be built")


TOY = Track(
    name="toy",
    description="tiny 2-D classification",
    ndim=2,
    default_grid=Grid((8, 8)),
    make_data=toy_data,
    loss=F.cross_entropy,
    metric=lambda p, t: float((p.argmax(1) == t).float().mean()),
    metric_name="accuracy",
    direction="higher",
    models=(
        ModelSpec(
            "toy-mixer",
            lambda g, mlp_ratio=2.0: ToyNet(
                g, ConcentrationMixer(DIM, g, num_heads=2, rank=4), mlp_ratio
            ),
            role="idea",
            width_kwarg="mlp_ratio",
        ),
        ModelSpec("toy-attention", lambda g, mlp_ratio=2.0: ToyNet(g, Attention(DIM), mlp_ratio)),
        ModelSpec(
            "toy-small-only",
            lambda g: ToyNet(g, Attention(DIM)),
            supports=lambda g: None if g.numel <= 64 else f"only up to 64 tokens; got {g.numel}",
        ),
        ModelSpec("toy-broken", broken),
    ),
    matched_baseline="toy-attention",
)


def make_toy() -> Track:
    return TOY


def test_power_law_fit_recovers_exponent_and_r2():
    n = np.array([64, 256, 1024, 4096])
    exponent, intercept, r2, (low, high) = fit_power_law(n, 3.0 * n**1.5)
    assert (
        exponent == pytest.approx(1.5)
        and np.exp(intercept) == pytest.approx(3.0)
        and r2 == pytest.approx(1.0)
        and low == pytest.approx(1.5)
        and high == pytest.approx(1.5)
    )
    assert fit_power_law(n, n * np.array([1.0, 2.0, 0.5, 1.0]))[2] < 0.99


def test_no_exponent_from_two_grids():
    """A line through two points always fits them: no slope, R² or interval is made of two."""
    from gridmix.analysis.measure import Flops
    from gridmix.analysis.scaling import ScalingPoint

    with pytest.raises(ValueError, match=">= 3 distinct"):
        fit_power_law([64, 256], [1.0, 3.0])
    with pytest.raises(ValueError, match="distinct"):
        fit_power_law([64, 64, 64], [1.0, 2.0, 3.0])
    points = [
        ScalingPoint("m", str(n), n, flops=Flops(forward=n, backward=0, per_op={}))
        for n in (64, 256)
    ]
    (fit,) = [f for f in fit_exponents(points) if f.quantity == "flops"]
    assert fit.points == 2 and fit.exponent is None and fit.r2 is None
    assert fit.tail_exponent is None and fit.exponent_low is None


def test_the_exponent_interval_is_the_t_interval_of_the_log_log_slope():
    from scipy import stats

    n = np.array([64.0, 256.0, 1024.0, 4096.0])
    y = n * np.array([1.0, 1.3, 0.9, 1.1])
    slope, _, _, (low, high) = fit_power_law(n, y)
    fit = stats.linregress(np.log(n), np.log(y))
    half = stats.t.ppf(0.975, 2) * fit.stderr
    assert slope == pytest.approx(fit.slope)
    assert (low, high) == pytest.approx((fit.slope - half, fit.slope + half))


def test_tail_exponent_sees_the_asymptote_the_full_fit_blurs():
    from gridmix.analysis.measure import Flops
    from gridmix.analysis.scaling import ScalingPoint

    points = [
        ScalingPoint(
            "m", str(n), n, flops=Flops(forward=int(1000 * n + n**2), backward=0, per_op={})
        )
        for n in (16, 64, 256, 1024, 4096, 16384)
    ]
    (fit,) = [f for f in fit_exponents(points, tail=3) if f.quantity == "flops"]
    assert fit.points == 6 and fit.tail_points == 3
    assert 1.0 < fit.exponent < 1.6 < fit.tail_exponent < 2.0
    time_fit = next(f for f in fit_exponents(points) if f.quantity == "time")
    assert time_fit.exponent is None and time_fit.points == 0


def test_scaling_grids_halve_every_axis():
    assert [str(g) for g in scaling_grids("32x32")] == ["8x8", "16x16", "32x32"]
    assert [str(g) for g in scaling_grids("8x16x16", count=2)] == ["4x8x8", "8x16x16"]
    assert [str(g) for g in scaling_grids("2")] == ["2"]


def test_resolve_track_from_attribute_or_function():
    assert resolve_track("tests.test_scaling:TOY") is TOY
    assert resolve_track("tests.test_scaling:make_toy") is TOY


def needs_an_argument(size):
    return TOY


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("tests.test_scaling:DIM", "gave an object of type int; expected a registered name"),
        ("tests.test_scaling:needs_an_argument", "cannot be loaded (TypeError: "),
        ("tests.test_scaling:missing", "cannot be loaded (AttributeError: "),
        ("tests.no_such_module:TOY", "cannot be loaded (ModuleNotFoundError: "),
        (".relative:TOY", "cannot be loaded (TypeError: "),
    ],
)
def test_resolve_track_names_what_is_wrong_with_a_bad_reference(ref, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        resolve_track(ref)


def test_scale_track_measures_points_and_skips_with_reasons():
    seen = []
    result = scale_track(
        TOY,
        ["32x32", "8x8", "16x16"],
        batch=4,
        threads=1,
        repeats=2,
        warmup=1,
        memory=False,
        on_point=seen.append,
    )
    assert (
        result.grids == ["8x8", "16x16", "32x32"]
        and len(result.points) == 12
        and seen == result.points
    )
    by = {(p.model, p.grid): p for p in result.points}
    for model in ("toy-mixer", "toy-attention"):
        for grid in result.grids:
            point = by[model, grid]
            assert point.skipped is None and point.params > 0 and point.timing.threads == 1
            assert (
                point.flops.total > 0
                and not point.flops.uncounted
                and point.memory_estimate_bytes > 0
            )
    assert by["toy-small-only", "8x8"].skipped is None
    assert by["toy-small-only", "16x16"].skipped == "unsupported: only up to 64 tokens; got 256"
    assert by["toy-broken", "8x8"].skipped.startswith(
        "failed: RuntimeError: this model cannot be built"
    )
    attention, mixer = result.fit("toy-attention", "flops"), result.fit("toy-mixer", "flops")
    assert attention.exponent > 1.2 and 0.9 < mixer.exponent < 1.15 and mixer.r2 > 0.99
    assert attention.tail_exponent is None  # three grids: the tail fit would be the whole one
    assert (
        result.fit("toy-mixer", "time").points == 3
        and result.fit("toy-mixer", "memory").points == 0
    )
    assert json.loads(json.dumps(result.to_dict()))["points"][0]["model"] == "toy-mixer"


def test_points_that_would_not_fit_are_skipped_not_run():
    result = scale_track(
        TOY,
        ["8x8", "16x16"],
        models=["toy-attention"],
        threads=1,
        memory=False,
        memory_fraction=1e-9,
    )
    assert all(
        p.skipped.startswith("too big: estimated peak") and p.timing is None and p.flops
        for p in result.points
    )
    capped = scale_track(
        TOY,
        ["8x8", "32x32"],
        models=["toy-attention"],
        threads=1,
        repeats=1,
        warmup=0,
        memory=False,
        time_cap_s=1e-6,
    )
    first, second = capped.points
    assert first.timing is not None and second.timing is None
    assert second.skipped.startswith("too slow: estimated") and "> 1e-06 s cap" in second.skipped


def test_memory_is_measured_in_a_subprocess_and_grows_with_the_grid():
    step = memory_step(track="tests.test_scaling:TOY", model="toy-mixer", grid="8x8", batch=2)
    step()  # the target builds a runnable step in-process too
    result = scale_track(
        TOY,
        ["16x16", "64x64"],
        models=["toy-mixer"],
        threads=1,
        repeats=1,
        warmup=0,
        track_ref="tests.test_scaling:TOY",
    )
    small, large = result.points
    assert small.memory and large.memory and not small.notes
    assert (
        large.memory.step_bytes > small.memory.step_bytes
        and large.memory.peak_bytes > small.memory.peak_bytes
    )
    memory = result.fit("toy-mixer", "memory")
    assert memory.points == 2 and memory.exponent is None  # two grids: no exponent


def test_unknown_model_and_bad_grid_are_value_errors():
    with pytest.raises(ValueError, match="no model 'nope'"):
        scale_track(TOY, ["8x8"], models=["nope"], threads=1)
    with pytest.raises(ValueError, match="2-d grids"):
        scale_track(TOY, ["8x8x8"], threads=1)


class ToyPlugin:
    @hookimpl
    def gridmix_tracks(self):
        return [TOY]


@pytest.fixture
def toy_registry():
    yield load_registry(extra_plugins=[ToyPlugin()], refresh=True)
    load_registry(refresh=True)


def test_cli_scale_prints_tables_and_writes_json_and_png(toy_registry, tmp_path):
    args = [
        "scale",
        "--track",
        "toy",
        "--grids",
        "8x8,16x16",
        "--models",
        "toy-mixer,toy-attention",
        "--no-memory",
        "--repeats",
        "1",
        "--warmup",
        "0",
        "--threads",
        "1",
        "--out",
        str(tmp_path),
    ]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for text in ("toy-mixer", "toy-attention", "16x16", "log-log exponents", "GFLOP", "peak MB"):
        assert text in result.stdout, text
    saved = json.loads((tmp_path / "scaling.json").read_text())
    assert (
        saved["grids"] == ["8x8", "16x16"] and saved["threads"] == 1 and len(saved["points"]) == 4
    )
    assert (tmp_path / "scaling.png").read_bytes().startswith(b"\x89PNG")
    one_point = [
        "scale",
        "--track",
        "toy",
        "--grids",
        "8x8",
        "--models",
        "toy-mixer",
        "--no-memory",
        "--repeats",
        "1",
        "--threads",
        "1",
        "--out",
        str(tmp_path / "json"),
        "--json",
    ]
    as_json = CliRunner().invoke(app, one_point)
    assert as_json.exit_code == 0 and json.loads(as_json.stdout)["points"][0]["grid"] == "8x8"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--track", "tyo"], "unknown track 'tyo'; did you mean 'toy'?"),
        (["--track", "toy", "--grids", "16by16"], "invalid grid '16by16'"),
        (["--track", "toy", "--grids", "8x8x8"], "takes 2-d grids"),
        (["--track", "toy", "--models", "toy-mixer,nope"], "no model 'nope'"),
    ],
)
def test_cli_scale_user_mistakes_are_one_line_errors(toy_registry, args, message):
    result = CliRunner().invoke(app, ["scale", *args], env={"COLUMNS": "300"})
    assert (
        result.exit_code == 2
        and message in result.output
        and len(result.output.strip().splitlines()) == 1
    )


def test_scaling_config_checks_itself_and_is_passed_whole():
    with pytest.raises(ValueError, match="batch=0"):
        ScalingConfig(batch=0)
    with pytest.raises(TypeError, match="either config or its fields"):
        scale_track(TOY, ["8x8"], config=ScalingConfig(), repeats=2)
    result = scale_track(
        TOY,
        ["8x8"],
        models=["toy-attention"],
        config=ScalingConfig(batch=2, threads=1, repeats=1, warmup=0, memory=False),
    )
    assert (result.batch, result.repeats, result.threads) == (2, 1, 1)


def test_a_busy_machine_is_named_by_its_load_or_its_stolen_time():
    from gridmix.analysis.scaling import busy_words

    loaded = busy_words(dict(load_average=[2.5, 1.0], cpu_count=2, cpu_steal=0.0))
    assert loaded == (
        "the machine was busy (load average 2.5 on 2 cores): timings are not idle figures"
    )
    stolen = busy_words(dict(load_average=[0.1, None], cpu_count=2, cpu_steal=0.1))
    assert "10% of the CPU time stolen by the hypervisor" in stolen
    assert busy_words(dict(load_average=[1.5, 1.9], cpu_count=2, cpu_steal=0.01)) is None
    assert busy_words(dict(load_average=[None, None], cpu_count=None)) is None


def test_stolen_time_is_read_from_proc_stat_between_two_readings():
    from gridmix.analysis.scaling import cpu_times, steal_fraction

    assert steal_fraction((10, 1000), (30, 1200)) == pytest.approx(0.1)
    assert steal_fraction(None, (30, 1200)) is None and steal_fraction((1, 5), (1, 5)) is None
    reading = cpu_times()
    if reading is not None:  # Linux
        steal, total = reading
        assert 0 <= steal <= total


def test_grids_the_track_does_not_run_are_named_not_dropped():
    track = dataclasses.replace(TOY, supports=lambda g: "at least 8x8" if g.numel < 64 else None)
    result = scale_track(
        track, ["4x4", "8x8"], models=["toy-mixer"], threads=1, repeats=1, warmup=0, memory=False
    )
    assert result.grids == ["8x8"] and result.excluded_grids == {"4x4": "at least 8x8"}
    assert result.roles == {"toy-mixer": "idea"}
    assert result.to_dict()["excluded_grids"] == {"4x4": "at least 8x8"}
