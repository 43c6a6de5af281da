"""What gridmix's benchmark scripts share: the environment record, a contention monitor, interleaved
timing.

Method (docs/benchmarks.md): every case of a point is timed in one process, round-robin — repeat
``i`` of every case runs before repeat ``i + 1`` of any — after untimed warm-up rounds, so slow
drifts of the machine (other processes, frequency, caches) hit all cases alike; a case reports the
median and quartiles of its repeats. The thread count is fixed and recorded. Because the machine may
be shared, :class:`CpuShare` records how much CPU other processes took while we measured, so a noisy
run is visible in its own output instead of silently biasing it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from gridmix.analysis.measure import Timing
from gridmix.analysis.scaling import fit_power_law, load_averages
from gridmix.core.allocator import MODES as ALLOCATOR_MODES
from gridmix.core.allocator import keep_freed_memory
from gridmix.mixers.concentration.ops.native_build import cpu_facts, cpu_line, native_build_info
from gridmix.report import format as report_format


def environment(*, threads: int) -> dict:
    """The machine and software a run measured on; ``threads`` is ``torch.get_num_threads()`` after
    setting it.

    ``native`` is how the fused kernels were built (compiler, flags, vector ISA and lanes, OpenMP;
    ``None`` when they could not be), so every figure says which ISA it ran; the CPU's own facts
    (:func:`cpu_facts`: model, family, its widest vector ISA, torch's kernels' ISA, the variables
    that narrow either) say on what.
    """
    build = native_build_info()
    return dict(
        torch=torch.__version__,
        python=platform.python_version(),
        **cpu_facts(),
        cpu_count=os.cpu_count(),
        native=build.as_dict() if build else None,
        torch_threads=threads,
        mkl=torch.backends.mkl.is_available(),
        platform=platform.platform(),
        started=time.strftime("%Y-%m-%d %H:%M:%S %z"),
        loadavg_at_start=load_averages(),
        allocator_env={
            k: v for k, v in os.environ.items() if k.startswith(("MALLOC_", "LD_PRELOAD", "THP_"))
        },
    )


def machine_line(env: dict) -> str:
    """Where an :func:`environment` was measured, in one line: the CPU (:func:`cpu_line`: its family
    and model, its vector ISA, torch's kernels' ISA, any variable that narrowed either) and the ISA
    of gridmix's native kernels."""
    native = env.get("native") or {}
    return f"{cpu_line(env)}; gridmix kernels {native.get('isa', 'not built')}"


def add_machine_arguments(parser: argparse.ArgumentParser) -> None:
    """``--threads``, ``--allocator`` and ``--max-other-share``: how every benchmark script uses the
    machine."""
    parser.add_argument(
        "--threads", type=int, default=os.cpu_count(), help="torch threads (default: all cores)"
    )
    parser.add_argument(
        "--allocator",
        choices=ALLOCATOR_MODES,
        default="retain",
        help="retain: glibc keeps freed memory for reuse, every block from its heap "
        "(gridmix.core.allocator)",
    )
    parser.add_argument(
        "--max-other-share",
        type=float,
        default=0.02,
        help="a timing round in which other processes took more of the CPU is run again",
    )


def set_up_machine(args: argparse.Namespace) -> dict:
    """Apply ``--threads`` (``args.threads`` becomes what torch reports) and ``--allocator``; the
    environment record."""
    if args.threads < 1:
        raise SystemExit(f"--threads={args.threads}; expected >= 1")
    torch.set_num_threads(args.threads)
    args.threads = torch.get_num_threads()
    return dict(environment(threads=args.threads), allocator=keep_freed_memory(args.allocator))


