"""The "did you mean" hint every error about an unknown name carries (tracks, hooks, plugins, CSV
columns)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """What goes between an unknown name and the list of known ones: ``"; did you mean 'x'?"`` for
    the known name closest to ``name``, or ``";"`` when none is close (``f"unknown track
    {name!r}{hint} installed: …"``)."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ";"
