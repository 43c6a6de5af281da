"""``gridmix info``: the versions, the CPU and its vector ISA, the torch threads, and what the
native kernels were built with (compiler, flags, ISA and lanes, OpenMP, cache path), as text or
``--json``."""

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
    return dict(
        gridmix=__version__,
        python=platform.python_version(),
        torch=torch.__version__,
        machine=platform.machine(),
        **cpu_facts(),
        torch_threads=torch.get_num_threads(),
        native=build.as_dict() if build else None,
        native_enabled=native_enabled(),
    )


@app.command("info")
def info(
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON, not text."),
) -> None:
    """Show the versions, the CPU, the torch threads and how the native kernels were built (vector
    ISA, OpenMP)."""
    summary = machine_summary()
    typer.echo(json.dumps(summary, indent=2) if as_json else machine_text(summary))


def machine_text(summary: dict) -> str:
    """:func:`machine_summary`'s facts as ``gridmix info`` prints them: versions, CPU, then the
    native build."""
    from gridmix.mixers.concentration.ops.native_build import describe

    model = f", {summary['cpu_model']}" if summary["cpu_model"] else ""
    lines = [
        f"gridmix {summary['gridmix']}, torch {summary['torch']}, Python {summary['python']}",
        f"CPU: {summary['cpu']} ({summary['machine']}{model}), vector ISA {summary['cpu_isa']}; "
        f"torch's CPU kernels {summary['torch_cpu_capability']}, {summary['torch_threads']} torch "
        "threads",
    ]
    if summary["isa_environment"]:
        lines.append(
            "  set: "
            + " ".join(f"{name}={value}" for name, value in summary["isa_environment"].items())
        )
    return "\n".join([*lines, describe()])
