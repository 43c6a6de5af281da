"""Timing, FLOP counting (nothing gridmix runs is under-counted) and peak memory in a fresh
process."""

import math
import os
import signal
import time

import pytest
import torch
import torch.nn.functional as F

from gridmix import ConcentrationMixer, mixer_layer, tucker_flops
from gridmix.analysis.measure import (
    FLOP_FORMULAS,
    count_flops,
    estimate_peak_memory,
    time_fn,
)
from gridmix.analysis.memory import MemoryMeasurementError, MemoryProbe, peak_memory

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


def tiny_vit(side: int, *, mixer: bool, dim: int = 16) -> torch.nn.Module:
    from timm.models.vision_transformer import (
        VisionTransformer,
    )  # here: the memory subprocesses import this module

    layer = dict(attn_layer=mixer_layer("concentration", (side, side), rank=4)) if mixer else {}
    return VisionTransformer(
        img_size=side,
        patch_size=1,
        in_chans=1,
        embed_dim=dim,
        depth=1,
        num_heads=2,
        num_classes=3,
        class_token=False,
        global_pool="avg",
        **layer,
    )


def mixer_step(side: int, batch: int = 8, dim: int = 32):
    """peak_memory target: a mixer's training step on a side x side grid (no timm: the subprocess
    starts faster)."""
    torch.manual_seed(0)
    model, x = (
        ConcentrationMixer(dim, (side, side), num_heads=2, rank=4),
        torch.randn(batch, side * side, dim),
    )
    model(x[:1]).sum().backward()  # warm-up: kernels and thread pools belong to the setup
    return lambda: model(x).sum().backward()


def failing_step():
    raise RuntimeError("broken target")


def killed_step():
    os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer would


def hanging_step():
    time.sleep(60)


def ballast_step(mb: int):
    """Keeps ``mb`` MB alive in the measuring process after the step: the next measurement must not
    see it."""
    ballast = torch.ones(mb * 2**18)  # float32
    _KEPT.append(ballast)
    return lambda: None


_KEPT: list = []


def test_time_fn_sets_and_records_threads_and_orders_quantiles():
    calls = []
    before = torch.get_num_threads()
    timing = time_fn(lambda: calls.append(torch.get_num_threads()), warmup=3, repeats=7, threads=1)
    assert len(calls) == 10 and set(calls) == {1} and timing.threads == 1
    assert torch.get_num_threads() == before
    assert (
        timing.min_s <= timing.p25_s <= timing.median_s <= timing.p75_s and len(timing.times_s) == 7
    )
    with pytest.raises(ValueError, match="repeats=0"):
        time_fn(lambda: None, repeats=0, threads=1)


def test_time_fn_measures_the_step():
    slow = time_fn(lambda: torch.randn(256, 256) @ torch.randn(256, 256), repeats=3, threads=1)
    fast = time_fn(lambda: None, repeats=3, threads=1)
    assert slow.median_s > 10 * fast.median_s


def test_sdpa_on_cpu_is_counted_as_four_b_h_n2_c_forward():
    B, h, N, c = 2, 3, 64, 8
    q = torch.randn(B, h, N, c, requires_grad=True)
    module = torch.nn.Module()
    module.forward = lambda x: F.scaled_dot_product_attention(x, x, x)
    flops = count_flops(module, q, backward=False)
    assert flops.forward == 4 * B * h * N**2 * c
    assert flops.per_op == {
        "aten._scaled_dot_product_flash_attention_for_cpu": 4 * B * h * N**2 * c
    }
    assert not flops.uncounted


def test_sdpa_backward_is_counted_and_stock_flop_counter_misses_cpu_attention():
    from torch.utils.flop_counter import FlopCounterMode

    q = torch.randn(1, 2, 32, 4, requires_grad=True)
    with FlopCounterMode(display=False) as stock:
        F.scaled_dot_product_attention(q, q, q).sum().backward()
    assert stock.get_total_flops() == 0  # why FLOP_FORMULAS exists
    model = torch.nn.Linear(4, 4)
    model.forward = lambda x, w=model.weight: F.scaled_dot_product_attention(x @ w, x @ w, x @ w)
    backward = count_flops(model, q).per_op[
        "aten._scaled_dot_product_flash_attention_for_cpu_backward"
    ]
    # B·h · N² · (3·d_qk + 2·d_v), 2 FLOPs per multiply-add
    assert backward == 2 * 2 * 32 * 32 * (3 * 4 + 2 * 4)


