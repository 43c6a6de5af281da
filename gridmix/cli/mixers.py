"""``gridmix mixers``: every registered token mixer, its capabilities (grid ranks, causal form, prefix tokens,
resolution change, ablation, mechanism analysis) and the plugin it comes from, as a table or ``--json``."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from gridmix.cli.app import app
from gridmix.tracks.registry import load_registry

CAUSAL_WORDS = {"none": "no (sees every token)", "first": "first axis", "any": "any axes"}


def mixers_summary() -> dict:
    """The registered mixers and the broken plugins as JSON-ready data (what ``gridmix mixers --json`` prints)."""
    registry = load_registry()
    return {"mixers": [dict(name=m.name, description=m.description, reference=m.reference, plugin=m.plugin,
                            plugin_version=m.plugin_version, **m.capabilities()) for m in registry.mixers],
            "broken": [{"name": b.name, "version": b.version, "error": b.error} for b in registry.broken]}


@app.command("mixers")
def mixers(as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON, not a table.")) -> None:
    """List the registered token mixers, what each can serve, and the plugin that added it."""
    summary = mixers_summary()
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    table = Table(title="gridmix mixers", show_lines=True,
                  caption="grids: the grid ranks it takes; causal: exactly causal along which axes; prefix: takes "
                          "class/register tokens; regrid: the same parameters on another grid; use one with "
                          "`gridmix run --idea NAME` or `--baselines A,B`")
    for column in ("mixer", "grids", "causal", "prefix", "regrid", "ablation", "mechanism", "plugin"):
        table.add_column(column, overflow="fold")
    for m in summary["mixers"]:
        ranks = "any" if m["grid_ranks"] == "any" else ", ".join(f"{d}-d" for d in m["grid_ranks"])
        limit = f"\n≤ {m['max_tokens']} tokens" if m["max_tokens"] else ""
        table.add_row(f"[bold]{m['name']}[/]\n[dim]{m['description']}; {m['reference']}[/]", ranks + limit,
                      CAUSAL_WORDS[m["causal"]], "yes" if m["prefix_tokens"] else "no",
                      "yes" if m["resolution_change"] else "no", m["ablation"] or "–",
                      "yes" if m["mechanism"] else "–", f"{m['plugin']} {m['plugin_version']}".strip())
    console = Console()
    console.print(table)
    if summary["broken"]:
        broken = Table(title="broken plugins", title_style="bold red")
        broken.add_column("plugin", no_wrap=True)
        broken.add_column("error", overflow="fold")
        for plugin in summary["broken"]:
            broken.add_row(f"{plugin['name']} {plugin['version']}".strip(), plugin["error"])
        console.print(broken)
