"""Micro-benchmarks: the concentration mixer against every token mixer a user would pick instead.

At 64x64 the summary's ``targets_64x64`` entry holds the four speed targets docs/benchmarks.md
states.

    python benchmarks/bench_mixer.py --out DIR [--quick] [--threads N] [--device cuda]
        [--precision bf16]
    python benchmarks/bench_mixer.py --out DIR --causal --threads 2   # the causal targets only

On the same tokens (batch 8, C = 64 channels, 4 heads, rank 16 unless varied), forward+backward and
forward-only, at 1-D, 2-D and 3-D grids:

* ``mix``, ``mix_torch``, ``mix_r4``, ``mix_causal``, ``mix_causal_ss``: the bare operator ``M``
  (docs/design.md section 2) at rank 16, the same with the native kernels off (the torch-op path
  they must beat), at rank 4, with axis 0 causal (the default Toeplitz factor, a full-length kernel
  by the blocked FFT), and with axis 0 causal in the semiseparable form
  (``causal_form="semiseparable"``, 16 exponentials per head, the fused recurrence on the CPU, the
  chunked scan elsewhere); ``layer``: the full mixer, ``W_o · M(W_v · x)``;
* ``sdpa``: ``scaled_dot_product_attention`` on (B, h, N, C/h), the dense baseline, held to its
  flash kernel so it never falls back to materialising the N×N matrix; ``sdpa_causal``: the same
  with ``is_causal=True``, the baseline of ``mix_causal``;
* ``fft``: a GFNet global filter (Rao et al. 2021): ``rfftn`` over the grid, a learned complex
  filter per channel, ``irfftn`` — the fastest structured peer;
* ``mlp_mixer``: timm's ``Mlp`` over the token axis (MLP-Mixer, Tolstikhin et al. 2021; hidden N/2,
  timm's token ratio 0.5), up to 4096 tokens;
* ``axial``: attention along each grid axis in turn (Ho et al. 2019);
* ``gemm``: a 2048³ float32 ``matmul``, the machine's achievable FLOP rate, timed in the same
  rounds.

Every case's data are parameters, so its backward (timed and FLOP-counted) includes the gradient
with respect to the input, as inside a network. Per point: FLOPs (``FlopCounterMode`` through
``gridmix.analysis.measure``, on fake tensors) and a memory estimate come first; a case that would
not fit, or would run past the time cap, is skipped with its reason. Then all cases of a grid are
timed interleaved (``bench_common.interleaved``), and each one's peak memory is measured in a fresh
subprocess (``gridmix.analysis.memory.peak_memory``). Writes ``DIR/bench_mixer.json`` and
``DIR/bench_mixer.md``. ``--device cuda`` runs every case on the GPU (each step ends with a
synchronisation; peak memory is ``torch.cuda.max_memory_allocated``), ``--precision bf16`` under
bf16 autocast; FLOPs stay those of fp32.

``--causal`` runs the causal set: ``mix``, ``mix_causal``, ``mix_causal_ss`` and ``sdpa_causal`` on
1-D grids of 1,024 to 16,384 tokens and the 16x32x32 video grid (time causal), and prints the four
causal targets for each causal form (``summary["causal_targets"]`` in the JSON: ``causal_…`` for the
Toeplitz factor, ``semiseparable_…`` for the semiseparable one). ``--grids 256 512`` with ``--quick
--no-memory`` checks the script in seconds.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import torch.nn.functional as F
from bench_common import (
    GEMM_SIZE,
    add_machine_arguments,
    fit_exponent,
    gemm_gflops,
    gemm_steps,
    interleaved,
    machine_line,
    markdown_table,
    paired_ratio,
    set_up_machine,
    wait_for_quiet,
    write_json,
)
from timm.layers import Mlp
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from gridmix import ConcentrationMixer, Grid, set_native, tucker_flops
from gridmix.analysis.measure import available_memory, dry_run
from gridmix.analysis.memory import MemoryMeasurementError, peak_memory
from gridmix.analysis.scaling import MIN_FIT_POINTS, load_averages
from gridmix.study.precision import autocast

BATCH, DIM, HEADS, RANK = 8, 64, 4, 16
MLP_MAX_TOKENS = (
    4096  # beyond, the token MLP has > 2^25 weights per layer: no usable model, so not run
)
GRIDS = [
    "256",
    "512",
    "1024",
    "2048",
    "4096",
    "8192",
    "16384",
    "8x8",
    "16x16",
    "32x32",
    "48x48",
    "64x64",
    "96x96",
    "128x128",
    "8x16x16",
    "16x16x16",
    "16x32x32",
]
QUICK_GRIDS = ["1024", "16x16", "32x32", "64x64", "8x16x16"]
FIT_RANGES = {"1-D": ("1024", "16384"), "2-D": ("32x32", "128x128"), "3-D": ("8x16x16", "16x32x32")}
CASES = [
    "mix",
    "mix_torch",
    "mix_r4",
    "mix_causal",
    "mix_causal_ss",
    "layer",
    "sdpa",
    "sdpa_causal",
    "fft",
    "mlp_mixer",
    "axial",
    "gemm",
]
CAUSAL_GRIDS = ["1024", "2048", "4096", "8192", "16384", "16x32x32"]
CAUSAL_CASES = ["mix", "mix_causal", "mix_causal_ss", "sdpa_causal"]
MEMORY_TARGET = "bench_mixer:memory_step"
# Kernels that never hold the N×N matrix: flash (CPU; CUDA in bf16/fp16), memory-efficient (CUDA in
# fp32 too)
FUSED_SDPA = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]


class BareMix(nn.Module):
    def __init__(
        self, grid: Grid, *, rank: int, causal: bool, causal_form: str = "toeplitz"
    ) -> None:
        super().__init__()
        self.mixer = ConcentrationMixer(
            DIM,
            grid,
            num_heads=HEADS,
            rank=rank,
            causal_axes=(0,) if causal else (),
            causal_form=causal_form,
        )
        self.v = nn.Parameter(torch.randn(BATCH, *grid, DIM))  # (B, *grid, C)

    def forward(self) -> torch.Tensor:
        return self.mixer.mix(self.v)


class TorchOpsMix(BareMix):
    """``mix`` with the fused native kernels switched off: the torch-op (library GEMM) path the
    kernels must beat."""

    def __init__(self, grid: Grid) -> None:
        super().__init__(grid, rank=RANK, causal=False)

    def forward(self) -> torch.Tensor:
        set_native(False)
        try:
            return self.mixer.mix(self.v)
        finally:
            set_native(None)


class CompiledMix(BareMix):
    """``mix`` under ``torch.compile`` (inductor, CPU): the ``--compile`` check of whether
    compilation pays."""

    def __init__(self, grid: Grid) -> None:
        super().__init__(grid, rank=RANK, causal=False)
        # a fresh cache per grid: past the recompile limit dynamo would silently run eager
        torch._dynamo.reset()
        self.compiled = torch.compile(self.mixer.mix)

    def forward(self) -> torch.Tensor:
        return self.compiled(self.v)


class Layer(nn.Module):
    def __init__(self, grid: Grid) -> None:
        super().__init__()
        self.mixer = ConcentrationMixer(DIM, grid, num_heads=HEADS, rank=RANK)
        self.x = nn.Parameter(torch.randn(BATCH, grid.numel, DIM))  # (B, N, C)

    def forward(self) -> torch.Tensor:
        return self.mixer(self.x)


class Attention(nn.Module):
    def __init__(self, grid: Grid, *, causal: bool = False) -> None:
        super().__init__()
        shape = (BATCH, HEADS, grid.numel, DIM // HEADS)  # (B, h, N, c)
        self.q, self.k, self.v = (nn.Parameter(torch.randn(shape)) for _ in range(3))
        self.causal = causal

    def forward(self) -> torch.Tensor:
        with sdpa_kernel(FUSED_SDPA):  # an error, never a silent N×N fallback
            return F.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=self.causal)


class GlobalFilter(nn.Module):
    def __init__(self, grid: Grid) -> None:
        super().__init__()
        self.grid, self.axes = grid.shape, tuple(range(1, grid.ndim + 1))
        half = (*grid.shape[:-1], grid.shape[-1] // 2 + 1)  # rfftn keeps half the last axis
        self.weight = nn.Parameter(0.02 * torch.randn(*half, DIM, 2))  # GFNet's init; (…, C, re/im)
        self.x = nn.Parameter(torch.randn(BATCH, *grid, DIM))  # (B, *grid, C)

    def forward(self) -> torch.Tensor:
        spectrum = torch.fft.rfftn(self.x, dim=self.axes, norm="ortho")  # (B, *half, C) complex
        spectrum = spectrum * torch.view_as_complex(self.weight)
        return torch.fft.irfftn(spectrum, s=self.grid, dim=self.axes, norm="ortho")


class TokenMlp(nn.Module):
    def __init__(self, grid: Grid) -> None:
        super().__init__()
        self.mlp = Mlp(grid.numel, hidden_features=grid.numel // 2)  # timm MixerBlock's mlp_tokens
        self.x = nn.Parameter(torch.randn(BATCH, grid.numel, DIM))  # (B, N, C)

    def forward(self) -> torch.Tensor:
        return self.mlp(self.x.transpose(1, 2)).transpose(1, 2)  # mixes along N, per channel


class Axial(nn.Module):
    def __init__(self, grid: Grid) -> None:
        super().__init__()
        self.x = nn.Parameter(torch.randn(BATCH, *grid, HEADS, DIM // HEADS))  # (B, *grid, h, c)

    def forward(self) -> torch.Tensor:
        y = self.x
        with sdpa_kernel(FUSED_SDPA):
            for axis in range(1, y.dim() - 2):
                t = y.movedim(axis, -2)  # (B, other axes, h, n_k, c)
                # (B·others, h, n_k, c): the fused kernels take 4-D only
                flat = t.reshape(-1, *t.shape[-3:])
                y = (
                    F.scaled_dot_product_attention(flat, flat, flat)
                    .reshape(t.shape)
                    .movedim(-2, axis)
                )
        return y


def build(case: str, grid: Grid) -> nn.Module:
    """The case's module; ``ValueError`` with the reason when the case does not apply to the
    grid."""
    if case == "mix_compiled":
        return CompiledMix(grid)
    if case == "mix_torch":
        return TorchOpsMix(grid)
    if case in ("mix", "mix_r4", "mix_causal", "mix_causal_ss"):
        return BareMix(
            grid,
            rank=4 if case == "mix_r4" else RANK,
            causal=case.startswith("mix_causal"),
            causal_form="semiseparable" if case == "mix_causal_ss" else "toeplitz",
        )
    if case == "sdpa_causal":
        return Attention(grid, causal=True)
    if case == "mlp_mixer" and grid.numel > MLP_MAX_TOKENS:
        raise ValueError(
            f"token MLP of N={grid.numel} would hold {grid.numel**2:,} weights per layer "
            f"(> {MLP_MAX_TOKENS} tokens)"
        )
    if case == "axial" and grid.ndim == 1:
        raise ValueError("on a 1-D grid axial attention is full attention (see sdpa)")
    classes = dict(layer=Layer, sdpa=Attention, fft=GlobalFilter, mlp_mixer=TokenMlp, axial=Axial)
    return classes[case](grid)


def steps(module: nn.Module, device: str = "cpu", precision: str = "fp32") -> tuple:
    """(forward+backward, forward-only) closures on ``device`` in ``precision``; the backward takes
    every parameter's gradient. On CUDA each ends with a synchronisation, so its wall-clock is the
    GPU's time."""
    module = module.to(device)
    params = list(module.parameters())
    where = torch.device(device)
    sync = torch.cuda.synchronize if where.type == "cuda" else (lambda: None)
    with torch.no_grad(), autocast(precision, where):
        grad_out = torch.randn_like(module())

    def forward_backward() -> None:
        with autocast(precision, where):
            out = module()
        # bare mix: W_v, W_o unused
        torch.autograd.grad(out, params, grad_outputs=grad_out, allow_unused=True)
        sync()

    def forward() -> None:
        with torch.no_grad(), autocast(precision, where):
            module()
        sync()

    return forward_backward, forward


