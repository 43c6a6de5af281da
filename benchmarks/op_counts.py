"""Compute ops per layer, forward+backward, on the torch-op path (the one a GPU runs): the
concentration mixer on 1-d, 2-d, 3-d and causal grids, and timm's attention on the same tokens.

    python benchmarks/op_counts.py [--device cpu|cuda] [--json PATH] [--compiled]

Prints the markdown table of docs/benchmarks.md ("Compute ops per layer"). Each count is
:func:`gridmix.analysis.measure.count_ops` of one layer (C=64, 4 heads, rank 16, batch 2, training
mode) on its input: the forward, and the backward from an all-ones output gradient to the input and
every parameter. A GPU launches about one kernel per compute op, so on a small grid, where every
kernel is short, the count sets the layer's time.

``--compiled`` prints a second table: the kernels that ``torch.compile`` (inductor) generates and
calls for the same forward+backward, read from its output code (:func:`compiled_kernels`): GEMMs
and other library calls, kernels it fused, and ops it left to aten.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
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


# a kernel call in the wrapper inductor writes: a fused kernel (C++ on the CPU, Triton on a GPU), a
# library call (GEMMs: extern_kernels.bmm), or an op left to aten (a solve, complex FFTs)
_KERNEL_CALL = re.compile(
    r"\b(?P<fused>cpp_fused_\w+|triton_\w+(?=\.run))|\b(?P<library>extern_kernels\.\w+)\("
    r"|\b(?P<aten>aten\.\w+)\.\w+\("
)


def compiled_kernels(module: torch.nn.Module, x: torch.Tensor) -> Counter:
    """Kernels that ``torch.compile(module)`` calls for one forward and the backward from an
    all-ones gradient, gridmix's native kernels switched off: ``Counter`` of ``"fused"``,
    ``"library"`` and ``"aten"`` (what :data:`_KERNEL_CALL` finds in the ``call`` function of each
    graph inductor writes)."""
    from torch._inductor.utils import run_and_get_code

    from gridmix.mixers.switches import native_switched_off

    compiled = torch.compile(module)

    def step() -> None:
        y = compiled(x)
        y.backward(torch.ones_like(y))

    torch._dynamo.reset()
    with native_switched_off():
        _, codes = run_and_get_code(step)
    kinds = Counter()
    for code in codes:
        for call in _KERNEL_CALL.finditer(code[code.index("def call(") :]):
            kinds[call.lastgroup] += 1
    return kinds


def compiled_table(grids: dict[str, tuple[str, dict]], device: str) -> str:
    """The markdown table of :func:`compiled_kernels` for the mixer of each case and, on the
    first case's grid, timm's attention."""

    def row(name: str, layer: torch.nn.Module, grid: str) -> list:
        torch.manual_seed(0)
        x = torch.randn(BATCH, Grid.parse(grid).numel, DIM, device=device, requires_grad=True)
        kinds = compiled_kernels(layer.to(device).train(), x)
        return [name, kinds["library"], kinds["fused"], kinds["aten"], kinds.total()]

    rows = [
        row(case, ConcentrationMixer(DIM, grid, num_heads=HEADS, rank=RANK, **kwargs), grid)
        for case, (grid, kwargs) in grids.items()
    ]
    grid = next(iter(grids.values()))[0]
    name = f"attention ({Grid.parse(grid).numel} tokens)"
    rows.append(row(name, Attention(DIM, num_heads=HEADS), grid))
    return markdown_table(["layer", "library (GEMMs)", "fused", "aten", "total"], rows)


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
    parser.add_argument(
        "--compiled", action="store_true", help="also count the kernels torch.compile generates"
    )
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
    if args.compiled:
        print()
        print(compiled_table(CASES, args.device))


if __name__ == "__main__":
    main()
