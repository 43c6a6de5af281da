"""The mixers' fast-path switches in one place, as timm's ``layers/config.py``: the fused native CPU
kernels (``GRIDMIX_NATIVE``, on unless ``0``; :func:`set_native`).

Each switch is the program's choice where one was made, else its environment variable, and is read
on every call (a dispatch site asks :func:`native_enabled`), so a change takes effect on the next
call; a function already compiled by ``torch.compile`` keeps the choice it was traced with.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class _Switch:
    """One fast path's switch: the setter's name (for errors), its variable, its default, and the
    choice made."""

    setter: str
    variable: str
    default: bool
    choice: bool | None = None

    def set(self, enabled: bool | None) -> None:
        if enabled is not None and not isinstance(enabled, bool):
            raise TypeError(f"{self.setter}(enabled={enabled!r}); expected True, False or None")
        self.choice = enabled

    def enabled(self) -> bool:
        if self.choice is not None:
            return self.choice
        value = os.environ.get(self.variable)
        if value is None:
            return self.default
        return value != "0" if self.default else value == "1"


_NATIVE = _Switch("set_native", "GRIDMIX_NATIVE", default=True)


def set_native(enabled: bool | None) -> None:
    """Use the fused native kernels (``True``), the torch ops (``False``), or what
    ``GRIDMIX_NATIVE`` says (``None``; on unless it is ``0``), as timm's ``set_fused_attn``."""
    _NATIVE.set(enabled)


def native_enabled() -> bool:
    """Whether the native kernels are switched on (they are used where they are also built)."""
    return _NATIVE.enabled()


@contextmanager
def native_switched_off() -> Iterator[None]:
    """The torch ops (the path a GPU runs) inside the block, whatever was chosen; the choice made
    before it (or none) after it."""
    previous = _NATIVE.choice
    _NATIVE.set(False)
    try:
        yield
    finally:
        _NATIVE.set(previous)
