"""Every registered token mixer side by side: forward+backward time, peak memory and FLOPs, against
attention.

    python benchmarks/bench_mixers.py --out DIR [--quick] [--threads N] [--mixers a b ...]
        [--grids 32x32 ...]

Each mixer (``gridmix mixers``; a third party's too) is built through its ``MixerSpec.layer`` as a
timm ``attn_layer`` (batch 8, C = 64, 4 heads, its builder's default arguments) and timed on (B, N,
C) tokens at 32x32, 64x64, 128x128 and 16x32x32, symmetric; the mixers that can be causal along the
first axis are also timed at 4,096 and 16,384 causal tokens (1-D, causal axis 0). A mixer that
cannot serve a point (a grid rank it does not take, a token limit, no causal form) is skipped with
its own reason; one whose estimated step would take longer than the cap is skipped too. The mixers
of a point are timed interleaved (``bench_common.interleaved``), and the ratio to attention is the
median of per-round ratios. FLOPs of forward+backward come from ``FlopCounterMode`` on fake tensors
(``gridmix.analysis.measure.dry_run``); peak memory from a fresh subprocess per point
(``gridmix.analysis.memory.peak_memory``). Writes ``DIR/bench_mixers.json`` and
``DIR/bench_mixers.md``. ``--quick`` (``nox -s bench``): 16x16 and 1,024 causal tokens, few repeats,
no memory subprocesses.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from bench_common import (
    add_machine_arguments,
    interleaved,
    machine_line,
    markdown_table,
    paired_ratio,
    set_up_machine,
    wait_for_quiet,
    write_json,
)
from torch import nn

from gridmix import Grid
from gridmix.analysis.measure import available_memory, dry_run
from gridmix.analysis.memory import MemoryMeasurementError, peak_memory
from gridmix.tracks.plugin_loader import load_registry

BATCH, DIM, HEADS = 8, 64, 4
POINTS = [
    ("32x32", ()),
    ("64x64", ()),
    ("128x128", ()),
    ("16x32x32", ()),
    ("4096", (0,)),
    ("16384", (0,)),
]
QUICK_POINTS = [("16x16", ()), ("1024", (0,))]
REFERENCE = "attention"
MEMORY_TARGET = "bench_mixers:memory_step"


class Tokens(nn.Module):
    """One mixer on its own tokens: the input is a parameter, so the backward includes the input's
    gradient."""

    def __init__(self, mixer: str, grid: Grid, causal_axes: tuple[int, ...]) -> None:
        super().__init__()
        spec = load_registry().mixers[mixer]
        self.mixer = spec.layer(grid, causal_axes=causal_axes)(DIM, num_heads=HEADS, qkv_bias=True)
        self.x = nn.Parameter(torch.randn(BATCH, grid.numel, DIM))  # (B, N, C)

    def forward(self) -> torch.Tensor:
        return self.mixer(self.x)  # (B, N, C)


def forward_backward(module: nn.Module):
    params = [p for p in module.parameters() if p.requires_grad]
    with torch.no_grad():
        grad = torch.randn_like(module())

    def step() -> None:
        torch.autograd.grad(module(), params, grad_outputs=grad, allow_unused=True)

    return step


def memory_step(mixer: str, grid: str, causal: bool, threads: int):
    """Target of ``peak_memory``: one point's forward+backward in a fresh process."""
    torch.manual_seed(0)
    torch.set_num_threads(threads)
    return forward_backward(Tokens(mixer, Grid.parse(grid), (0,) if causal else ()))


def plan(
    mixers: list[str], grid: Grid, causal_axes: tuple[int, ...], gemm_rate: float, cap_s: float
) -> tuple:
    """Each mixer's point (FLOPs, parameters, or why it is skipped) and the steps to time."""
    registry, points, steps = load_registry().mixers, [], {}
    for name in mixers:
        point = dict(
            mixer=name, grid=str(grid), tokens=grid.numel, causal=bool(causal_axes), skipped=None
        )
        points.append(point)
        reason = registry[name].unfit(grid, causal_axes=causal_axes)
        if reason:
            point["skipped"] = reason
            continue
        try:
            torch.manual_seed(0)
            module = Tokens(name, grid, causal_axes)
            flops, estimate = dry_run(module, ())
        # a mixer that fails to build or trace here is reported, not fatal
        except Exception as error:
            point["skipped"] = f"failed: {type(error).__name__}: {error}"
            continue
        point.update(
            params=sum(p.numel() for p in module.mixer.parameters()),
            flops_fwdbwd=flops.total,
            memory_estimate_bytes=estimate,
            flops_uncounted=flops.uncounted,
        )
        point["estimated_s"] = flops.total / (0.3 * gemm_rate)
        if estimate > 0.6 * available_memory():
            point["skipped"] = (
                f"estimated peak {estimate / 2**30:.1f} GiB > 60% of available memory"
            )
        elif point["estimated_s"] > cap_s:
            point["skipped"] = f"estimated {point['estimated_s']:.0f} s per step > cap {cap_s:g} s"
        else:
            steps[name] = forward_backward(module)
    return points, steps


