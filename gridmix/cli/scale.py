"""``gridmix scale``: time, FLOPs and peak memory of every model of a track against the grid size.

``gridmix scale --track image --grids 16x16,32x32,64x64`` runs
:func:`gridmix.analysis.scaling.scale_track` (docs/design.md section 5, Scaling; definitions in
docs/analysis.md), shows a table of the points and of the fitted log-log exponents, and writes
``scaling.json`` and ``scaling.png`` to ``--out``.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from gridmix.cli.app import DEFAULT_TRACK, app, console, fail
from gridmix.cli.options import Device
from gridmix.cli.tables import Column, TextTable
from gridmix.core.files import write_atomic
from gridmix.core.inputs import parse_grids, parse_names
from gridmix.report.format import fmt


def _table(
    title: str, headers: list[str], rows: list[list[str]], *, text_columns: int
) -> TextTable:
    """A table whose first ``text_columns`` columns are names (model, grid) and the rest numbers."""
    columns = tuple(
        Column(header, "name" if index < text_columns else "number")
        for index, header in enumerate(headers)
    )
    return TextTable(
        title=title, columns=columns, rows=[tuple(escape(cell) for cell in row) for row in rows]
    )


def points_table(result: dict) -> tuple[TextTable, list[str]]:
    """The points, and the notes (skip reasons, failures) the table refers to by number."""
    rows, notes = [], []
    for p in result["points"]:
        timing = p["timing"]
        time = (
            f"{fmt(p['time_ms'])} ({fmt((timing['p75_s'] - timing['p25_s']) * 1e3)})"
            if timing
            else "–"
        )
        text = p["skipped"] or "; ".join(p["notes"])
        if text:
            notes.append(f"[{len(notes) + 1}] {p['model']} {p['grid']}: {text}")
        rows.append(
            [
                p["model"],
                p["grid"],
                fmt(p["tokens"]),
                fmt(p["params"]),
                fmt(p["gflops"]),
                time,
                fmt(p["peak_mb"]),
                f"[{len(notes)}]" if text else "",
            ]
        )
    title = (
        f"scaling on {result['track']}: forward+backward, batch {result['batch']}, "
        f"{result['device']}, {result['threads']} thread(s)"
    )
    headers = ["model", "grid", "N", "params", "GFLOP", "ms (IQR)", "peak MB", "note"]
    return _table(title, headers, rows, text_columns=2), notes


def fits_table(result: dict) -> TextTable:
    """The fitted exponents; R² only for fits of three grids or more (a line through two points
    always fits)."""
    rows = [
        [
            f["model"],
            f["quantity"],
            fmt(f["exponent"]),
            fmt(f["r2"]),
            fmt(f["tail_exponent"]),
            fmt(f["points"]),
        ]
        for f in result["fits"]
    ]
    return _table(
        "log-log exponents against N (y ∝ N^a); tail: the largest 2 grids; R² from 3 grids up",
        ["model", "quantity", "a", "R²", "a tail", "grids"],
        rows,
        text_columns=2,
    )


@app.command("scale")
def scale(
    track: str = typer.Option(
        DEFAULT_TRACK,
        help="Track name (see `gridmix tracks`), or MODULE:ATTRIBUTE for a track not registered "
        "as a plugin, e.g. gridmix.analysis.causal_scaling:sequence (the causal mixer against "
        "causal SDPA; :video for a causal time axis).",
    ),
    grids: str = typer.Option(
        None,
        help="Comma-separated grids, e.g. 16x16,32x32,64x64 (default: the track's "
        "default grid and two halvings).",
    ),
    models: str = typer.Option(
        None, help="Comma-separated models (default: all the track offers)."
    ),
    out: Path = typer.Option(
        None, help="Output directory for scaling.json and scaling.png (default: runs/scale-TRACK)."
    ),
    threads: int = typer.Option(
        None, min=1, help="Torch threads, recorded with every timing (default: torch's)."
    ),
    repeats: int = typer.Option(
        5, min=1, help="Timed forward+backward steps per point (the median is reported)."
    ),
    warmup: int = typer.Option(2, min=0, help="Untimed steps before timing."),
    batch: int = typer.Option(8, min=1, help="Samples per step."),
    device: Device = "auto",
    memory: bool = typer.Option(
        True, "--memory/--no-memory", help="Measure peak memory (a fresh process per point)."
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print the result as JSON on stdout instead of tables."
    ),
) -> None:
    """Measure time, FLOPs and peak memory of a track's models over grid sizes; fit exponents
    against N."""
    try:  # the cheap checks, before torch and the plugins load (docs/guide.md, "Input checks")
        given = parse_grids(grids, "--grids") if grids is not None else None
        names = list(parse_names(models, "--models")) if models is not None else None
    except ValueError as error:
        fail(str(error))
    from gridmix.analysis.scaling import ScalingConfig, resolve_track, scale_track, scaling_grids
    from gridmix.report.plots import plot_scaling
    from gridmix.study.train import resolve_device

    try:
        chosen = resolve_track(track)
        parsed = (
            [chosen.check_grid(g) for g in given]
            if given is not None
            else scaling_grids(chosen.default_grid)
        )
        names = names if names is not None else [m.name for m in chosen.models]
        for name in names:
            chosen.model(name)
        config = ScalingConfig(
            batch=batch,
            threads=threads,
            repeats=repeats,
            warmup=warmup,
            device=resolve_device(device.value).type,
            memory=memory,
            track_ref=track,
        )
    except ValueError as error:
        fail(str(error))
    out = out or Path("runs") / f"scale-{chosen.name}"
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=as_json or not console.is_terminal,
    )
    with progress:
        task = progress.add_task("scaling", total=len(parsed) * len(names))

        def on_start(model: str, grid) -> None:
            progress.update(task, description=f"{model} {grid}")

        def on_point(point) -> None:
            progress.advance(task)
            # a log file: one plain line per finished point
            if not as_json and not console.is_terminal:
                measured = f"{point.timing.median_s * 1e3:.3g} ms" if point.timing else "not timed"
                console.print(
                    f"done {point.model} {point.grid}: {point.skipped or measured}",
                    highlight=False,
                    markup=False,
                )

        result = scale_track(
            chosen, parsed, models=names, config=config, on_start=on_start, on_point=on_point
        ).to_dict()
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_atomic(out / "scaling.json", json.dumps(result, indent=2))
        plot_scaling(result, out / "scaling.png")
    except OSError as error:
        fail(
            f"{error.filename if error.filename is not None else out}: {error.strerror or error} "
            f"({type(error).__name__})"
        )
    measured = [p for p in result["points"] if p["time_ms"] is not None or p["gflops"] is not None]
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        if not measured:
            raise typer.Exit(1)
        return
    stdout = Console()
    table, notes = points_table(result)
    table.print(stdout)
    for note in notes:
        stdout.print(note, highlight=False, soft_wrap=True, markup=False)
    fits_table(result).print(stdout)
    loads = [load for load in result["load_average"] if load is not None]
    if loads and result["cpu_count"] and max(loads) > result["cpu_count"]:
        console.print(
            f"[yellow]warning:[/] 1-minute load average {max(loads):.1f} on {result['cpu_count']} "
            "CPUs: other processes competed for the cores, so the timings are inflated and noisy",
            highlight=False,
        )
    console.print(f"wrote {out / 'scaling.json'} and {out / 'scaling.png'}", highlight=False)
    if not measured:  # every point failed or was skipped: the command did not do its work
        console.print(
            f"[red]error:[/] no point of {len(result['points'])} was measured (see the notes "
            "above)",
            highlight=False,
        )
        raise typer.Exit(1)
