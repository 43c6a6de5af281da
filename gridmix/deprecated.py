"""Module paths that moved in the reorganisation into layers, kept for one release (as timm kept
``timm.models.layers``): importing an old path warns (``DeprecationWarning``) and gives the new module itself."""

from __future__ import annotations

import importlib
import sys
import warnings


def alias(old: str, new: str) -> None:
    """Make the module ``old`` (being imported) the module ``new``, warning the importer."""
    warnings.warn(f"{old} moved to {new}; the old path will be removed in the next release", DeprecationWarning,
                  stacklevel=3)
    sys.modules[old] = importlib.import_module(new)
