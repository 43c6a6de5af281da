"""Pilot one arm of a graded track outside the study harness's statistics: train it with the default
budget's recipe (or the options given) on one seed, one thread, and print one JSON line with the
track's metric on the test split after every epoch.

Run from the repository root, e.g. ``python benchmarks/track_pilot.py --track copy --rung dist-2
--seed 0 --set embed_dim=64``; ``--model mixer:global-filter`` trains the backbone around a
registered mixer; ``--grid`` another grid than the rung's default."""

import argparse
import dataclasses
import json
import time

import torch

from gridmix.core.allocator import keep_freed_memory
from gridmix.core.grid import Grid
from gridmix.study.train import train_run
from gridmix.tracks.budget import Budget
from gridmix.tracks.plugin_loader import load_registry

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--track", default="copy", help="a track with a ladder")
parser.add_argument("--model", default="", help="an arm (default: the baseline), or mixer:NAME")
parser.add_argument("--rung", default="", help="the ladder's rung (default: the track's)")
parser.add_argument("--grid", default="", help="default: the rung's default grid")
parser.add_argument("--set", action="append", default=[], help="a track setting, KEY=VALUE")
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--epochs", type=int, default=8)
parser.add_argument("--n-train", type=int, default=1024)
args = parser.parse_args()
torch.set_num_threads(1)
keep_freed_memory("reuse")  # as a study's run process does

settings = dict(pair.split("=", 1) for pair in args.set)
if args.rung:
    settings["difficulty"] = args.rung
track = load_registry().track(args.track, settings)  # with a model around every registered mixer
grid = Grid.parse(args.grid) if args.grid else track.default_grid
args.model = args.model or track.matched_baseline
spec = (
    track.model_for_mixer(args.model.removeprefix("mixer:"))
    if args.model.startswith("mixer:")
    else track.model(args.model)
)
budget = Budget("pilot", 2, 1, (args.lr,), args.epochs, 32, args.n_train, 512, 512)
data = track.make_data(grid, args.seed, budget.sizes)
data = dataclasses.replace(data, val=data.test)  # the metric after every epoch is the test split's
curve: list[float] = []
start = time.time()
result = train_run(
    track,
    spec,
    grid,
    lr=args.lr,
    seed=args.seed,
    budget=budget,
    data=data,
    device=torch.device("cpu"),
    on_epoch=lambda epoch, train_loss, accuracy: curve.append(round(accuracy, 4)),
)
print(
    json.dumps(
        dict(
            track=track.name,
            model=spec.name,
            rung=track.settings.get("difficulty"),
            grid=str(grid),
            set=args.set,
            seed=args.seed,
            lr=args.lr,
            epochs=args.epochs,
            n_train=args.n_train,
            status=result.status,
            error=result.error,
            test=result.test_metric,
            seconds=round(time.time() - start, 1),
            curve=curve,
        )
    ),
    flush=True,
)
