"""The mixer on one GPU: layer and ViT step against timm's fused attention, fp32 and bf16, and a
study's wall time.

    python benchmarks/bench_gpu.py --out DIR [--device cuda] [--quick] [--no-study]
        [--cpu-study-s S]

Prints, and writes as ``DIR/bench_gpu.json`` and ``DIR/bench_gpu.md``, the GPU figures:

* **layer**: ``ConcentrationMixer(64, grid, num_heads=4, rank=16)`` against timm's ``Attention(64,
  num_heads=4)`` (fused SDPA), batch 8, forward+backward (input and parameter gradients), at 32x32,
  64x64, 128x128, 256x256, 16x32x32 and 16x64x64: fp32, bf16 autocast, and the mixer compiled with
  ``torch.compile(mode="reduce-overhead")`` (CUDA graphs: the layer is launch-bound,
  docs/benchmarks.md) in bf16 (at 32x32 and 64x64). Attention in fp32 is skipped above 16,384
  tokens (seconds per step). Peak memory per case is ``torch.cuda.max_memory_allocated`` after a
  reset.
* **vit**: a training step (forward, cross-entropy, backward, AdamW) of timm's ViT at 64x64 (patch
  1, embed 64, depth 4, 4 heads, batch 8, bf16 autocast), mixer eager, mixer compiled, attention.
* **kernels**: the compute ops (about one kernel each) of one forward+backward of the mixer and of
  attention at each layer grid, on the device (:func:`gridmix.analysis.measure.count_ops`, the
  torch-op path; attention up to 16,384 tokens), as ``benchmarks/op_counts.py`` counts them.
* **study**: the wall time of ``gridmix run --track image --grid 32x32 --device cuda --jobs J`` (the
  default budget; J worker processes share the GPU), and its ratio to ``--cpu-study-s`` when given.

GPU times are CUDA-event medians after warm-up (``--device cpu`` times with ``perf_counter``, for a
smoke run: ``--device cpu --quick`` checks the script on any machine). One short command for a CUDA
machine: ``nox -s bench_gpu`` (under 5 minutes on an H200 by design: fewer repeats at the largest
grids).
"""

from __future__ import annotations

import argparse
import gc
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from bench_common import markdown_table, write_json
from op_counts import layer_counts
from op_counts import table as op_count_table
from timm.models.vision_transformer import Attention, VisionTransformer

import gridmix
from gridmix import ConcentrationMixer, mixer_layer

BATCH, DIM, HEADS, RANK, CLASSES = 8, 64, 4, 16, 10
GRIDS = ("32x32", "64x64", "128x128", "256x256", "16x32x32", "16x64x64")
QUICK_GRIDS = ("8x8", "16x16", "4x8x8")
ATTENTION_FP32_MAX_TOKENS = 16384
COMPILED_GRIDS = (
    "32x32",
    "64x64",
)  # where eager is launch-bound; each compile costs tens of seconds
TOTAL_BUDGET_S = 290.0  # the study gets what is left of five minutes
TARGET_64X64_MS = 0.3  # the goal for the bf16 mixer forward+backward at 64x64


def timed(step, *, device: torch.device, warmup: int, repeats: int) -> dict:
    """Median and quartiles (ms) of ``step()``; CUDA events on a GPU, and the peak memory it
    allocated."""
    for _ in range(warmup):
        step()
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(repeats):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            begin = time.perf_counter()
            step()
            times.append(1e3 * (time.perf_counter() - begin))
    p25, median, p75 = np.percentile(times, [25, 50, 75])
    peak = torch.cuda.max_memory_allocated() if cuda else None
    return dict(
        median_ms=float(median),
        p25_ms=float(p25),
        p75_ms=float(p75),
        repeats=repeats,
        peak_bytes=peak,
    )


def layer_step(case: str, grid: str, device: torch.device):
    """A zero-argument forward+backward of one layer at ``grid`` in ``case``
    (model-dtype[-compiled])."""
    model, precision, *variant = case.split("-")
    compiled = variant == ["compiled"]
    torch.manual_seed(0)
    tokens = gridmix.Grid.parse(grid).numel
    layer = (
        ConcentrationMixer(DIM, grid, num_heads=HEADS, rank=RANK)
        if model == "mixer"
        else Attention(DIM, num_heads=HEADS)
    ).to(device)
    if compiled:
        layer = torch.compile(
            layer, mode="reduce-overhead" if device.type == "cuda" else "default", fullgraph=True
        )
    x = torch.randn(BATCH, tokens, DIM, device=device, requires_grad=True)  # (B, N, C)
    grad = torch.randn(BATCH, tokens, DIM, device=device)
    dtype = torch.bfloat16 if precision == "bf16" else None

    def step() -> None:
        if compiled and device.type == "cuda":
            # the previous step's graph outputs may be overwritten
            torch.compiler.cudagraph_mark_step_begin()
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            out = layer(x)
        out.backward(grad.to(out.dtype))

    return step


