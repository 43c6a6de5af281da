"""The Typer application every ``gridmix`` sub-command registers on (one module per command), and what the
commands share: the stderr console, :func:`fail` (a user mistake in one line, exit status 2) and the
choices Typer validates for ``--budget``, ``--device`` and ``--executor``."""

from enum import Enum

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from gridmix.tracks.budget import BUDGETS

console = Console(stderr=True, soft_wrap=True)  # a log file gets whole lines, never wrapped at 80 columns


def fail(message: str) -> None:
    """A user mistake (or a file system that refuses): one line on stderr, exit status 2."""
    console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


class _OneLineErrors(TyperGroup):
    """A bad option value that Typer or Click catches (an unknown choice, a number out of range) is reported like
    every other user mistake: ``error: …`` in one line, exit status 2, not a usage box."""

    def invoke(self, ctx: typer.Context):
        try:
            return super().invoke(ctx)
        except typer.BadParameter as error:  # Typer's own Click (typer._click), not the click package
            fail(error.format_message())


BudgetName = Enum("BudgetName", [(name, name) for name in BUDGETS], type=str)  # smoke, default, full


class DeviceName(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class ExecutorName(str, Enum):
    local = "local"
    ray = "ray"


app = typer.Typer(
    name="gridmix",
    help="Does a structured token mixer beat attention on your grids? Paired-seed comparisons, scaling, mechanism.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=_OneLineErrors,
)