def memory_step(
    case: str, grid: str, threads: int, device: str = "cpu", precision: str = "fp32"
) -> object:
    """Target of ``peak_memory``: build one point in a fresh process and return its forward+backward
    step."""
    torch.manual_seed(0)
    torch.set_num_threads(threads)
    return steps(build(case, Grid.parse(grid)), device, precision)[0]


def _free_memory(device: str) -> int:
    """Bytes a case may use: free GPU memory on CUDA, available host memory otherwise."""
    return (
        torch.cuda.mem_get_info()[0] if torch.device(device).type == "cuda" else available_memory()
    )


def plan_grid(grid: Grid, args, gemm_rate: float) -> tuple[list[dict], dict]:
    """Every case's point (FLOPs, memory estimate, or the reason it is skipped) and the steps to
    time."""
    points, timed = [], {}
    for case in args.cases:
        point = dict(case=case, grid=str(grid), tokens=grid.numel, ndim=grid.ndim, skipped=None)
        points.append(point)
        if case == "gemm":
            point["flops_fwd"] = point["flops_fwdbwd"] = 2 * GEMM_SIZE**3
            timed[case] = gemm_steps(args.device)
            continue
        try:
            torch.manual_seed(0)
            module = build(case, grid)
        except ValueError as reason:
            point["skipped"] = str(reason)
            continue
        # FLOPs and memory of mix_compiled are those of eager mix: a fake-tensor run cannot go
        # through inductor
        flops, estimate = dry_run(module if case != "mix_compiled" else build("mix", grid), ())
        point.update(
            params=sum(p.numel() for p in module.parameters()),
            flops_fwd=flops.forward,
            flops_fwdbwd=flops.total,
            flops_uncounted=flops.uncounted,
            memory_estimate_bytes=estimate,
        )
        if case.startswith("mix"):  # mix_torch included: its work is mix's
            rank = 4 if case == "mix_r4" else RANK
            point["tucker_flops_fwdbwd"] = 3 * BATCH * tucker_flops(grid, dim=DIM, rank=rank)
        # half the GEMM rate: about what SDPA's flash kernel reaches here (the slowest case at large
        # N)
        point["estimated_fwdbwd_s"] = flops.total / (0.5 * gemm_rate)
        if estimate > 0.6 * _free_memory(args.device):
            point["skipped"] = (
                f"estimated peak {estimate / 2**30:.1f} GiB > 60% of available memory"
            )
        elif point["estimated_fwdbwd_s"] > args.cap_s:
            point["skipped"] = (
                f"estimated {point['estimated_fwdbwd_s']:.0f} s per step > cap {args.cap_s:g} s"
            )
        else:
            timed[case] = steps(module, args.device, args.precision)
    return points, timed