@pytest.mark.parametrize("mixer", [False, True])
def test_vit_flops_leave_nothing_uncounted_and_fake_equals_real(mixer):
    model, x = tiny_vit(8, mixer=mixer), torch.randn(2, 1, 8, 8)
    real, fake = count_flops(model, x), count_flops(model, x, fake=True)
    assert real.uncounted == {} and fake.uncounted == {}
    assert (real.forward, real.backward, real.per_op) == (fake.forward, fake.backward, fake.per_op)
    assert real.backward > real.forward > 0 and real.total == real.forward + real.backward
    assert all(p.grad is None for p in model.parameters())  # counting leaves .grad alone


def test_mixer_flops_cover_the_tucker_cost():
    grid, dim, batch = (32, 16), 16, 4
    mixer = ConcentrationMixer(dim, grid, num_heads=2, rank=4)
    mix = torch.nn.Module()
    mix.forward = mixer.mix
    flops = count_flops(mix, torch.randn(batch, *grid, dim), backward=False)
    assert flops.forward >= batch * tucker_flops(grid, dim=dim, rank=4)
    # the orthonormal basis, registered
    assert flops.per_op.get("aten.linalg_solve_triangular", 0) > 0
    assert not flops.uncounted


def test_fft_formula_is_five_n_log2_n_per_transform():
    model = torch.nn.Module()
    model.forward = lambda x: torch.fft.irfft(torch.fft.rfft(x), n=64)
    flops = count_flops(model, torch.randn(3, 64), backward=False)
    per_transform = 5 * 64 * math.log2(64)
    assert flops.per_op == {"aten._fft_r2c": 3 * per_transform, "aten._fft_c2r": 3 * per_transform}
    assert set(FLOP_FORMULAS) >= {torch.ops.aten._fft_r2c, torch.ops.aten._fft_c2r}


