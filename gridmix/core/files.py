"""Writing a file whole or not at all: every file gridmix writes (reports, plots, exports, the
kernel cache's entries) goes through :func:`replacing` or :func:`write_atomic`.

The content goes to a temporary file in the target's own directory (``.NAME.RANDOM.tmp``, so the
rename never crosses file systems), is flushed to the disk, and is renamed over the target with
:func:`os.replace`. A failure on the way (a full disk, a crash, a signal) leaves the previous file,
or none, and never half a file; the temporary file is removed on any error.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path


def temporary_name(path: Path) -> Path:
    """A fresh hidden name beside ``path`` for its content in the making."""
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` for the caller to write; once the block ends without
    an error, the file is flushed to the disk and renamed to ``path``. On an error it is removed and
    ``path`` is left as it was.

    For writers that take a path (``savefig``); text and bytes in memory go through
    :func:`write_atomic`.
    """
    path = Path(path)
    temp = temporary_name(path)
    try:
        yield temp
        descriptor = os.open(temp, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def write_atomic(path: str | Path, content: str | bytes) -> Path:
    """Write ``content`` (text as UTF-8) to ``path`` whole or not at all (:func:`replacing`);
    returns ``path``."""
    path = Path(path)
    data = content.encode() if isinstance(content, str) else content
    with (
        replacing(path) as temp,
        open(temp, "xb") as handle,
    ):  # "x": a new file, mode from the umask
        handle.write(data)
    return path