def time_grid(points: list[dict], timed: dict, args) -> None:
    """Time the planned steps interleaved, forward+backward then forward-only, in quiet rounds
    only."""
    repeats = {}
    for point in points:
        estimate = point.get("estimated_fwdbwd_s", 0.0)
        repeats[point["case"]] = max(
            args.min_repeats, min(args.repeats, int(args.cap_s / max(estimate, 1e-9)))
        )
    options = dict(
        repeats=repeats,
        warmup=args.warmup,
        threads=args.threads,
        max_other_share=args.max_other_share,
        min_block_s=args.min_block_s,
    )
    fwdbwd = interleaved({n: s[0] for n, s in timed.items()}, **options)
    fwd = interleaved({n: s[1] for n, s in timed.items()}, **options)
    for point in points:
        if point["case"] in timed:
            both = fwdbwd[point["case"]], fwd[point["case"]]
            point.update(
                fwdbwd=both[0].pop("timing"),
                fwd=both[1].pop("timing"),
                fwdbwd_rounds=both[0],
                fwd_rounds=both[1],
            )


def measure_memory(points: list[dict], args) -> None:
    """Peak memory of each timed point's forward+backward, each in a fresh subprocess."""
    for point in points:
        if "fwdbwd" not in point or point["case"] == "gemm":
            continue
        try:
            kwargs = dict(
                case=point["case"],
                grid=point["grid"],
                threads=args.threads,
                device=args.device,
                precision=args.precision,
            )
            memory = peak_memory(
                MEMORY_TARGET,
                kwargs,
                threads=args.threads,
                device=args.device,
                timeout_s=max(120.0, 20 * point["fwdbwd"].median_s),
            )
            point["memory"] = memory.to_dict()
        except MemoryMeasurementError as error:
            point["memory_error"] = str(error)


