"""What the data fingerprint costs next to training: per built-in track, build + hash time against
one epoch.

``gridmix run`` builds the first seed's data and hashes it (:mod:`gridmix.study.fingerprint`) before
any run; the goal is that this is cheap relative to training. Per track, at its default grid and the
chosen budget's split sizes, this records the seconds to build the data, to hash it (the median of
``--repeats``), the bytes hashed, and the wall seconds of one one-epoch training run of the idea
model; the ratio ``hash_s / epoch_s`` is the figure to watch. Writes ``bench_fingerprint.json`` to
``--out``.

    python benchmarks/bench_fingerprint.py --out runs/bench --budget default
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

import torch
from bench_common import environment, write_json

from gridmix.study.fingerprint import tensor_hash
from gridmix.study.harness import execute
from gridmix.study.spec import RunTask
from gridmix.tracks.plugin_loader import load_registry


def measure(track_name: str, budget_name: str, *, repeats: int, threads: int) -> dict:
    track = load_registry().track(track_name)
    budget = track.budget(budget_name)
    started = time.perf_counter()
    data = track.make_data(track.default_grid, 0, budget.sizes)
    build_s = time.perf_counter() - started
    hash_times = []
    for _ in range(repeats):
        started = time.perf_counter()
        tensor_hash(data)
        hash_times.append(time.perf_counter() - started)
    nbytes = sum(
        t.numel() * t.element_size()
        for split in (data.train, data.val, data.test)
        for t in (split.inputs, split.targets)
    )
    task = RunTask(
        track=track.name,
        model=track.idea.name,
        grid=str(track.default_grid),
        lr=budget.lrs[0],
        seed=0,
        budget=dataclasses.replace(budget, epochs=1),
        device="cpu",
        threads=threads,
    )
    epoch_s = execute(task).wall_s
    hash_s = statistics.median(hash_times)
    return dict(
        track=track.name,
        grid=str(track.default_grid),
        budget=budget.name,
        sizes=dataclasses.asdict(budget.sizes),
        bytes_hashed=nbytes,
        build_s=build_s,
        hash_s=hash_s,
        epoch_s=epoch_s,
        hash_over_epoch=hash_s / epoch_s if epoch_s else None,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, required=True, help="directory for bench_fingerprint.json"
    )
    parser.add_argument(
        "--budget", default="default", help="smoke, default or full: the split sizes hashed"
    )
    parser.add_argument(
        "--tracks", default="sequence,image,video", help="comma-separated built-in tracks"
    )
    parser.add_argument(
        "--repeats", type=int, default=5, help="hash repeats (the median is reported)"
    )
    parser.add_argument(
        "--threads", type=int, default=torch.get_num_threads(), help="torch threads"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = [
        measure(name.strip(), args.budget, repeats=args.repeats, threads=args.threads)
        for name in args.tracks.split(",")
        if name.strip()
    ]
    for row in rows:
        print(
            f"{row['track']} {row['grid']} ({row['budget']}): {row['bytes_hashed'] / 1e6:.1f} MB "
            f"hashed in {row['hash_s'] * 1e3:.1f} ms, built in {row['build_s']:.2f} s; one epoch "
            f"{row['epoch_s']:.2f} s"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(
        args.out / "bench_fingerprint.json",
        dict(environment=environment(threads=torch.get_num_threads()), rows=rows),
    )


if __name__ == "__main__":
    main()
