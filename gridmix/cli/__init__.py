"""The ``gridmix`` command line: ``tracks``, ``run``, ``scale``, ``report`` (DESIGN.md section 7)."""

from gridmix.cli.app import app

__all__ = ["app"]