def _busy_jiffies() -> int | None:
    """Non-idle CPU time of the whole machine, in clock ticks (Linux ``/proc/stat``)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except OSError:
        return None
    return sum(fields) - fields[3] - fields[4]  # minus idle and iowait


class CpuShare:
    """Context manager: how much CPU *other* processes used while it was open.

    Other = all non-idle time (``/proc/stat``) minus this process's own user+system time (children
    included, for the memory subprocesses): ``other_s`` seconds, and ``other`` as a share of wall
    time × cores. Both count in clock ticks (10 ms), so :meth:`quiet` allows two ticks of rounding
    noise.
    """

    def __enter__(self) -> CpuShare:
        self._wall, self._busy, self._own = (
            time.perf_counter(),
            _busy_jiffies(),
            self._own_seconds(),
        )
        self.other = self.other_s = None
        return self

    @staticmethod
    def _own_seconds() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def __exit__(self, *exc) -> None:
        busy = _busy_jiffies()
        self.wall_s = time.perf_counter() - self._wall
        if busy is None or self._busy is None:
            return
        others = (busy - self._busy) / os.sysconf("SC_CLK_TCK") - (self._own_seconds() - self._own)
        self.other_s = max(0.0, others)
        self.other = self.other_s / max(self.wall_s * (os.cpu_count() or 1), 1e-9)

    def quiet(self, max_share: float) -> bool:
        """Whether others took at most ``max_share`` of the CPU (or two clock ticks); True without
        /proc."""
        if self.other_s is None:
            return True
        allowed = max(max_share * self.wall_s * (os.cpu_count() or 1), 2 / os.sysconf("SC_CLK_TCK"))
        return self.other_s <= allowed


def wait_for_quiet(
    *, max_wait_s: float, busy_below: float = 0.05, sample_s: float = 3.0
) -> float | None:
    """Wait (up to ``max_wait_s``) until the machine's busy CPU share over ``sample_s`` is below
    ``busy_below``.

    Returns the last share seen (None without ``/proc/stat``). On a shared 2-core machine another
    process's threads stall every OpenMP parallel region of ours for a whole scheduler slice, which
    makes an operator of many small kernels look tens of times slower: better to measure when quiet.
    """
    deadline = time.perf_counter() + max_wait_s
    while True:
        start, total = _busy_jiffies(), os.sysconf("SC_CLK_TCK") * sample_s * (os.cpu_count() or 1)
        time.sleep(sample_s)
        end = _busy_jiffies()
        if start is None or end is None:
            return None
        share = (end - start) / total
        if share < busy_below or time.perf_counter() > deadline:
            return share
        time.sleep(5.0)


def calls_per_block(
    step: Callable[[], object], *, min_block_s: float, max_calls: int = 1000
) -> int:
    """How many back-to-back calls of ``step`` take at least ``min_block_s`` (timeit's autorange,
    from one call)."""
    start = time.perf_counter()
    step()
    return max(1, min(max_calls, math.ceil(min_block_s / max(time.perf_counter() - start, 1e-9))))


def interleaved(
    steps: Mapping[str, Callable[[], object]],
    *,
    repeats: Mapping[str, int],
    warmup: int,
    threads: int,
    max_other_share: float | None = None,
    max_rounds: int | None = None,
    min_block_s: float = 0.0,
) -> dict:
    """Time every step round-robin, keeping only rounds in which the machine was otherwise quiet.

    A repeat of a step is a block of back-to-back calls lasting about ``min_block_s`` (one call when
    0; :func:`calls_per_block`), timed as a whole and divided by the calls, as ``timeit`` does: a
    step of a few milliseconds then reports its steady-state cost per call instead of the cold start
    that follows another case (evicted caches, fresh pages; docs/benchmarks.md), which a layer
    called every training step does not pay. After ``warmup`` untimed rounds, each round runs every
    step that still lacks quiet repeats once. A round in which other processes took more than
    ``max_other_share`` of the CPU (None: never) is discarded and run again, up to ``max_rounds``
    rounds (default 2 × the most repeats); a step left without ``repeats`` quiet repeats then keeps
    its contended ones too (``quiet_repeats`` says how many were quiet). Returns per step:
    ``timing`` (:class:`Timing`, per call), ``rounds`` (the round of each of its ``timing.times_s``,
    for :func:`paired_ratio`), ``calls_per_block``, ``page_faults`` per call (a fresh large tensor
    costs one minor fault per 4 KiB page, docs/benchmarks.md), ``quiet_repeats``,
    ``discarded_rounds`` and ``others_share`` (the largest share seen in its kept rounds).
    """
    assert torch.get_num_threads() == threads, "set the thread count before timing"
    for _ in range(warmup):
        for step in steps.values():
            step()
    calls = {name: calls_per_block(step, min_block_s=min_block_s) for name, step in steps.items()}
    # per step: (seconds per call, others' share, quiet, round index)
    kept: dict[str, list[tuple[float, float | None, bool, int]]] = {name: [] for name in steps}
    faults = dict.fromkeys(steps, 0)
    discarded = dict.fromkeys(steps, 0)
    max_rounds = max_rounds or 2 * max(repeats.values(), default=1)

    def missing(name: str) -> bool:
        return sum(sample[2] for sample in kept[name]) < repeats[name]

    for round_index in range(max_rounds):
        todo = [name for name in steps if missing(name)]
        if not todo:
            break
        times = {}
        with CpuShare() as share:
            for name in todo:
                before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                start = time.perf_counter()
                for _ in range(calls[name]):
                    steps[name]()
                times[name] = (time.perf_counter() - start) / calls[name]
                faults[name] += (
                    resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
                ) / calls[name]
        quiet = max_other_share is None or share.quiet(max_other_share)
        for name, seconds in times.items():
            kept[name].append((seconds, share.other, quiet, round_index))
            discarded[name] += not quiet
    result = {}
    for name, samples in kept.items():
        chosen = [s for s in samples if s[2]] or samples
        result[name] = dict(
            timing=_timing([s[0] for s in chosen], warmup=warmup, threads=threads),
            calls_per_block=calls[name],
            rounds=[s[3] for s in chosen],
            page_faults=faults[name] / len(samples),
            quiet_repeats=sum(s[2] for s in samples),
            discarded_rounds=discarded[name],
            others_share=max((s[1] or 0.0) for s in chosen),
        )
    return result


GEMM_SIZE = 2048  # the reference product: GEMM_SIZE³ float32, the machine's achievable FLOP rate


def gemm_steps(device: str = "cpu") -> tuple:
    """The reference GEMM (float32) as (step, step): it has no backward, so both timings run the
    same product."""
    a, b = (
        torch.randn(GEMM_SIZE, GEMM_SIZE, device=device),
        torch.randn(GEMM_SIZE, GEMM_SIZE, device=device),
    )
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)

    def step() -> None:
        torch.matmul(a, b)
        sync()

    return step, step


def gemm_gflops(threads: int, *, device: str = "cpu", repeats: int = 3) -> float:
    """The reference GEMM's rate now at ``threads`` torch threads, GFLOP/s (median of ``repeats``
    after one warm-up), the machine's speed beside a wall time taken on it. Leaves the thread count
    as it found it."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        timed = interleaved(
            {"gemm": gemm_steps(device)[0]}, repeats={"gemm": repeats}, warmup=1, threads=threads
        )
    finally:
        torch.set_num_threads(before)
    return 2 * GEMM_SIZE**3 / timed["gemm"]["timing"].median_s / 1e9


