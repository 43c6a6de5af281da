"""``gridmix tracks``: the installed tracks, their models and settings, whether their data is at
hand, their plugins of origin, and the broken plugins."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape

from gridmix.cli.app import app
from gridmix.cli.tables import Column, TextTable

if TYPE_CHECKING:  # the registry imports torch; the command imports it when it runs
    from gridmix.tracks import Track
    from gridmix.tracks.plugin_loader import Registry


def registry_summary(registry: Registry) -> dict:
    """The registry as plain JSON-ready data (what ``gridmix tracks --json`` prints)."""
    return {
        "tracks": [_track_summary(track) for track in registry.tracks.values()],
        "broken": [
            {"name": b.name, "version": b.version, "error": b.error} for b in registry.broken
        ],
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
        "settings": dict(track.settings),
        "ladder": list(track.ladder),
        "other_grids": track.fixed_grid or "defined",
        "models": [
            {
                "name": spec.name,
                "role": spec.role,
                "description": spec.description,
                "plugin": spec.plugin,
                "plugin_version": spec.plugin_version,
                "matched_baseline": spec.name == track.matched_baseline,
            }
            for spec in track.models
        ],
    }


def data_status(track: Track) -> tuple[str, str]:
    """``("generated" | "found" | "missing", detail)``: whether the track needs data, and if so
    whether it is there.

    The detail is the data's source when found (empty when the track does not name it), the reason
    when missing.
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
        label = f"[bold green]{escape(name)}[/] (idea)"
    elif name == track.matched_baseline:
        label = f"{escape(name)} (matched)"
    else:
        label = escape(name)
    return label if plugin == track.plugin else f"{label} [dim]+{escape(plugin)}[/]"


@app.command("tracks")
def tracks(
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON, not tables."),
) -> None:
    """List installed tracks (grid, metric, models, data, plugin of origin) and plugins that failed
    to load."""
    from gridmix.tracks.plugin_loader import load_registry

    registry = load_registry()
    if as_json:
        typer.echo(json.dumps(registry_summary(registry), indent=2))
        return
    rows = []
    for track in registry.tracks.values():
        arrow = "↓" if track.direction == "lower" else "↑"
        models = "\n".join(_model_label(track, m.name, m.role, m.plugin) for m in track.models)
        plugin = f"{track.plugin} {track.plugin_version}".strip()
        settings = ", ".join(f"{name}={value}" for name, value in track.settings.items())
        description = escape(track.description) + (
            f"\nsettings: {escape(settings)}" if settings else ""
        )
        rows.append(
            (
                f"[bold]{escape(track.name)}[/]\n[dim]{description}[/]",
                f"{track.ndim}-d\n{track.default_grid}",
                f"{escape(track.metric_name)} {arrow}",
                models,
                _data_cell(track),
                escape(plugin),
            )
        )
    if not registry.tracks:
        rows.append(("[dim](none installed)[/]", "", "", "", "", ""))
    print_listing(
        title="gridmix tracks",
        rows=rows,
        columns=(
            Column("track", "name"),
            Column("grid", "name"),
            Column("metric"),
            Column("models", "name"),
            Column("data"),
            Column("plugin", "name"),
        ),
        caption="↓ lower / ↑ higher is better; (idea): the concentration mixer; (matched): the "
        "baseline it differs from in the token mixer only; +name: added by that plugin; data: "
        "generated, or read from disk (found, or missing and how to give it)",
        broken=registry.broken,
    )


def print_listing(*, broken, **table) -> None:
    """Print the listing of ``gridmix tracks`` or ``gridmix mixers``: the :class:`TextTable` of
    ``table`` (its title, columns, rows and caption), a line between its rows and each row a record
    on a narrow terminal, then the ``broken`` plugins, if any."""
    console = Console()
    TextTable(**table, lines=True, records_when_narrow=True).print(console)
    if broken:
        broken_table(broken).print(console)


def broken_table(broken) -> TextTable:
    """The plugins that failed to load, each with its one-line error (``gridmix tracks`` and
    ``gridmix mixers``)."""
    return TextTable(
        title="broken plugins",
        title_style="bold red",
        columns=(Column("plugin", "name"), Column("error")),
        rows=[
            (escape(f"{plugin.name} {plugin.version}".strip()), escape(plugin.error))
            for plugin in broken
        ],
    )
