"""nox sessions: ``tests`` (what CI and the README run), ``lint``.

Each session installs gridmix the way the README does (``pip install -e .[dev]``) and reuses its
environment between runs (``nox.options.reuse_existing_virtualenvs``).
"""

import nox

nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests", "lint"]


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite (a few minutes on 2 CPU cores)."""
    session.install("-e", ".[dev]")
    session.run("pytest", "-q", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the whole tree."""
    session.install("ruff")
    session.run("ruff", "check", ".")