def paired_ratio(slow: dict, fast: dict) -> float:
    """Median over the rounds both were timed in of ``slow / fast`` per-call time (two
    :func:`interleaved` entries).

    A ratio taken within a round cancels what the machine did to both during it (a slow phase of a
    shared host stretches every case of the round); with fewer than three common rounds it falls
    back to the ratio of the medians.
    """
    slow_by_round = dict(zip(slow["rounds"], slow["timing"].times_s))
    pairs = [
        slow_by_round[r] / t
        for r, t in zip(fast["rounds"], fast["timing"].times_s)
        if r in slow_by_round
    ]
    if len(pairs) < 3:
        return slow["timing"].median_s / fast["timing"].median_s
    return float(np.median(pairs))


def _timing(times: Sequence[float], *, warmup: int, threads: int) -> Timing:
    p25, median, p75 = np.percentile(times, [25, 50, 75])
    return Timing(
        median_s=float(median),
        p25_s=float(p25),
        p75_s=float(p75),
        min_s=min(times),
        repeats=len(times),
        warmup=warmup,
        threads=threads,
        times_s=tuple(times),
    )


def fit_exponent(tokens: Sequence[int], seconds: Sequence[float]) -> dict:
    """Least-squares slope of ``log t = a·log N + b``
    (:func:`gridmix.analysis.scaling.fit_power_law`, three token counts or more), with its R², its
    95% t-interval and the token range it covers."""
    slope, _, r2, interval = fit_power_law(tokens, seconds)
    return dict(exponent=slope, r2=r2, interval=list(interval), tokens=[int(n) for n in tokens])


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """The Markdown table of the report writers (:func:`gridmix.report.format.markdown_table`), its
    cells written with ``str``, as one string."""
    lines = report_format.markdown_table(headers, [[str(cell) for cell in row] for row in rows])
    return "\n".join(lines) + "\n"


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            data, indent=1, default=lambda o: o.to_dict() if hasattr(o, "to_dict") else str(o)
        )
    )


