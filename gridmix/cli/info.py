"""``gridmix info``: the versions, the CPU and its vector ISA, the torch threads, and what the native kernels were
built with (compiler, flags, ISA and lanes, OpenMP, cache path), as text or ``--json``."""

from __future__ import annotations

import json
import platform

import typer

from gridmix.cli.app import app


def machine_summary() -> dict:
    """The facts ``gridmix info`` prints, as JSON-ready data (benchmarks record the same)."""
    import torch

    from gridmix.core.version import __version__
    from gridmix.mixers.concentration.ops.native_build import cpu_facts, native_build_info
    from gridmix.mixers.switches import native_enabled

    build = native_build_info()
    return dict(gridmix=__version__, python=platform.python_version(), torch=torch.__version__,
                machine=platform.machine(), **cpu_facts(), torch_threads=torch.get_num_threads(),
                native=build.as_dict() if build else None, native_enabled=native_enabled())


@app.command("info")
def info(as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON, not text.")) -> None:
    """Show the versions, the CPU, the torch threads and how the native kernels were built (vector ISA, OpenMP)."""
    from gridmix.mixers.concentration.ops.native_build import describe

    summary = machine_summary()
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    typer.echo(f"gridmix {summary['gridmix']}, torch {summary['torch']}, Python {summary['python']}")
    model = f", {summary['cpu_model']}" if summary["cpu_model"] else ""
    typer.echo(f"CPU: {summary['cpu']} ({summary['machine']}{model}), vector ISA {summary['cpu_isa']}; "
               f"torch's CPU kernels {summary['torch_cpu_capability']}, {summary['torch_threads']} torch threads")
    if summary["isa_environment"]:
        typer.echo("  set: " + " ".join(f"{name}={value}" for name, value in summary["isa_environment"].items()))
    typer.echo(describe())