def measure_grid(grid: Grid, args, gemm_rate: float) -> list[dict]:
    """Plan and time every case on one grid (after waiting for a quiet machine), then its peak
    memory."""
    busy = wait_for_quiet(max_wait_s=args.wait_quiet_s) if args.wait_quiet_s else None
    points, timed = plan_grid(grid, args, gemm_rate)
    time_grid(points, timed, args)
    for point in points:
        point["busy_before"] = busy
    if str(grid) in args.memory_grids:
        measure_memory(points, args)
    return points


def _ratio(at: dict, grid: str, slow: str, fast: str, kind: str = "fwdbwd") -> float:
    """``slow`` time / ``fast`` time on ``grid``, paired by round
    (:func:`bench_common.paired_ratio`)."""

    def entry(case: str) -> dict:
        return dict(
            timing=at[(grid, case)][kind], rounds=at[(grid, case)][f"{kind}_rounds"]["rounds"]
        )

    return paired_ratio(entry(slow), entry(fast))


def summarise(points: list[dict], grids: list[Grid], cases: list[str]) -> dict:
    """Ratios to SDPA and to the FFT filter, FLOP rates against the same grid's GEMM, and fitted
    exponents.

    Every ratio, the FLOP-rate fractions included, is the median of per-round ratios: the GEMM and
    the case ran in the same rounds, so a slow phase of the machine cancels out.
    """
    at = {(p["grid"], p["case"]): p for p in points if "fwdbwd" in p}
    summary: dict = dict(per_grid={}, exponents={})
    for grid in map(str, grids):
        gemm = at[(grid, "gemm")]["fwdbwd"].median_s
        rounds = [p["fwdbwd_rounds"] for (g, _), p in at.items() if g == grid]
        row = dict(
            gemm_gflops=2 * GEMM_SIZE**3 / gemm / 1e9,
            others_share=max(r["others_share"] for r in rounds),
            discarded_rounds=max(r["discarded_rounds"] for r in rounds),
        )
        for case in cases:
            p = at.get((grid, case))
            if p is None or case == "gemm":
                continue
            # (1 / case time) / GEMM FLOP rate
            rate_vs_gemm = _ratio(at, grid, "gemm", case) / (2 * GEMM_SIZE**3)
            row[case] = dict(
                fwdbwd_ms=1e3 * p["fwdbwd"].median_s,
                fwd_ms=1e3 * p["fwd"].median_s,
                counted_fraction_of_gemm=p["flops_fwdbwd"] * rate_vs_gemm,
            )
            for ref in ("sdpa", "fft"):
                if (grid, ref) in at:
                    row[case][f"speedup_vs_{ref}"] = _ratio(at, grid, ref, case)
                    row[case][f"fwd_speedup_vs_{ref}"] = _ratio(at, grid, ref, case, kind="fwd")
            if "tucker_flops_fwdbwd" in p:
                row[case]["tucker_fraction_of_gemm"] = p["tucker_flops_fwdbwd"] * rate_vs_gemm
        summary["per_grid"][grid] = row
    for label, (lo, hi) in FIT_RANGES.items():
        span = [
            g
            for g in grids
            if Grid.parse(lo).numel <= g.numel <= Grid.parse(hi).numel
            and g.ndim == Grid.parse(lo).ndim
        ]
        for case in cases:
            pts = [at[(str(g), case)] for g in span if (str(g), case) in at]
            if len(pts) >= MIN_FIT_POINTS and case != "gemm":  # no slope through two points
                fit = fit_exponent([p["tokens"] for p in pts], [p["fwdbwd"].median_s for p in pts])
                summary["exponents"].setdefault(case, {})[
                    f"{label} {pts[0]['grid']}..{pts[-1]['grid']}"
                ] = fit
    target = summary["per_grid"].get("64x64", {}).get("mix")
    if target:
        summary["targets_64x64"] = dict(
            speedup_vs_sdpa=target.get("speedup_vs_sdpa"),
            speedup_vs_fft=target.get("speedup_vs_fft"),
            tucker_fraction_of_gemm=target["tucker_fraction_of_gemm"],
            counted_fraction_of_gemm=target["counted_fraction_of_gemm"],
            exponent_2d=summary["exponents"]
            .get("mix", {})
            .get("2-D 32x32..128x128", {})
            .get("exponent"),
            speedup_vs_torch_ops=_ratio(at, "64x64", "mix_torch", "mix")
            if ("64x64", "mix_torch") in at
            else None,
        )
    summary["causal_targets"] = causal_figures(at, summary)
    summary["targets_met"] = {
        name: None if value is None else bool(value >= goal if sense == ">=" else value <= goal)
        for name, (sense, goal, value) in goals(summary).items()
    }
    return summary


