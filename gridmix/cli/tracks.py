"""``gridmix tracks``: the installed tracks, their models and knobs, whether their data is at hand, their plugins of
origin, and the broken plugins."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gridmix.cli.app import app
from gridmix.tracks import Track
from gridmix.tracks.registry import Registry, load_registry


def registry_summary(registry: Registry) -> dict:
    """The registry as plain JSON-ready data (what ``gridmix tracks --json`` prints)."""
    return {
        "tracks": [_track_summary(track) for track in registry.tracks.values()],
        "broken": [{"name": b.name, "version": b.version, "error": b.error} for b in registry.broken],
    }


def _track_summary(track: Track) -> dict:
    return {
        "name": track.name,
        "description": track.description,
        "ndim": track.ndim,
        "default_grid": str(track.default_grid),
        "metric": track.metric_name,
        "direction": track.direction,
        "plugin": track.plugin,
        "plugin_version": track.plugin_version,
        "matched_baseline": track.matched_baseline,
        "data": data_status(track)[0],
        "data_missing": track.data_missing(),
        "knobs": dict(track.knobs),
        "other_grids": track.fixed_grid or "defined",
        "models": [
            {"name": spec.name, "role": spec.role, "description": spec.description, "plugin": spec.plugin,
             "plugin_version": spec.plugin_version, "matched_baseline": spec.name == track.matched_baseline}
            for spec in track.models
        ],
    }


def data_status(track: Track) -> tuple[str, str]:
    """``("generated" | "found" | "missing", detail)``: whether the track needs data, and if so whether it is there.

    The detail is the data's source when found (empty when the track does not name it), the reason when missing.
    """
    if not track.needs_data:
        return "generated", ""
    missing = track.data_missing()
    return ("missing", missing) if missing else ("found", track.source)


def _data_cell(track: Track) -> str:
    status, detail = data_status(track)
    style = {"generated": "dim", "found": "green", "missing": "red"}[status]
    return f"[{style}]{status}[/]" + (f"\n[dim]{escape(detail)}[/]" if detail else "")


def _model_label(track: Track, name: str, role: str, plugin: str) -> str:
    if role == "idea":
        label = f"[bold green]{name}[/] (idea)"
    elif name == track.matched_baseline:
        label = f"{name} (matched)"
    else:
        label = name
    return label if plugin == track.plugin else f"{label} [dim]+{plugin}[/]"


@app.command("tracks")
def tracks(as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON, not tables.")) -> None:
    """List installed tracks (grid, metric, models, data, plugin of origin) and plugins that failed to load."""
    registry = load_registry()
    if as_json:
        typer.echo(json.dumps(registry_summary(registry), indent=2))
        return
    console = Console()
    table = Table(title="gridmix tracks", show_lines=True,
                  caption="↓ lower / ↑ higher is better; (idea): the concentration mixer; (matched): the baseline "
                          "it differs from in the token mixer only; +name: added by that plugin; data: generated, or "
                          "read from disk (found, or missing and how to give it)")
    table.add_column("track", overflow="fold", ratio=3)
    table.add_column("grid", no_wrap=True)
    table.add_column("metric", overflow="fold", ratio=1)
    table.add_column("models", overflow="fold", ratio=3)
    table.add_column("data", overflow="fold", ratio=2)
    table.add_column("plugin", overflow="fold", ratio=1)
    for track in registry.tracks.values():
        arrow = "↓" if track.direction == "lower" else "↑"
        models = "\n".join(_model_label(track, m.name, m.role, m.plugin) for m in track.models)
        plugin = f"{track.plugin} {track.plugin_version}".strip()
        knobs = ", ".join(f"{name}={value}" for name, value in track.knobs.items())
        description = escape(track.description) + (f"\nknobs: {escape(knobs)}" if knobs else "")
        table.add_row(f"[bold]{track.name}[/]\n[dim]{description}[/]", f"{track.ndim}-d\n{track.default_grid}",
                      f"{track.metric_name} {arrow}", models, _data_cell(track), plugin)
    if not registry.tracks:
        table.add_row("[dim](none installed)[/]", "", "", "", "", "")
    console.print(table)
    if registry.broken:
        broken = Table(title="broken plugins", title_style="bold red")
        broken.add_column("plugin", no_wrap=True)
        broken.add_column("error", overflow="fold")
        for plugin in registry.broken:
            broken.add_row(f"{plugin.name} {plugin.version}".strip(), plugin.error)
        console.print(broken)
