"""The ``gridmix`` command line: ``tracks``, ``mixers``, ``budgets``, ``run``, ``sweep``, ``suite``,
``report``, ``runs``, ``status``, ``export``, ``scale``, ``info`` (docs/design.md section 7). No
module here imports torch until a command runs."""

from gridmix.cli import info as _info  # noqa: F401  (registers `info`)
from gridmix.cli import mixers as _mixers  # noqa: F401  (registers `mixers`)
from gridmix.cli import run as _run  # noqa: F401  (registers `run` and `report`)
from gridmix.cli import scale as _scale  # noqa: F401
from gridmix.cli import studies as _studies  # noqa: F401  (budgets, runs, status, export)
from gridmix.cli import suite as _suite  # noqa: F401  (registers `suite`)
from gridmix.cli import sweep as _sweep  # noqa: F401  (registers `sweep`)
from gridmix.cli import tracks as _tracks  # noqa: F401  (registers `tracks`)
from gridmix.cli.app import app

__all__ = ["app"]
