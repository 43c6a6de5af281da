"""The Typer application every ``gridmix`` sub-command registers on (one module per command), and
what the commands share: the stderr console, :func:`fail` (a user mistake in one line, exit status
2), the choices of ``--budget``, ``--device`` and ``--executor`` (:func:`choice`: a mistyped one
gets a did-you-mean), the help text naming each budget's contents, and the help's layout (plain
text that wraps at spaces only, so no value is cut or split at any width, 80 columns included).

Nothing here, nor in any command module at import time, imports torch: ``gridmix --help`` and
``gridmix run --help`` answer at once; each command imports what it needs when it runs."""

import textwrap
from collections.abc import Sequence
from enum import Enum

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from gridmix.core.suggest import did_you_mean
from gridmix.core.version import __version__
from gridmix.tracks.budget import BUDGETS, MAX_SEEDS, describe

# a log file gets whole lines, never wrapped at 80 columns
console = Console(stderr=True, soft_wrap=True)


def fail(message: str) -> None:
    """A user mistake (or a file system that refuses): one line on stderr, exit status 2."""
    console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


class _HelpFormatter(typer.Context.formatter_class):
    """Click's help layout (option or command, then its text) wrapping each text at spaces only:
    Click's own wrapping also breaks at hyphens (``runs/TRACK-GRID-`` / ``BUDGET``) and inside
    words longer than the line, where this keeps every word whole."""

    def write_dl(self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2):
        rows = list(rows)
        first_col = min(max((len(first) for first, _ in rows), default=0), col_max) + col_spacing
        indent = " " * (first_col + self.current_indent)
        wrapper = textwrap.TextWrapper(
            width=max(self.width - first_col - 2, 10),
            break_long_words=False,
            break_on_hyphens=False,
        )
        for first, second in rows:
            self.write(f"{'':>{self.current_indent}}{first}")
            if not second:
                self.write("\n")
                continue
            if len(first) <= first_col - col_spacing:
                self.write(" " * (first_col - len(first)))
            else:
                self.write("\n" + indent)
            lines = wrapper.wrap(second) or [""]
            self.write("\n".join([lines[0], *(indent + line for line in lines[1:])]) + "\n")


class _HelpContext(typer.Context):
    """Every command's context: its help is laid out by :class:`_HelpFormatter`."""

    formatter_class = _HelpFormatter


class _OneLineErrors(TyperGroup):
    """A bad option value that Typer or Click catches (an unknown choice, a number out of range) is
    reported like every other user mistake: ``error: …`` in one line, exit status 2, not a usage
    box. Help, the group's and every command's, is plain text laid out by :class:`_HelpFormatter`,
    each command listed with its whole first paragraph (Click cuts it to the line with ``...``)."""

    context_class = _HelpContext

    def get_command(self, ctx: typer.Context, cmd_name: str):
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            command.context_class = _HelpContext
        return command

    def format_commands(self, ctx: typer.Context, formatter: _HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                first = (command.help or "").split("\n\n")[0]
                rows.append((name, " ".join(first.split())))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: typer.Context):
        try:
            return super().invoke(ctx)
        # Typer's own Click (typer._click), not the click package
        except typer.BadParameter as error:
            fail(error.format_message())


# smoke, default, full
BudgetName = Enum("BudgetName", [(name, name) for name in BUDGETS], type=str)


def choice(names: type[Enum], noun: str) -> dict:
    """The ``typer.Option`` settings of an option taking one of ``names`` (an ``Enum`` of strings),
    each value ``noun`` (``"a budget"``): the choices as its metavar, and a parser refusing any
    other value in one line with the closest choice (``'smok' is not a budget; did you mean
    'smoke'? expected smoke, default or full``)."""
    values = [member.value for member in names]
    expected = ", ".join(values[:-1]) + " or " + values[-1]

    def parse(text: str | Enum) -> Enum:
        if isinstance(text, names):
            return text
        if text not in values:
            raise typer.BadParameter(
                f"{text!r} is not {noun}{did_you_mean(text, values)} expected {expected}"
            )
        return names(text)

    return dict(parser=parse, metavar="|".join(values))


BUDGET_HELP = (
    "Run budget, before the track's changes (`gridmix budgets --track T`): "
    + "; ".join(f"{name}: {describe(budget)}" for name, budget in BUDGETS.items())
    + "."
)
SEEDS_HELP = (
    f"Paired comparison seeds, 2 to {MAX_SEEDS}, instead of the budget's ("
    + ", ".join(f"{name} {budget.seeds}" for name, budget in BUDGETS.items())
    + ")."
)
LRS_HELP = (
    "Learning rates to sweep, e.g. 1e-3,3e-3, instead of the budget's ("
    + "; ".join(
        f"{name} {','.join(f'{lr:g}' for lr in budget.lrs)}" for name, budget in BUDGETS.items()
    )
    + ")."
)
EPOCHS_HELP = (
    "Epochs per run, instead of the budget's ("
    + ", ".join(f"{name} {budget.epochs}" for name, budget in BUDGETS.items())
    + "); recorded in the report and every run's key."
)
N_TRAIN_HELP = (
    "Training samples per run, instead of the budget's ("
    + ", ".join(f"{name} {budget.n_train}" for name, budget in BUDGETS.items())
    + "); recorded in the report and every run's key."
)
TRACK_HELP = "Track name (see `gridmix tracks`)."
DEFAULT_TRACK = "image"


class DeviceName(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


DEVICE_HELP = "auto (cuda when available, else cpu), cpu or cuda."
PRECISION_HELP = "auto (bf16 mixed precision on CUDA, fp32 on CPU), fp32, bf16 or fp16."
EXECUTOR_HELP = "local (this machine) or ray (a Ray cluster)."
JOBS_HELP = (
    "Local worker processes: auto (one per core, one thread each, on the CPU; one on CUDA) or a "
    "number (the cores are split between them)."
)
ADDRESS_HELP = "Ray cluster address HOST:PORT (with --executor ray; default: start a local Ray)."
THREADS_HELP = "Torch threads per run (default: cores / jobs; 1 with --jobs auto on the CPU)."


class ExecutorName(str, Enum):
    local = "local"
    ray = "ray"


app = typer.Typer(
    name="gridmix",
    help="Does a structured token mixer beat attention on your grids? Paired-seed comparisons, "
    "scaling, mechanism.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=_OneLineErrors,
    rich_markup_mode=None,  # plain help, laid out by _HelpFormatter
    context_settings={"help_option_names": ["-h", "--help"]},
)
"""The ``gridmix`` command line: ``tracks``, ``mixers``, ``budgets``, ``run``, ``sweep``, ``suite``,
``report``, ``runs``, ``status``, ``export``, ``scale``, ``info`` (docs/design.md section 7)."""


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"gridmix {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False,
        "--version",
        is_eager=True,
        callback=_print_version,
        help="Print gridmix's version and exit.",
    ),
) -> None:
    """Does a structured token mixer beat attention on your grids? Paired-seed comparisons, scaling,
    mechanism."""
