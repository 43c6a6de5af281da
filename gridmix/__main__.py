"""``python -m gridmix``: the same command line as the ``gridmix`` console script."""

from gridmix.cli import app

app()
