"""The Typer application every ``gridmix`` sub-command registers on (one module per command)."""

import typer

app = typer.Typer(
    name="gridmix",
    help="Does a structured token mixer beat attention on your grids? Paired-seed comparisons, scaling, mechanism.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
