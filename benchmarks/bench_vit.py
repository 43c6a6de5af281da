"""End to end: a timm ViT training step with the concentration mixer against the same ViT with
attention.

    python benchmarks/bench_vit.py --out DIR [--quick] [--threads N] [--device cuda]
        [--precision bf16]

Both models are timm's ``VisionTransformer`` (patch size 1 on images of the grid's size, embed_dim
64, depth 4, 4 heads, ``class_token=False``, ``global_pool="avg"``), differing only in
``attn_layer`` (docs/design.md section 3): ``mixer_layer("concentration", grid)`` (rank 16) or
timm's ``Attention`` (fused SDPA). A step is forward, cross-entropy, backward and an AdamW update at
batch 8, timed interleaved (``bench_common.interleaved``) at grids 16x16, 32x32, 64x64, with peak
memory in a fresh subprocess.

Largest square grid that fits 24 GiB: peak memory is predicted by a fake-tensor dry run
(``gridmix.analysis.measure.dry_run``: parameters, gradients, inputs and the live-tensor peak; plus
the two AdamW moments) at two grids, extrapolated linearly in N (both models keep O(N) activations:
the flash SDPA kernel never holds the N×N matrix), then checked by a measured step at the largest
grid affordable in time. Time there is extrapolated along the fitted exponent: an estimate, labelled
so. Writes ``DIR/bench_vit.json`` and ``DIR/bench_vit.md``.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from bench_common import (
    add_machine_arguments,
    fit_exponent,
    interleaved,
    machine_line,
    markdown_table,
    paired_ratio,
    set_up_machine,
    wait_for_quiet,
    write_json,
)
from timm.models.vision_transformer import VisionTransformer

from gridmix import mixer_layer
from gridmix.analysis.measure import dry_run
from gridmix.analysis.memory import MemoryMeasurementError, peak_memory
from gridmix.study.precision import autocast

BATCH, DIM, DEPTH, HEADS, CLASSES = 8, 64, 4, 4, 10
BUDGET_BYTES = 24 * 2**30
MODELS = ("mixer", "attention")
MEMORY_TARGET = "bench_vit:train_step"


def build(model: str, side: int) -> VisionTransformer:
    layer = dict(attn_layer=mixer_layer("concentration", (side, side))) if model == "mixer" else {}
    return VisionTransformer(
        img_size=side,
        patch_size=1,
        in_chans=3,
        num_classes=CLASSES,
        embed_dim=DIM,
        depth=DEPTH,
        num_heads=HEADS,
        class_token=False,
        global_pool="avg",
        **layer,
    )


def train_step(model: str, side: int, threads: int, device: str = "cpu", precision: str = "fp32"):
    """A zero-argument training step (forward, loss, backward, AdamW) on fixed random data; also the
    memory target.

    ``precision="bf16"`` runs the forward under bf16 autocast; on CUDA the step ends with a
    synchronisation, so wall-clock timing of it is the GPU's time.
    """
    torch.manual_seed(0)
    torch.set_num_threads(threads)
    net = build(model, side).to(device)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    x = torch.randn(BATCH, 3, side, side, device=device)  # (B, 3, H, W)
    y = torch.randint(0, CLASSES, (BATCH,), device=device)  # (B,)
    cuda = torch.device(device).type == "cuda"

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with autocast(precision, torch.device(device)):
            loss = F.cross_entropy(net(x).float(), y)
        loss.backward()
        opt.step()
        if cuda:
            torch.cuda.synchronize()

    return step


def predicted_bytes(model: str, side: int) -> int:
    """Fake-tensor dry run of one forward+backward, plus AdamW's two moments per parameter (nothing
    allocated)."""
    net = build(model, side)
    x = torch.randn(BATCH, 3, side, side)
    _, estimate = dry_run(
        net, x, loss=lambda out: F.cross_entropy(out, torch.zeros(BATCH, dtype=torch.long))
    )
    return estimate + 2 * sum(p.numel() * p.element_size() for p in net.parameters())


def largest_side(model: str, sides: tuple[int, int]) -> dict:
    """Fit bytes = a·N + b through the dry runs at two grids; the largest square side within the
    budget."""
    (s0, s1), tokens = sides, [sides[0] ** 2, sides[1] ** 2]
    b0, b1 = predicted_bytes(model, s0), predicted_bytes(model, s1)
    per_token = (b1 - b0) / (tokens[1] - tokens[0])
    side = math.isqrt(int((BUDGET_BYTES - (b0 - per_token * tokens[0])) / per_token))
    return dict(
        side=side,
        grid=f"{side}x{side}",
        predicted_bytes_at_side=predicted_bytes(model, side),
        bytes_per_token=per_token,
        fitted_from={f"{s0}x{s0}": b0, f"{s1}x{s1}": b1},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, required=True, help="directory for bench_vit.json and .md"
    )
    parser.add_argument(
        "--quick", action="store_true", help="CI size: 16x16 and 32x32, few repeats"
    )
    add_machine_arguments(parser)
    parser.add_argument(
        "--device", choices=("cpu", "cuda"), default="cpu", help="where the steps run"
    )
    parser.add_argument(
        "--precision", choices=("fp32", "bf16"), default="fp32", help="bf16: autocast forward"
    )
    parser.add_argument(
        "--confirm",
        nargs=2,
        type=int,
        default=(256, 64),
        metavar=("MIXER_SIDE", "ATTENTION_SIDE"),
        help="square sides at which the memory prediction is checked by a measured step",
    )
    args = parser.parse_args()
    env = set_up_machine(args)
    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: torch sees no CUDA device")
        env["gpu"] = torch.cuda.get_device_name()
    run_on = dict(device=args.device, precision=args.precision)
    threads = args.threads
    sides = (8, 16, 32) if args.quick else (16, 32, 64)  # an exponent needs three grids
    repeats, warmup, min_block_s = (2, 1, 0.05) if args.quick else (5, 1, 0.3)
    result = dict(
        environment=env,
        rows=[],
        settings=dict(
            batch=BATCH,
            dim=DIM,
            depth=DEPTH,
            heads=HEADS,
            rank=16,
            patch_size=1,
            optimizer="AdamW",
            repeats=repeats,
            warmup=warmup,
            min_block_s=min_block_s,
            budget_gib=BUDGET_BYTES / 2**30,
            max_other_share=args.max_other_share,
            **run_on,
        ),
    )
    for side in sides:
        busy = wait_for_quiet(max_wait_s=0 if args.quick else 600)
        steps = {model: train_step(model, side, threads, **run_on) for model in MODELS}
        rounds = interleaved(
            steps,
            repeats=dict.fromkeys(MODELS, repeats),
            warmup=warmup,
            threads=threads,
            max_other_share=args.max_other_share,
            min_block_s=min_block_s,
        )
        row = dict(
            grid=f"{side}x{side}",
            tokens=side * side,
            busy_before=busy,
            speedup=paired_ratio(rounds["attention"], rounds["mixer"]),
        )  # median of per-round ratios
        timing = {model: rounds[model].pop("timing") for model in MODELS}
        for model in MODELS:
            row[model] = dict(
                step=timing[model],
                params=sum(p.numel() for p in build(model, side).parameters()),
                predicted_bytes=predicted_bytes(model, side),
                rounds=rounds[model],
            )
            if not args.quick:
                row[model]["memory"] = peak_memory(
                    MEMORY_TARGET,
                    dict(model=model, side=side, threads=threads, **run_on),
                    threads=threads,
                    device=args.device,
                    timeout_s=600,
                ).to_dict()
        result["rows"].append(row)
        print(
            f"{side}x{side}: mixer {timing['mixer'].median_s:.3g} s, attention "
            f"{timing['attention'].median_s:.3g} s",
            flush=True,
        )
    rows = result["rows"]
    fits = {
        m: fit_exponent([r["tokens"] for r in rows], [r[m]["step"].median_s for r in rows])
        for m in MODELS
    }
    result["exponents"] = fits
    result["largest"] = {}
    for model, confirm in zip(MODELS, args.confirm):
        largest = largest_side(model, (sides[0], sides[-1]))
        last = rows[-1]
        largest["estimated_step_s"] = (
            last[model]["step"].median_s
            * (largest["side"] ** 2 / last["tokens"]) ** fits[model]["exponent"]
        )
        if not args.quick:
            check = dict(
                grid=f"{confirm}x{confirm}", predicted_bytes=predicted_bytes(model, confirm)
            )
            try:
                check["memory"] = peak_memory(
                    MEMORY_TARGET,
                    dict(model=model, side=confirm, threads=threads, **run_on),
                    threads=threads,
                    device=args.device,
                    timeout_s=900,
                ).to_dict()
            except MemoryMeasurementError as error:
                check["error"] = str(error)
            largest["check"] = check
        result["largest"][model] = largest
    write_json(args.out / "bench_vit.json", result)
    (args.out / "bench_vit.md").write_text(render(result))
    print(render(result))


def render(result: dict) -> str:
    env, settings = result["environment"], result["settings"]
    where = env.get("gpu") or machine_line(env)
    text = (
        f"torch {env['torch']}, {env['torch_threads']} threads, {where} "
        f"({settings.get('device', 'cpu')}, {settings.get('precision', 'fp32')}); timm ViT, patch "
        f"1, embed_dim {DIM}, depth {DEPTH}, {HEADS} heads, batch {BATCH}, AdamW. Training step, "
        "median of interleaved repeats.\n\n"
    )
    rows = []
    for r in result["rows"]:
        mem = [
            f"{r[m]['memory']['peak_bytes'] / 2**20:.0f}" if "memory" in r[m] else "–"
            for m in MODELS
        ]
        others = f"{max(r[m]['rounds']['others_share'] for m in MODELS):.0%}"
        rows.append(
            [
                r["grid"],
                r["tokens"],
                f"{r['mixer']['step'].median_s * 1e3:.1f}",
                f"{r['attention']['step'].median_s * 1e3:.1f}",
                f"{r['speedup']:.1f}×",
                r["mixer"]["params"],
                r["attention"]["params"],
                *mem,
                others,
            ]
        )
    text += (
        markdown_table(
            [
                "grid",
                "N",
                "mixer ms",
                "attention ms",
                "speed-up",
                "mixer params",
                "attention params",
                "mixer peak MiB",
                "attention peak MiB",
                "others' CPU",
            ],
            rows,
        )
        + "\n"
    )
    rows = [
        [m, f"{f['exponent']:.2f}", "–" if f["r2"] is None else f"{f['r2']:.3f}"]
        for m, f in result["exponents"].items()
    ]
    text += markdown_table(["model", "time exponent vs N (these grids)", "R²"], rows) + "\n"
    rows = []
    for model, big in result["largest"].items():
        check = big.get("check", {})
        measured = check.get("error", "not checked")
        if "memory" in check:
            measured = (
                f"{check['memory']['peak_bytes'] / 2**30:.2f} GiB measured vs "
                f"{check['predicted_bytes'] / 2**30:.2f} predicted at {check['grid']}"
            )
        rows.append(
            [
                model,
                big["grid"],
                f"{big['predicted_bytes_at_side'] / 2**30:.1f}",
                f"{big['estimated_step_s']:.3g} (estimate)",
                measured,
            ]
        )
    text += (
        "Largest square grid within 24 GiB for one training step at batch 8 (prediction, see "
        "method):\n\n"
    )
    return text + markdown_table(
        ["model", "largest grid", "predicted GiB", "step s", "check"], rows
    )


if __name__ == "__main__":
    main()