def vit_step(case: str, side: int, device: torch.device):
    """A zero-argument bf16-autocast training step of the ViT with ``case`` (mixer, mixer-compiled,
    attention)."""
    torch.manual_seed(0)
    extra = (
        dict(attn_layer=mixer_layer("concentration", (side, side), rank=RANK))
        if case.startswith("mixer")
        else {}
    )
    net = VisionTransformer(
        img_size=side,
        patch_size=1,
        in_chans=3,
        num_classes=CLASSES,
        embed_dim=DIM,
        depth=4,
        num_heads=HEADS,
        class_token=False,
        global_pool="avg",
        **extra,
    ).to(device)
    forward = torch.compile(net, fullgraph=True) if case.endswith("compiled") else net
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    x = torch.randn(BATCH, 3, side, side, device=device)  # (B, 3, H, W)
    y = torch.randint(0, CLASSES, (BATCH,), device=device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(forward(x).float(), y)
        loss.backward()
        opt.step()

    return step


def _release(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def run_cases(cases: dict, *, device: torch.device, warmup: int) -> dict:
    """Time each ``name: (make_step, repeats)`` in turn; a failing case is recorded with its
    error."""
    results = {}
    for name, (make, reps) in cases.items():
        begun = time.perf_counter()
        try:
            results[name] = timed(make(), device=device, warmup=warmup, repeats=reps)
        except Exception as error:  # a failing case is reported, the others still run
            results[name] = dict(error=f"{type(error).__name__}: {error}"[:300])
        results[name]["wall_s"] = time.perf_counter() - begun
        print(f"  {name}: {_ms(results[name])} ms ({results[name]['wall_s']:.1f} s)", flush=True)
        _release(device)
    return results


def study_time(device: str, jobs: int, grid: str, timeout_s: float) -> dict:
    with tempfile.TemporaryDirectory() as out:
        command = [
            sys.executable,
            "-m",
            "gridmix",
            "run",
            "--track",
            "image",
            "--grid",
            grid,
            "--device",
            device,
            "--jobs",
            str(jobs),
            "--threads",
            "1",
            "--out",
            str(Path(out) / "study"),
        ]
        begun = time.perf_counter()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return dict(
                command=" ".join(command[1:]), error=f"still running after {timeout_s:.0f} s"
            )
        wall = time.perf_counter() - begun
    record = dict(command=" ".join(command[1:]), wall_s=wall, returncode=done.returncode)
    if done.returncode != 0:
        record["error"] = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return record


def _ms(entry: dict | None) -> str:
    if entry is None:
        return "—"
    return "error" if "error" in entry else f"{entry['median_ms']:.3f}"


def _mib(entry: dict | None) -> str:
    if not entry or entry.get("peak_bytes") is None:
        return "—"
    return f"{entry['peak_bytes'] / 2**20:.0f}"


def checks(result: dict) -> list[str]:
    """The GPU goals, each with the measured figures that decide it."""
    layer, lines = result["layer"], []

    def best_mixer(grid: str) -> float:
        cases = ("mixer-bf16", "mixer-bf16-compiled")
        return min(layer[grid].get(case, {}).get("median_ms", math.inf) for case in cases)

    if "64x64" in layer:
        best = best_mixer("64x64")
        lines.append(
            f"bf16 mixer fwd+bwd at 64x64: {best:.3f} ms (goal <= {TARGET_64X64_MS} ms): "
            f"{'met' if best <= TARGET_64X64_MS else 'NOT met'}"
        )
    slower = [
        g
        for g in layer
        if best_mixer(g) >= layer[g].get("attention-bf16", {}).get("median_ms", math.inf)
    ]
    lines.append(
        "bf16 mixer faster than bf16 fused attention at every grid: "
        + ("met" if not slower else f"NOT met at {', '.join(slower)}")
    )
    vit = result.get("vit", {})
    if vit:
        mixer = min(vit.get(c, {}).get("median_ms", math.inf) for c in ("mixer", "mixer-compiled"))
        attention = vit.get("attention", {}).get("median_ms", math.inf)
        lines.append(
            f"ViT training step at {result['vit_grid']}: mixer {mixer:.3f} ms, attention "
            f"{attention:.3f} ms: {'met' if mixer < attention else 'NOT met'}"
        )
    study = result.get("study")
    if study:
        if "error" in study:
            lines.append(f"study: {study['error']}")
        else:
            line = f"study ({study['command']}): {study['wall_s']:.1f} s"
            if result.get("cpu_study_s"):
                ratio = result["cpu_study_s"] / study["wall_s"]
                line += (
                    f", {ratio:.1f}x faster than the {result['cpu_study_s']:.0f} s given for the "
                    f"CPU (goal >= 10x): {'met' if ratio >= 10 else 'NOT met'}"
                )
            lines.append(line)
    return lines


def render(result: dict) -> str:
    layer_cases = result["layer_cases"]
    rows = [
        [
            grid,
            *(_ms(result["layer"][grid].get(c)) for c in layer_cases),
            *(_mib(result["layer"][grid].get(c)) for c in ("mixer-bf16", "attention-bf16")),
        ]
        for grid in result["layer"]
    ]
    text = [
        f"# gridmix on {result['device_name']}",
        "",
        f"torch {result['torch']}, gridmix {result['gridmix']}; batch {BATCH}, C={DIM}, {HEADS} "
        f"heads, rank {RANK}; forward+backward, medians in ms ({result['timer']}).",
        "",
        markdown_table(
            ["grid", *(f"{c} ms" for c in layer_cases), "mixer bf16 MiB", "attention bf16 MiB"],
            rows,
        ),
    ]
    if result.get("kernels"):
        text += [
            "Compute ops per layer, forward+backward (torch-op path, about one kernel each):",
            "",
            op_count_table(result["kernels"]),
        ]
    if result.get("vit"):
        text += [
            f"ViT training step at {result['vit_grid']} (bf16 autocast):",
            "",
            markdown_table(
                ["model", "ms", "peak MiB"],
                [[c, _ms(e), _mib(e)] for c, e in result["vit"].items()],
            ),
        ]
    text += ["## Goals", "", *(f"- {line}" for line in result["checks"]), ""]
    return "\n".join(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, required=True, help="directory for bench_gpu.json and .md"
    )
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument(
        "--quick", action="store_true", help="small grids, few repeats, no compile (a smoke run)"
    )
    parser.add_argument("--no-study", action="store_true", help="skip the gridmix run study")
    parser.add_argument(
        "--jobs", type=int, default=8, help="study worker processes sharing the device"
    )
    parser.add_argument(
        "--cpu-study-s",
        type=float,
        default=None,
        help="the same study's wall time on a CPU, measured elsewhere, for the speed-up line",
    )
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(
            "--device cuda: torch sees no CUDA device (use --device cpu --quick for a smoke run)"
        )
    device = torch.device(args.device)
    began = time.perf_counter()
    grids = QUICK_GRIDS if args.quick else GRIDS
    compiled = [] if args.quick else ["mixer-bf16-compiled"]
    layer_cases = ["mixer-fp32", "attention-fp32", "mixer-bf16", *compiled, "attention-bf16"]
    result = dict(
        device_name=torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        torch=torch.__version__,
        gridmix=gridmix.__version__,
        layer_cases=layer_cases,
        layer={},
        timer="CUDA events" if device.type == "cuda" else "perf_counter",
    )
    for grid in grids:
        tokens = gridmix.Grid.parse(grid).numel
        repeats = 3 if args.quick else (10 if tokens > ATTENTION_FP32_MAX_TOKENS else 30)
        skip = {"attention-fp32"} if tokens > ATTENTION_FP32_MAX_TOKENS else set()
        skip |= set() if grid in COMPILED_GRIDS else {"mixer-bf16-compiled"}
        cases = {
            c: ((lambda c=c, grid=grid: layer_step(c, grid, device)), repeats)
            for c in layer_cases
            if c not in skip
        }
        print(f"layer {grid}", flush=True)
        result["layer"][grid] = run_cases(cases, device=device, warmup=1 if args.quick else 5)
    print("kernels", flush=True)
    result["kernels"] = {
        grid: layer_counts(
            grid, device, attention=gridmix.Grid.parse(grid).numel <= ATTENTION_FP32_MAX_TOKENS
        )
        for grid in grids
    }
    _release(device)
    side = 8 if args.quick else 64
    result["vit_grid"] = f"{side}x{side}"
    vit_cases = ["mixer", *([] if args.quick else ["mixer-compiled"]), "attention"]
    print(f"vit {result['vit_grid']}", flush=True)
    result["vit"] = run_cases(
        {c: ((lambda c=c: vit_step(c, side, device)), 3 if args.quick else 20) for c in vit_cases},
        device=device,
        warmup=1 if args.quick else 5,
    )
    if not args.no_study:
        print("study", flush=True)
        left = max(60.0, TOTAL_BUDGET_S - (time.perf_counter() - began))
        result["study"] = study_time(
            args.device, args.jobs, "8x8" if args.quick else "32x32", timeout_s=left
        )
    result["cpu_study_s"] = args.cpu_study_s
    result["checks"] = checks(result)
    result["wall_s"] = time.perf_counter() - began
    write_json(args.out / "bench_gpu.json", result)
    markdown = render(result)
    (args.out / "bench_gpu.md").write_text(markdown)
    print(markdown)
    print(f"bench_gpu: {result['wall_s']:.0f} s in all")


if __name__ == "__main__":
    main()
