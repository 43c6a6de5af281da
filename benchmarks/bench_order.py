"""The projection order among tied Tucker axes: innermost first against outermost first, on both
paths.

    python benchmarks/bench_order.py --out DIR [--threads 2]
        [--grids 32x32 64x64 128x128 16x32x32 8x64x64]

Axes that tie in :func:`gridmix.mixers.concentration.layer.projection_order` (equal length and rank)
cost the same FLOPs in any order, so the order among them is a choice about memory access: the layer
keeps them outermost first, and the fused kernel's call takes those at least
``tucker_native.INNER_FIRST_LENGTH`` long innermost first
(:func:`gridmix.mixers.concentration.ops.tucker_native.innermost_first_among_ties`). For each grid
this times the bare operator ``mix`` of the mixer benchmark (batch 8, C = 64, 4 heads, rank 16,
forward+backward, ``bench_mixer.BareMix``) four ways in interleaved rounds
(``bench_common.interleaved``, blocks of back-to-back calls): the fused native kernels and the
torch-op path, each with every tie innermost first (``inner``) and outermost first (``outer``). It
reports each time, ``inner_over_outer`` (the median per-round ratio of outer's time to inner's:
above 1, innermost first is faster) and the order each path takes by default. Writes
``DIR/bench_order.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator
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
from bench_mixer import RANK, BareMix, TorchOpsMix, steps

from gridmix import Grid
from gridmix.mixers.concentration import layer
from gridmix.mixers.concentration.ops import tucker_native
from gridmix.mixers.concentration.ops.tucker_native import innermost_first_among_ties

ORDERS = {
    "inner": 0,
    "outer": 1 << 30,
}  # the least length of tied axes taken innermost first, per order
PATHS = {"native": lambda grid: BareMix(grid, rank=RANK, causal=False), "torch": TorchOpsMix}


@contextlib.contextmanager
def tied_order(path: str, order: str) -> Iterator[None]:
    """Inside the block, ``path`` runs tied axes in ``order``: the kernel's rule
    (``INNER_FIRST_LENGTH``) set to take every tie innermost first or none; the torch-op path's plan
    (``projection_order``) reordered by the same rule."""
    min_length = ORDERS[order]
    if path == "native":
        before, tucker_native.INNER_FIRST_LENGTH = tucker_native.INNER_FIRST_LENGTH, min_length
        try:
            yield
        finally:
            tucker_native.INNER_FIRST_LENGTH = before
        return
    plain = layer.projection_order
    layer.projection_order = lambda lengths, ranks: ties_reordered(
        plain(lengths, ranks), lengths, ranks, min_length
    )
    try:
        yield
    finally:
        layer.projection_order = plain


def ties_reordered(
    plan: list[int], lengths: list[int], ranks: list[int], min_length: int | None = None
) -> list[int]:
    """``plan`` (grid axes in projection order) with its tied axes reordered as the kernel's rule
    does."""
    positions = innermost_first_among_ties(
        plan, [lengths[k] for k in plan], [ranks[k] for k in plan], min_length
    )
    return [plan[p] for p in positions]


def in_order(step: Callable[[], None], path: str, order: str) -> Callable[[], None]:
    def run() -> None:
        with tied_order(path, order):
            step()

    return run


def default_order(grid: Grid) -> dict[str, str]:
    """Per path, the order it takes by default on ``grid``'s tied axes: ``inner``, ``outer``, or "–"
    where none tie."""
    lengths, ranks = list(grid.shape), [min(RANK, n) for n in grid.shape]
    plan = layer.projection_order(lengths, ranks)
    kernel, inner = ties_reordered(plan, lengths, ranks), ties_reordered(plan, lengths, ranks, 0)
    if inner == plan:
        return dict(native="–", torch="–")
    return dict(native="inner" if kernel == inner else "outer", torch="outer")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for bench_order.json")
    parser.add_argument(
        "--grids", nargs="*", default=["32x32", "64x64", "128x128", "16x32x32", "8x64x64"]
    )
    parser.add_argument("--repeats", type=int, default=15)
    add_machine_arguments(parser)
    args = parser.parse_args()
    try:
        grids = [Grid.parse(g) for g in args.grids]
    except ValueError as error:
        raise SystemExit(f"--grids: {error}") from None
    env = set_up_machine(args)
    result, rows = dict(environment=env, points={}), []
    for grid in grids:
        timed_steps = {}
        for path, build in PATHS.items():
            torch.manual_seed(0)
            step = steps(build(grid))[0]
            for order in ORDERS:
                timed_steps[f"{path}_{order}"] = in_order(step, path, order)
        timed = interleaved(
            timed_steps,
            repeats={name: args.repeats for name in timed_steps},
            warmup=2,
            threads=args.threads,
            max_other_share=args.max_other_share,
            min_block_s=0.2,
        )
        point = {name: 1e3 * entry["timing"].median_s for name, entry in timed.items()}
        for path in PATHS:
            point[f"{path}_inner_over_outer"] = paired_ratio(
                timed[f"{path}_outer"], timed[f"{path}_inner"]
            )
        point["default"] = default_order(grid)
        result["points"][str(grid)] = point
        rows.append(
            [
                str(grid),
                *(f"{point[f'{p}_{o}']:.3g}" for p in PATHS for o in ORDERS),
                *(f"{point[f'{p}_inner_over_outer']:.2f}" for p in PATHS),
                *(point["default"][p] for p in PATHS),
            ]
        )
        print(
            f"{grid}: "
            + ", ".join(
                f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in point.items()
            ),
            flush=True,
        )
    write_json(args.out / "bench_order.json", result)
    print(
        f"\n{machine_line(env)}; forward+backward ms, median; ratio: outer's time / inner's, per "
        "round\n"
    )
    print(
        markdown_table(
            [
                "grid",
                "native inner",
                "native outer",
                "torch inner",
                "torch outer",
                "native ×",
                "torch ×",
                "native default",
                "torch default",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