def goals(summary: dict) -> dict:
    """Every speed target as ``name: (">=" or "<=", goal, measured or None)`` (docs/benchmarks.md
    states them)."""
    symmetric, causal = summary.get("targets_64x64", {}), summary["causal_targets"]
    table = dict(
        speedup_vs_sdpa=(">=", 60),
        speedup_vs_fft=(">=", 1.0),
        exponent_2d=("<=", 1.15),
        tucker_fraction_of_gemm=(">=", 0.40),
        speedup_vs_torch_ops=(">=", 1.25),
    )
    out = {
        (f"{name}_32x32_128x128" if name == "exponent_2d" else f"{name}_64x64"): (
            sense,
            goal,
            symmetric.get(name),
        )
        for name, (sense, goal) in table.items()
    }
    causal_goals = dict(
        speedup_vs_causal_sdpa_16384=(">=", 50),
        over_symmetric_16384=("<=", 2),
        exponent_1024_16384=("<=", 1.15),
        time_over_symmetric_16x32x32=("<=", 2),
    )
    for prefix in ("causal", "semiseparable"):
        out.update(
            {
                f"{prefix}_{name}": (sense, goal, causal[f"{prefix}_{name}"])
                for name, (sense, goal) in causal_goals.items()
            }
        )
    return out