def measure(points: list[dict], steps: dict, args) -> None:
    repeats = {
        name: max(2, min(args.repeats, int(args.cap_s / max(p.get("estimated_s", 1e-9), 1e-9))))
        for p in points
        for name in [p["mixer"]]
        if name in steps
    }
    timed = interleaved(
        steps,
        repeats=repeats,
        warmup=1,
        threads=args.threads,
        max_other_share=args.max_other_share,
        min_block_s=args.min_block_s,
    )
    for point in points:
        name = point["mixer"]
        if name not in timed:
            continue
        point["timing"] = timed[name]["timing"]
        point["rounds"] = timed[name]["rounds"]
        if REFERENCE in timed:
            point["speedup_vs_attention"] = paired_ratio(
                dict(timing=timed[REFERENCE]["timing"], rounds=timed[REFERENCE]["rounds"]),
                dict(timing=timed[name]["timing"], rounds=timed[name]["rounds"]),
            )
        if args.memory:
            try:
                memory = peak_memory(
                    MEMORY_TARGET,
                    dict(
                        mixer=name, grid=point["grid"], causal=point["causal"], threads=args.threads
                    ),
                    threads=args.threads,
                    timeout_s=max(120.0, 20 * point["timing"].median_s),
                )
                point["peak_mib"] = memory.to_dict()["peak_bytes"] / 2**20
            except MemoryMeasurementError as error:
                point["memory_error"] = str(error)


def render(result: dict) -> str:
    env = result["environment"]
    text = (
        f"{machine_line(env)}, torch {env['torch']}, {env['torch_threads']} threads; batch "
        f"{BATCH}, C = {DIM}, {HEADS} heads; forward+backward of the mixer alone. ms: median of "
        "interleaved repeats; × attention: attention's time over the mixer's (median of per-round "
        "ratios); GFLOP: FlopCounterMode, forward+backward; MiB: peak above a fresh process.\n\n"
    )
    rows = []
    for p in result["points"]:
        where = f"{p['grid']}{' causal' if p['causal'] else ''}"
        if p["skipped"]:
            rows.append([p["mixer"], where, "–", "–", "–", "–", "–", p["skipped"]])
            continue
        speed = p.get("speedup_vs_attention")
        rows.append(
            [
                p["mixer"],
                where,
                f"{p['params']:,}",
                f"{p['flops_fwdbwd'] / 1e9:.3g}",
                f"{p['timing'].median_s * 1e3:.3g}",
                "–" if speed is None else f"{speed:.3g}",
                f"{p['peak_mib']:.1f}" if "peak_mib" in p else "–",
                "",
            ]
        )
    return text + markdown_table(
        ["mixer", "point", "parameters", "GFLOP", "ms", "× attention", "MiB", "skipped"], rows
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, required=True, help="directory for bench_mixers.json and .md"
    )
    parser.add_argument(
        "--quick", action="store_true", help="CI size: 16x16 and 1,024 causal tokens, no memory"
    )
    parser.add_argument(
        "--mixers", nargs="*", help="the mixers to time (default: every registered one)"
    )
    parser.add_argument(
        "--grids", nargs="*", help="symmetric grids instead of the default points (e.g. 32x32)"
    )
    parser.add_argument(
        "--no-memory", action="store_true", help="skip the peak-memory subprocesses"
    )
    parser.add_argument(
        "--min-block-s", type=float, default=None, help="seconds per timed block (default 0.3)"
    )
    add_machine_arguments(parser)
    args = parser.parse_args()
    env = set_up_machine(args)
    mixers = args.mixers or list(load_registry().mixers.names)
    if REFERENCE not in mixers:
        mixers.insert(0, REFERENCE)
    points = (
        [(g, ()) for g in args.grids] if args.grids else (QUICK_POINTS if args.quick else POINTS)
    )
    args.repeats, args.cap_s = (2, 5.0) if args.quick else (7, 60.0)
    args.min_block_s = (
        args.min_block_s if args.min_block_s is not None else (0.05 if args.quick else 0.3)
    )
    args.memory = not (args.no_memory or args.quick)
    gemm = torch.randn(2048, 2048)
    timed = interleaved(
        {"gemm": lambda: gemm @ gemm}, repeats={"gemm": 3}, warmup=1, threads=args.threads
    )
    gemm_rate = 2 * 2048**3 / timed["gemm"]["timing"].median_s
    result = dict(
        environment=env,
        settings=dict(
            batch=BATCH,
            dim=DIM,
            heads=HEADS,
            mixers=mixers,
            quick=args.quick,
            repeats=args.repeats,
            cap_s=args.cap_s,
            memory=args.memory,
        ),
        points=[],
    )
    for grid, causal_axes in points:
        if not args.quick:
            wait_for_quiet(max_wait_s=300)
        planned, steps = plan(mixers, Grid.parse(grid), causal_axes, gemm_rate, args.cap_s)
        measure(planned, steps, args)
        result["points"] += planned
        print(
            f"{grid}{' causal' if causal_axes else ''}: "
            + ", ".join(
                f"{p['mixer']} {p['timing'].median_s * 1e3:.3g} ms"
                for p in planned
                if "timing" in p
            ),
            flush=True,
        )
    for point in result["points"]:
        point.pop("rounds", None)
    write_json(args.out / "bench_mixers.json", result)
    (args.out / "bench_mixers.md").write_text(render(result) + "\n")
    print(render(result))


if __name__ == "__main__":
    main()
