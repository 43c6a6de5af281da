"""The Mamba mixer's SSD chunk length: forward+backward time at several chunk lengths, for choosing
``gridmix.mixers.mamba.CHUNK_SIZE`` on an idle machine.

    python benchmarks/bench_mamba_chunk.py --out DIR [--threads 2] [--chunks 16 32 64 128 256]
        [--points 32x32 64x64 128x128 4096c]

Each point builds :class:`gridmix.mixers.mamba.MambaMixer` (C = 64, 4 heads, its other defaults;
``4096c``: a 1-d grid of 4,096 tokens with axis 0 causal) once per chunk length from one seed (the
result does not depend on the chunk: ``tests/test_mixer_mamba.py``) and times a training step of it
alone (batch 8, the input's and every parameter's gradient) at every chunk length in interleaved
rounds (``bench_common.interleaved``). ``× default`` is the median per-round ratio of the default
chunk's time to that chunk's (above 1: faster than the default). Writes
``DIR/bench_mamba_chunk.json`` and prints the table.
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
    write_json,
)

from gridmix import Grid
from gridmix.mixers.mamba import CHUNK_SIZE, MambaMixer

BATCH, DIM, HEADS = 8, 64, 4


def training_step(point: str, chunk: int):
    """A forward+backward of the mixer at ``point`` (``"64x64"``, or ``"4096c"`` for a causal 1-d
    grid) with SSD chunks of ``chunk`` tokens."""
    causal = point.endswith("c")
    grid = Grid.parse(point.removesuffix("c"))
    torch.manual_seed(0)
    mixer = MambaMixer(DIM, grid, num_heads=HEADS, chunk_size=chunk, causal_axes=(0,) * causal)
    x = torch.randn(BATCH, grid.numel, DIM, requires_grad=True)  # (B, N, C)

    def step() -> None:
        mixer.zero_grad(set_to_none=True)
        x.grad = None
        mixer(x).sum().backward()  # (B, N, C) → scalar

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for the JSON")
    parser.add_argument("--chunks", nargs="*", type=int, default=[16, 32, 64, 128, 256])
    parser.add_argument("--points", nargs="*", default=["32x32", "64x64", "128x128", "4096c"])
    parser.add_argument("--repeats", type=int, default=7)
    add_machine_arguments(parser)
    args = parser.parse_args()
    if CHUNK_SIZE not in args.chunks:
        args.chunks.append(CHUNK_SIZE)
    env = set_up_machine(args)
    result, rows = dict(environment=env, default_chunk=CHUNK_SIZE, points={}), []
    for point in args.points:
        steps = {str(chunk): training_step(point, chunk) for chunk in args.chunks}
        timed = interleaved(
            steps,
            repeats=dict.fromkeys(steps, args.repeats),
            warmup=1,
            threads=args.threads,
            max_other_share=args.max_other_share,
            min_block_s=0.2,
        )
        default = timed[str(CHUNK_SIZE)]
        result["points"][point] = {
            chunk: dict(ms=1e3 * entry["timing"].median_s, vs_default=paired_ratio(default, entry))
            for chunk, entry in timed.items()
        }
        for chunk, entry in result["points"][point].items():
            rows.append([point, chunk, f"{entry['ms']:.3g}", f"{entry['vs_default']:.2f}"])
        print(point, {c: round(e["ms"], 1) for c, e in result["points"][point].items()})
    write_json(args.out / "bench_mamba_chunk.json", result)
    print(machine_line(env))
    print(markdown_table(["point", "chunk", "ms", "× default"], rows))


if __name__ == "__main__":
    main()