@pytest.mark.parametrize("groups", [1, 4, 12])
def test_a_convolution_s_backward_costs_twice_its_forward_whatever_its_groups(groups):
    conv = torch.nn.Conv2d(12, 12, 3, padding=1, groups=groups, bias=False)
    x = torch.randn(2, 12, 8, 8, requires_grad=True)
    model = torch.nn.Module()
    model.forward = lambda x: conv(x)
    model.weight = conv.weight  # the parameter the backward differentiates
    flops = count_flops(model, x)
    forward = 2 * (2 * 12 * 8 * 8) * (12 // groups) * 9  # outputs × multiply-adds per output
    assert flops.forward == forward
    assert flops.backward == forward  # the weight's gradient (the input is not a parameter)
    assert torch.ops.aten.convolution_backward in FLOP_FORMULAS


def test_triangular_solve_formula_is_n_squared_per_right_hand_side():
    model = torch.nn.Module()
    a = torch.eye(6).triu() + 0.1 * torch.ones(6, 6).triu(1)
    model.forward = lambda b: torch.linalg.solve_triangular(a, b, upper=True)
    flops = count_flops(model, torch.randn(2, 6, 5), backward=False)
    assert flops.per_op == {"aten.linalg_solve_triangular": 2 * 6 * 6 * 5}
    assert not flops.uncounted


def test_an_op_without_formula_is_reported_uncounted():
    model = torch.nn.Module()
    model.forward = lambda x: torch.linalg.svdvals(x)
    assert "aten._linalg_svd" in count_flops(model, torch.randn(4, 4), backward=False).uncounted


def test_memory_estimate_grows_with_the_grid_and_allocates_nothing():
    small = estimate_peak_memory(tiny_vit(8, mixer=False), torch.randn(8, 1, 8, 8))
    large = estimate_peak_memory(tiny_vit(32, mixer=False), torch.randn(8, 1, 32, 32))
    assert 8 * small < large  # 16x the tokens


def test_peak_memory_in_a_subprocess_sees_the_steps_activations():
    memory = peak_memory("tests.test_measure:mixer_step", dict(side=64), threads=1, timeout_s=120)
    assert (
        memory.device == "cpu" and "VmHWM" in memory.method and memory.baseline_bytes > 50 * 2**20
    )
    assert memory.peak_bytes == memory.setup_bytes + memory.step_bytes
    # W_v x, the mixed tensor and the projection are (8, 4096, 32) float32 = 4 MB each; the step
    # keeps them all.
    # growth with the grid: tests/test_scaling.py
    assert 12 * 2**20 < memory.step_bytes < 500 * 2**20


def test_peak_memory_reports_a_failing_target_and_a_malformed_one():
    with pytest.raises(MemoryMeasurementError, match="broken target"):
        peak_memory("tests.test_measure:failing_step", {}, threads=1, timeout_s=120)
    with pytest.raises(ValueError, match="module:function"):
        peak_memory("no_colon_here", {}, threads=1)


def test_a_probe_measures_each_step_in_a_fresh_child_of_one_server():
    with MemoryProbe() as probe:
        first = probe.measure(
            "tests.test_measure:ballast_step", dict(mb=200), threads=1, timeout_s=120
        )
        server = probe._server.pid
        second = probe.measure(
            "tests.test_measure:ballast_step", dict(mb=8), threads=1, timeout_s=120
        )
        assert probe._server.pid == server  # one server, no new interpreter per measurement
    assert 195 * 2**20 < first.setup_bytes < 260 * 2**20
    assert 7 * 2**20 < second.setup_bytes < 60 * 2**20  # the first child's 200 MB died with it
    assert abs(second.baseline_bytes - first.baseline_bytes) < 50 * 2**20


def test_a_probe_reports_a_killed_or_hanging_step_and_goes_on():
    with MemoryProbe() as probe:
        with pytest.raises(
            MemoryMeasurementError, match="killed by signal 9 \\(out of memory\\?\\)"
        ):
            probe.measure("tests.test_measure:killed_step", {}, threads=1, timeout_s=120)
        with pytest.raises(MemoryMeasurementError, match="ran past 3 s"):
            probe.measure("tests.test_measure:hanging_step", {}, threads=1, timeout_s=3)
        memory = probe.measure(
            "tests.test_measure:mixer_step", dict(side=16), threads=1, timeout_s=120
        )
    assert memory.step_bytes > 0 and memory.peak_bytes == memory.setup_bytes + memory.step_bytes


class FakeClock:
    """``time.perf_counter`` for :mod:`gridmix.analysis.measure` that moves only when a step says
    how long it took: warm-up tests that do not depend on the machine's load."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def take(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    from types import SimpleNamespace

    from gridmix.analysis import measure

    fake = FakeClock()
    monkeypatch.setattr(measure, "time", SimpleNamespace(perf_counter=fake.perf_counter))
    return fake


def test_time_fn_warms_up_until_the_step_time_settles(clock):
    """A step whose first calls are slow (first-call allocations, kernel selection) is timed only
    once two successive warm-up calls agree: the slow calls never reach the median or the spread."""
    delays = iter([0.2, 0.1, 0.05])  # then 10 ms for good
    timing = time_fn(lambda: clock.take(next(delays, 0.01)), warmup=1, repeats=5, threads=1)
    assert timing.warmup == 5  # the three slow calls, then two that agree
    assert timing.times_s == pytest.approx((0.01,) * 5)


def test_time_fn_stops_warming_up_after_max_warmup_calls(clock):
    from gridmix.analysis import measure

    calls = []  # never settles: 1 ms and 5 ms in turn

    def step():
        calls.append(1)
        clock.take(0.001 if len(calls) % 2 else 0.005)

    timing = time_fn(step, warmup=0, repeats=1, threads=1)
    assert timing.warmup == measure.MAX_WARMUP and len(calls) == measure.MAX_WARMUP + 1