def causal_figures(at: dict, summary: dict) -> dict:
    """The causal speed targets (each None when its points were not timed): at 16,384 tokens the
    causal mixer's speed-up over causal SDPA (goal ≥ 50) and its time over the symmetric mixer's
    (goal ≤ 2), its time exponent from 1,024 to 16,384 tokens (goal ≤ 1.15), and at 16x32x32 with
    time causal its time over the all-symmetric mixer's (goal ≤ 2). Ratios are medians of per-round
    ratios. The four ``causal_…`` figures are the default Toeplitz factor's (``mix_causal``), the
    four ``semiseparable_…`` ones the semiseparable factor's (``mix_causal_ss``)."""

    def ratio(grid: str, slow: str, fast: str) -> float | None:
        return _ratio(at, grid, slow, fast) if (grid, slow) in at and (grid, fast) in at else None

    figures = {}
    for prefix, case in (("causal", "mix_causal"), ("semiseparable", "mix_causal_ss")):
        fits = summary["exponents"].get(case, {})
        figures.update(
            {
                f"{prefix}_speedup_vs_causal_sdpa_16384": ratio("16384", "sdpa_causal", case),
                f"{prefix}_over_symmetric_16384": ratio("16384", case, "mix"),
                f"{prefix}_exponent_1024_16384": fits.get("1-D 1024..16384", {}).get("exponent"),
                f"{prefix}_time_over_symmetric_16x32x32": ratio("16x32x32", case, "mix"),
            }
        )
    return figures


