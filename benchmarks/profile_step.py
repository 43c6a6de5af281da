"""Where a model's training step spends its time: profile steps of one track model (AdamW, the
track's loss, its default budget's batch size, one batch of the track's data, one thread) with
torch's profiler and print one JSON line: the step's self CPU time and the ops that take the most
of it, each with its milliseconds per step and its share.

Run from the repository root, idle: ``python benchmarks/profile_step.py --track image --model vit``
(the README's "84% of its training step" figure)."""

import argparse
import json

import torch
from torch.profiler import ProfilerActivity, profile

from gridmix.core.grid import Grid
from gridmix.tracks import DataSizes
from gridmix.tracks.plugin_loader import load_registry

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--track", default="image")
parser.add_argument("--model", default="", help="default: the track's matched baseline")
parser.add_argument("--grid", default="", help="default: the track's")
parser.add_argument("--steps", type=int, default=20, help="profiled steps, after 3 untimed")
parser.add_argument("--top", type=int, default=6, help="ops listed")
args = parser.parse_args()
torch.set_num_threads(1)
torch.manual_seed(0)

track = load_registry().track(args.track, {})
grid = Grid.parse(args.grid) if args.grid else track.default_grid
name = args.model or track.matched_baseline
model = track.model(name).build(grid)
batch = track.budget("default").batch_size
data = track.make_data(grid, 0, DataSizes(batch, 1, 1)).train  # one batch of the track's shape
optimiser = torch.optim.AdamW(model.parameters(), lr=1e-3)


def step() -> None:
    optimiser.zero_grad(set_to_none=True)
    track.loss(model(data.inputs), data.targets).backward()
    optimiser.step()


for _ in range(3):
    step()
with profile(activities=[ProfilerActivity.CPU]) as profiler:
    for _ in range(args.steps):
        step()
events = sorted(profiler.key_averages(), key=lambda event: event.self_cpu_time_total, reverse=True)
total_us = sum(event.self_cpu_time_total for event in events)
print(
    json.dumps(
        dict(
            track=args.track,
            model=name,
            grid=str(grid),
            batch=batch,
            threads=torch.get_num_threads(),
            steps=args.steps,
            step_ms=round(total_us / args.steps / 1e3, 1),
            top=[
                dict(
                    op=event.key,
                    calls_per_step=event.count / args.steps,
                    ms_per_step=round(event.self_cpu_time_total / args.steps / 1e3, 1),
                    share=round(event.self_cpu_time_total / total_us, 3),
                )
                for event in events[: args.top]
            ],
        )
    )
)
