"""Where a model's training step spends its time: profile steps of one track model (AdamW as a
run sets it up, the track's loss, its default budget's batch size, one batch of the track's data,
one thread) with torch's profiler and print one JSON line: the step's wall time and minor page
faults (median of ``--steps`` steps, without the profiler), its self CPU time under the profiler and
the ops that take the most of it, each with its milliseconds per step and its share. The process
keeps freed memory for reuse as a training run's does (``--allocator``: how,
:mod:`gridmix.core.allocator`; docs/benchmarks.md, "Freed memory kept for reuse").

Run from the repository root, idle: ``python benchmarks/profile_step.py --track image --model vit``
(the README's share of its training step in torch's attention kernel)."""

import argparse
import json
import resource
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile

from gridmix.core.allocator import MODES, keep_freed_memory
from gridmix.core.grid import Grid
from gridmix.study.train import adamw
from gridmix.tracks import DataSizes
from gridmix.tracks.plugin_loader import load_registry

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--track", default="image")
parser.add_argument("--model", default="", help="default: the track's matched baseline")
parser.add_argument("--grid", default="", help="default: the track's")
parser.add_argument("--steps", type=int, default=20, help="profiled steps, after 3 untimed")
parser.add_argument("--top", type=int, default=6, help="ops listed")
parser.add_argument("--allocator", choices=MODES, default="reuse", help="gridmix.core.allocator")
args = parser.parse_args()
allocator = keep_freed_memory(args.allocator)
torch.set_num_threads(1)
torch.manual_seed(0)

track = load_registry().track(args.track, {})
grid = Grid.parse(args.grid) if args.grid else track.default_grid
name = args.model or track.matched_baseline
model = track.model(name).build(grid)
budget = track.budget("default")
batch = budget.batch_size
data = track.make_data(grid, 0, DataSizes(batch, 1, 1)).train  # one batch of the track's shape
optimiser = adamw(model, lr=1e-3, weight_decay=budget.weight_decay)  # as a training run's


def step() -> None:
    optimiser.zero_grad(set_to_none=True)
    track.loss(model(data.inputs), data.targets).backward()
    optimiser.step()


def minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


for _ in range(3):
    step()
wall, faults = [], []
for _ in range(args.steps):
    start, faults_before = time.perf_counter(), minor_faults()
    step()
    wall.append(time.perf_counter() - start)
    faults.append(minor_faults() - faults_before)
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
            allocator=allocator,
            steps=args.steps,
            wall_ms=round(statistics.median(wall) * 1e3, 1),
            minor_faults=statistics.median(faults),
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
