"""Writing a many-study report (a sweep's, a suite's): its plots, then its JSON and its Markdown, a
plot that cannot be drawn never costing the numbers.

:func:`write_with_plots` draws each plot; one that fails (a file-system error aside, which
propagates) becomes a line ``LABEL plot: ErrorType: message`` in the JSON's ``plot_errors`` and a
``⚠`` line under the Markdown, and the report is written without it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from gridmix.core.files import write_atomic


def write_with_plots(
    paths: tuple[Path, Path],
    document: dict,
    render: Callable[[dict[str, Path]], str],
    plots: Sequence[tuple[str, Callable[[], Path]]],
) -> list[Path]:
    """Draw every plot of ``plots`` (its label, and a call that draws it and returns its file), then
    write ``document`` as JSON at ``paths[0]`` and ``render(drawn)`` (the files drawn, by label) as
    Markdown at ``paths[1]``, each failed plot's error added to both; return ``paths`` and the files
    drawn."""
    drawn, errors = {}, []
    for label, draw in plots:
        try:
            drawn[label] = draw()
        except OSError:
            raise
        except Exception as error:  # the numbers stand without their plot
            errors.append(f"{label} plot: {type(error).__name__}: {error}")
    if errors:
        document = {**document, "plot_errors": errors}
    write_atomic(paths[0], json.dumps(document, indent=2) + "\n")
    markdown = render(drawn)
    write_atomic(paths[1], markdown + "".join(f"\n- ⚠ {error}\n" for error in errors))
    return [*paths, *drawn.values()]