def _memory_cell(point: dict | None) -> str:
    """A point's measured peak in MiB, "failed" if its subprocess could not measure it, "–" if not
    measured."""
    if point is None or "memory" not in point:
        return "failed" if point is not None and "memory_error" in point else "–"
    return f"{point['memory']['peak_bytes'] / 2**20:.1f}"


def render(result: dict) -> str:
    """The Markdown tables: milliseconds and speed-ups over SDPA, FLOP-rate fractions, peak memory,
    exponents."""
    env, summary = result["environment"], result["summary"]
    settings = result["settings"]
    text = (
        f"torch {env['torch']}, {env['torch_threads']} threads, "
        f"{env.get('gpu') or machine_line(env)} ({settings.get('device', 'cpu')}, "
        f"{settings.get('precision', 'fp32')}); batch {BATCH}, C={DIM}, {HEADS} heads, rank {RANK} "
        "(mix_r4: 4). Median of interleaved repeats; ×: speed-up over SDPA (median of per-round "
        "ratios).\n\n"
    )
    cases = [c for c in result["settings"]["cases"] if c != "gemm"]
    for key, title in (("fwdbwd_ms", "forward+backward, ms"), ("fwd_ms", "forward only, ms")):
        rows = []
        for grid, row in summary["per_grid"].items():
            ratio = "speedup_vs_sdpa" if key == "fwdbwd_ms" else "fwd_speedup_vs_sdpa"
            cells = [
                f"{row[c][key]:.3g} ({row[c][ratio]:.0f}×)"
                if c in row and ratio in row[c] and c != "sdpa"
                else (f"{row[c][key]:.3g}" if c in row else "skip")
                for c in cases
            ]
            rows.append(
                [
                    grid,
                    Grid.parse(grid).numel,
                    *cells,
                    f"{row['gemm_gflops']:.0f}",
                    f"{row['others_share']:.0%} ({row['discarded_rounds']})",
                ]
            )
        headers = ["grid", "N", *cases, "GEMM GFLOP/s", "others' CPU (rounds redone)"]
        text += f"### {title}\n\n" + markdown_table(headers, rows) + "\n"
    rows = [
        [
            g,
            f"{r['mix']['tucker_fraction_of_gemm']:.0%}",
            f"{r['mix']['counted_fraction_of_gemm']:.0%}",
        ]
        for g, r in summary["per_grid"].items()
        if "mix" in r
    ]
    text += "### mix: achieved FLOP rate / same-run GEMM rate\n\n"
    text += markdown_table(["grid", "Tucker-minimum FLOPs", "FlopCounterMode FLOPs"], rows) + "\n"
    rows = []
    for grid in summary["per_grid"]:
        measured = {p["case"]: p for p in result["points"] if p["grid"] == grid}
        cells = [_memory_cell(measured.get(case)) for case in cases]
        if any(cell != "–" for cell in cells):
            rows.append([grid, Grid.parse(grid).numel, *cells])
    if rows:
        text += (
            "### peak memory of a forward+backward step, MiB above a fresh process's baseline "
            "(inputs, weights, step)\n\n"
        )
        text += markdown_table(["grid", "N", *cases], rows) + "\n"
    rows = [
        [case, span, f"{fit['exponent']:.2f}", "–" if fit["r2"] is None else f"{fit['r2']:.3f}"]
        for case, fits in summary["exponents"].items()
        for span, fit in fits.items()
    ]
    text += "### fitted log-log exponent of forward+backward time vs N\n\n"
    text += markdown_table(["case", "range", "exponent", "R²"], rows) + "\n"
    skipped = [
        f"- {p['case']} at {p['grid']}: {p['skipped']}" for p in result["points"] if p["skipped"]
    ]
    return text + ("### skipped\n\n" + "\n".join(skipped) + "\n" if skipped else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, required=True, help="directory for bench_mixer.json and .md"
    )
    parser.add_argument(
        "--quick", action="store_true", help="CI size: a few grids and repeats (< 2 minutes)"
    )
    parser.add_argument("--grids", nargs="*", help="override the grid list, e.g. 32x32 64x64")
    parser.add_argument(
        "--cases", nargs="*", choices=CASES, help="override the case list (gemm is always kept)"
    )
    parser.add_argument(
        "--causal",
        action="store_true",
        help=f"the causal set: cases {CAUSAL_CASES} on grids {CAUSAL_GRIDS} (unless overridden)",
    )
    parser.add_argument(
        "--compile", action="store_true", help="also time mix under torch.compile (mix_compiled)"
    )
    parser.add_argument(
        "--no-memory", action="store_true", help="skip the peak-memory subprocesses"
    )
    parser.add_argument(
        "--wait-quiet-s",
        type=float,
        default=None,
        help="before each grid, wait up to this long for an idle machine (default: 0 quick, 600)",
    )
    parser.add_argument(
        "--min-block-s",
        type=float,
        default=None,
        help="a repeat runs a step back to back for at least this long (timeit-style; 0: one call; "
        "default 0.05 quick, 0.3)",
    )
    parser.add_argument(
        "--device", choices=("cpu", "cuda"), default="cpu", help="where every case runs"
    )
    parser.add_argument(
        "--precision", choices=("fp32", "bf16"), default="fp32", help="bf16: autocast"
    )
    add_machine_arguments(parser)
    args = parser.parse_args()
    env = set_up_machine(args)
    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: torch sees no CUDA device")
        env["gpu"] = torch.cuda.get_device_name()
    grids = [
        Grid.parse(g)
        for g in (
            args.grids or (CAUSAL_GRIDS if args.causal else QUICK_GRIDS if args.quick else GRIDS)
        )
    ]
    chosen = args.cases or (CAUSAL_CASES if args.causal else None)
    args.cases = [c for c in CASES if not chosen or c in chosen or c == "gemm"]
    if args.compile:
        args.cases.insert(1, "mix_compiled")
    args.repeats, args.min_repeats, args.warmup = (3, 2, 1) if args.quick else (9, 3, 2)
    args.cap_s = 5.0 if args.quick else 60.0
    if args.min_block_s is None:
        args.min_block_s = 0.05 if args.quick else 0.3
    if args.wait_quiet_s is None:
        args.wait_quiet_s = 0.0 if args.quick else 600.0
    args.memory_grids = (
        set() if args.no_memory else {"32x32"} if args.quick else {str(g) for g in grids}
    )
    result = dict(
        environment=env,
        points=[],
        settings=dict(
            batch=BATCH,
            dim=DIM,
            heads=HEADS,
            rank=RANK,
            gemm_size=GEMM_SIZE,
            quick=args.quick,
            repeats=args.repeats,
            min_repeats=args.min_repeats,
            warmup=args.warmup,
            cap_s=args.cap_s,
            min_block_s=args.min_block_s,
            memory_grids=sorted(args.memory_grids),
            cases=args.cases,
            device=args.device,
            precision=args.precision,
            wait_quiet_s=args.wait_quiet_s,
            max_other_share=args.max_other_share,
        ),
    )
    if args.wait_quiet_s:
        wait_for_quiet(max_wait_s=args.wait_quiet_s)
    gemm_rate = 1e9 * gemm_gflops(args.threads, device=args.device)
    for grid in grids:
        points = measure_grid(grid, args, gemm_rate)
        result["points"] += points
        done = {p["case"]: f"{p['fwdbwd'].median_s * 1e3:.3g}" for p in points if "fwdbwd" in p}
        print(f"{grid}: fwd+bwd ms {done}", flush=True)
    result["summary"] = summarise(result["points"], grids, args.cases)
    result["environment"]["loadavg_at_end"] = load_averages()
    write_json(args.out / "bench_mixer.json", result)
    (args.out / "bench_mixer.md").write_text(render(result))
    print(render(result))
    print(f"targets ({machine_line(env)}; {env['torch_threads']} threads):")
    for name, (sense, goal, value) in goals(result["summary"]).items():
        if value is not None:
            verdict = "met" if result["summary"]["targets_met"][name] else "NOT met"
            print(f"  {name} = {value:.3g} (goal {sense} {goal}): {verdict}")


if __name__ == "__main__":
    main()
