"""Names a package exports but imports on first use (PEP 562), so that importing the package (and
the command line's ``--help``) costs no torch: :func:`lazy_names` gives a package its
``__getattr__`` and ``__dir__``."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_names(
    package: str, sources: Mapping[str, str], namespace: dict
) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` for ``package`` whose names ``sources`` maps to the modules
    defining them.

    A name is imported from its module when first read and then kept in ``namespace`` (the package's
    globals), so the next read is a plain lookup; a name the package does not export is an
    ``AttributeError``, as usual.
    """

    def __getattr__(name: str):
        source = sources.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *sources})

    return __getattr__, __dir__
