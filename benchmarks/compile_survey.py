"""Does every built-in track's model compile, in one graph, to the eager numbers?

    python benchmarks/compile_survey.py [--tracks T,…] [--mixers] [--backend B] [--json PATH]

For every model a track declares (with ``--mixers`` also the model the track builds around every
registered mixer), on the track's default grid: ``torch._dynamo.explain`` gives the graphs and the
graph breaks of a forward (breaks are the backend's business only after capture, so any backend
gives the same count); then one training step (the track's loss on a batch of 4 of its data, then
the backward) of the model compiled with ``--backend`` against the eager step: the loss and the
largest gradient difference. ``aot_eager`` (the default) captures the graph and runs AOT autograd
without generating code, so it checks what ``gridmix run --compile`` traces in seconds;
``inductor`` (the ``--compile`` backend) adds the generated kernels and takes minutes. Prints one
markdown row per model (a track that reads files it was not given is skipped, and said) and writes
them as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from bench_common import markdown_table, print_rows, tracks_with_generated_data

from gridmix.tracks.budget import DataSizes

BATCH = 4


def survey(track, spec, grid, backend: str) -> dict:
    """One model's graphs, breaks (their reasons, deduplicated) and compiled-against-eager step."""
    row = dict(track=track.name, model=spec.name, grid=str(grid), backend=backend)
    data = track.make_data(grid, 0, DataSizes(BATCH, 1, 1)).train
    inputs, targets = data.inputs[:BATCH], data.targets[:BATCH]
    torch.manual_seed(0)
    model = spec.build(grid).train()
    try:
        torch._dynamo.reset()
        explained = torch._dynamo.explain(model)(inputs)
        row.update(graphs=explained.graph_count, breaks=explained.graph_break_count)
        row["reasons"] = sorted({str(b.reason).splitlines()[0] for b in explained.break_reasons})
        torch._dynamo.reset()
        steps = []
        for runner in (model, torch.compile(model, backend=backend)):
            model.zero_grad(set_to_none=True)
            loss = track.loss(runner(inputs), targets)
            loss.backward()
            steps.append((loss.item(), [p.grad.clone() for p in model.parameters()]))
        (eager_loss, eager_grads), (compiled_loss, compiled_grads) = steps
        row["loss_diff"] = abs(compiled_loss - eager_loss)
        row["grad_diff"] = max(
            float((a - b).abs().max()) for a, b in zip(eager_grads, compiled_grads, strict=True)
        )
    except Exception as error:  # noqa: BLE001 - a model that does not compile is a finding
        row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0]}"
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tracks", default="", help="comma-separated tracks (default: all)")
    parser.add_argument("--mixers", action="store_true", help="also every registered mixer's model")
    parser.add_argument("--backend", default="aot_eager", help="torch.compile backend")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    tracks, skipped = tracks_with_generated_data(args.tracks)
    rows = []
    for track in tracks:
        grid = track.default_grid
        specs = {spec.name: spec for spec in track.models}
        if args.mixers:
            specs.update({spec.name: spec for spec in track.mixer_models})
        for spec in specs.values():
            if spec.supports(grid) is None:
                rows.append(survey(track, spec, grid, args.backend))
                print(json.dumps(rows[-1]), flush=True)
    print_rows(
        markdown_table(
            ["track", "model", "grid", "graphs", "breaks", "loss diff", "max grad diff", "error"],
            [
                [r["track"], r["model"], r["grid"], r.get("graphs", "–"), r.get("breaks", "–")]
                + [f"{r['loss_diff']:.1e}" if "loss_diff" in r else "–"]
                + [f"{r['grad_diff']:.1e}" if "grad_diff" in r else "–", r.get("error", "")]
                for r in rows
            ],
        ),
        rows,
        skipped,
        args.json,
    )


if __name__ == "__main__":
    main()
