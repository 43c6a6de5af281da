"""Compute ops per layer, forward+backward, on the torch-op path (the one a GPU runs): the
concentration mixer on 1-d, 2-d, 3-d and causal grids, and timm's attention on the same tokens.

    python benchmarks/op_counts.py [--device cpu|cuda] [--json PATH]

Prints the markdown table of docs/benchmarks.md ("Compute ops per layer"). Each count is
:func:`gridmix.analysis.measure.count_ops` of one layer (C=64, 4 heads, rank 16, batch 2, training
mode) on its input: the forward, and the backward from an all-ones output gradient to the input and
every parameter. A GPU launches about one kernel per compute op, so on a small grid, where every
kernel is short, the count sets the layer's time.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from bench_common import markdown_table
from timm.models.vision_transformer import Attention

from gridmix import ConcentrationMixer, Grid
from gridmix.analysis.measure import OpCount, count_ops

DIM, HEADS, RANK, BATCH = 64, 4, 16, 2
# name: (grid, the mixer's keyword arguments)
CASES = {
    "1-d 256": ("256", {}),
    "2-d 16x16": ("16x16", {}),
    "3-d 4x8x8": ("4x8x8", {}),
    "1-d causal 256": ("256", dict(causal_axes=(0,))),
    "2-d 16x16, axis 0 causal": ("16x16", dict(causal_axes=(0,))),
}


def layer_counts(
    grid: str, device: torch.device | str = "cpu", *, attention: bool = True, **mixer_kwargs
) -> dict[str, OpCount | None]:
    """``{"mixer": …, "attention": …}``: the compute ops of one forward+backward of
    ``ConcentrationMixer(DIM, grid, num_heads=HEADS, rank=RANK, **mixer_kwargs)`` and (unless
    ``attention`` is false: None) of timm's ``Attention(DIM, num_heads=HEADS)`` on ``grid``'s
    tokens, on ``device``."""
    torch.manual_seed(0)
    x = torch.randn(BATCH, Grid.parse(grid).numel, DIM, device=device, requires_grad=True)
    mixer = ConcentrationMixer(DIM, grid, num_heads=HEADS, rank=RANK, **mixer_kwargs)
    counts = dict(mixer=count_ops(mixer.to(device).train(), x), attention=None)
    if attention:
        counts["attention"] = count_ops(Attention(DIM, num_heads=HEADS).to(device).train(), x)
    return counts


def table(counts: dict[str, dict[str, OpCount | None]]) -> str:
    """The markdown table: per case, the mixer's forward, backward and total, and attention's
    total ("–" where it was not counted)."""
    rows = []
    for case, pair in counts.items():
        mixer, attention = pair["mixer"].to_dict(), pair["attention"]
        rows.append(
            [
                case,
                mixer["forward"],
                mixer["backward"],
                mixer["total"],
                "–" if attention is None else attention.total,
            ]
        )
    return markdown_table(
        ["layer", "mixer forward", "mixer backward", "mixer total", "attention total"], rows
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="where the layers run (cpu, cuda)")
    parser.add_argument("--json", type=Path, default=None, help="also write the counts by op here")
    args = parser.parse_args()
    counts = {
        case: layer_counts(grid, args.device, **kwargs) for case, (grid, kwargs) in CASES.items()
    }
    print(table(counts))
    if args.json:
        data = {
            case: {k: c and c.to_dict() for k, c in pair.items()} for case, pair in counts.items()
        }
        args.json.write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    main()
