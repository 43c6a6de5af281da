"""``gridmix mixers``: every registered token mixer, its capabilities (grid ranks, causal form,
prefix tokens, resolution change, ablation, mechanism analysis) and the plugin it comes from, as a
table or ``--json``."""

from __future__ import annotations

import json
from types import SimpleNamespace

import typer
from rich.markup import escape

from gridmix.cli.app import app
from gridmix.cli.tables import Column
from gridmix.cli.tracks import print_listing

CAUSAL_WORDS = {"none": "no (sees every token)", "first": "first axis", "any": "any axes"}


def mixers_summary() -> dict:
    """The registered mixers and the broken plugins as JSON-ready data (what ``gridmix mixers
    --json`` prints)."""
    from gridmix.tracks.plugin_loader import load_registry

    registry = load_registry()
    return {
        "mixers": [
            dict(
                name=m.name,
                description=m.description,
                reference=m.reference,
                plugin=m.plugin,
                plugin_version=m.plugin_version,
                **m.capabilities(),
            )
            for m in registry.mixers
        ],
        "broken": [
            {"name": b.name, "version": b.version, "error": b.error} for b in registry.broken
        ],
    }


@app.command("mixers")
def mixers(
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON, not a table."),
) -> None:
    """List the registered token mixers, what each can serve, and the plugin that added it."""
    summary = mixers_summary()
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    rows = []
    for m in summary["mixers"]:
        ranks = "any" if m["grid_ranks"] == "any" else ", ".join(f"{d}-d" for d in m["grid_ranks"])
        limit = f"\n≤ {m['max_tokens']:,} tokens" if m["max_tokens"] else ""
        rows.append(
            (
                f"[bold]{escape(m['name'])}[/]\n[dim]{escape(m['description'])}; "
                f"{escape(m['reference'])}[/]",
                ranks + limit,
                CAUSAL_WORDS[m["causal"]],
                "yes" if m["prefix_tokens"] else "no",
                "yes" if m["resolution_change"] else "no",
                escape(m["ablation"] or "–"),
                "yes" if m["mechanism"] else "–",
                escape(f"{m['plugin']} {m['plugin_version']}".strip()),
            )
        )
    print_listing(
        title="gridmix mixers",
        rows=rows,
        columns=(
            Column("mixer", "name"),
            Column("grids"),
            Column("causal"),
            Column("prefix"),
            Column("regrid"),
            Column("ablation", "name"),
            Column("mechanism"),
            Column("plugin", "name"),
        ),
        caption="grids: the grid ranks it takes; causal: exactly causal along which axes; prefix: "
        "takes class/register tokens; regrid: the same parameters on another grid; use one with "
        "`gridmix run --idea NAME` or `--baselines A,B`",
        broken=[SimpleNamespace(**plugin) for plugin in summary["broken"]],
    )