def tracks_with_generated_data(names: str) -> tuple[list, dict[str, str]]:
    """The registered tracks named in ``names`` (comma-separated; empty: all, sorted) that make
    their data on their default grid, and ``{name: reason}`` for those that read files they were
    not given (skipped)."""
    from gridmix.tracks.budget import DataSizes
    from gridmix.tracks.plugin_loader import load_registry

    registry = load_registry()
    tracks, skipped = [], {}
    for name in names.split(",") if names else sorted(registry.tracks):
        track = registry.track(name)
        try:
            track.make_data(track.default_grid, 0, DataSizes(4, 1, 1))
        except ValueError as error:  # a track that reads files it was not given
            skipped[name] = str(error).splitlines()[0]
            continue
        tracks.append(track)
    return tracks, skipped


def print_rows(table: str, rows: list[dict], skipped: dict[str, str], json_path: Path | None):
    """``table``, then a line per skipped track, and with ``json_path`` the rows and the skipped
    tracks written there as JSON."""
    print(table)
    for name, reason in skipped.items():
        print(f"skipped {name}: {reason}")
    if json_path:
        json_path.write_text(json.dumps(dict(rows=rows, skipped=skipped), indent=1))


def length_sweep_main(
    description: str,
    json_name: str,
    cases: Callable[[int], Mapping[str, Callable[[], object]]],
    *,
    names: Sequence[str],
    reference: str,
    repeats: int,
    record: Mapping[str, object] | None = None,
    before: Callable[[], None] | None = None,
) -> None:
    """The ``main`` of a benchmark that times ``cases(n)`` at each ``--lengths`` n, every case as a
    ratio to one.

    Parses ``--out``, ``--lengths``, ``--repeats`` and the machine arguments, runs ``before`` (e.g.
    a correctness check), times each point's cases in interleaved rounds, and writes
    ``DIR/json_name`` with ``fwdbwd_ms`` and ``over_<reference>`` (:func:`paired_ratio`) per case,
    plus ``record``; prints a table with one column per name in ``names`` ("–" where a point lacks
    that case).
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, required=True, help=f"directory for {json_name}")
    parser.add_argument(
        "--lengths", type=int, nargs="*", default=[1024, 4096, 16384], help="causal axis lengths"
    )
    parser.add_argument("--repeats", type=int, default=repeats)
    add_machine_arguments(parser)
    args = parser.parse_args()
    env = set_up_machine(args)
    if before is not None:
        before()
    ratio_key = f"over_{reference}"
    rows, result = [], dict(environment=env, **(record or {}), points={})
    for n in args.lengths:
        steps = cases(n)
        timed = interleaved(
            steps,
            repeats={name: args.repeats for name in steps},
            warmup=1,
            threads=args.threads,
            max_other_share=args.max_other_share,
        )
        ref = dict(timing=timed[reference]["timing"], rounds=timed[reference]["rounds"])
        point = {
            name: {
                "fwdbwd_ms": 1e3 * entry["timing"].median_s,
                ratio_key: paired_ratio(dict(timing=entry["timing"], rounds=entry["rounds"]), ref),
            }
            for name, entry in timed.items()
        }
        result["points"][n] = point
        rows.append(
            [
                n,
                *(
                    f"{point[k]['fwdbwd_ms']:.3g} ({point[k][ratio_key]:.2f}×)"
                    if k in point
                    else "–"
                    for k in names
                ),
            ]
        )
        print(
            f"n={n}: " + ", ".join(f"{k} {v['fwdbwd_ms']:.3g} ms" for k, v in point.items()),
            flush=True,
        )
    write_json(args.out / json_name, result)
    print(markdown_table(["n", *names], rows))
