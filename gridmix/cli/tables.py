"""Every table the command line prints, written once and shown two ways: :class:`TextTable`.

On a terminal it is a rich table in which no name is ever cut: a name column (model, track, mixer)
and a number column never break inside a word, text columns wrap at word boundaries, and when the
terminal is too narrow for that the table grows past it rather than folding a name or ending it in
"…". Anywhere else (a pipe, a file, a test's captured output) it is plain text in aligned columns,
with no box characters and no colour, as wide as the console says (``COLUMNS``, else 80): text
wraps at spaces only, and a name or a number is never wrapped, so ``gridmix tracks > tracks.txt``
and ``grep`` read every name as written. Where the columns cannot share that width the table grows
past it, or, for a listing (``records_when_narrow``: ``gridmix tracks``, ``gridmix mixers``), is
printed as one block per row (:meth:`TextTable.records`).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

KINDS = ("name", "number", "text")


@dataclass(frozen=True)
class Column:
    """A column: ``kind`` ``"text"`` (wraps at word boundaries), ``"name"`` (the same, but narrowed
    only once every text column is as narrow as it can be, so a name and its tag stay on one line
    where any line can) or ``"number"`` (right-aligned, never wrapped)."""

    header: str
    kind: str = "text"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"column {self.header!r}: kind {self.kind!r}; expected one of {KINDS}")


@dataclass(frozen=True)
class TextTable:
    """A titled table of string cells (rich markup and line breaks allowed), with an optional
    caption; ``lines`` rules off every row (for rows of several lines)."""

    title: str
    columns: tuple[Column, ...]
    rows: list[tuple[str, ...]] = field(default_factory=list)
    caption: str = ""
    lines: bool = False
    title_style: str = "italic"
    # plain text too narrow for the columns: one block per row (a listing) instead of a wider table
    records_when_narrow: bool = False

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(
                    f"table {self.title!r}: a row of {len(row)} cells for {len(self.columns)} "
                    f"columns {[c.header for c in self.columns]}; expected one cell per column"
                )

    def widths(self, room: int) -> list[int]:
        """Each column's width where the cells share ``room`` characters (the table's width less
        its borders and padding): every column as wide as its longest line when that fits, else
        text columns narrowed (the one with the most room first), then name columns, but none below
        its longest word (a number column below its longest cell); when even that does not fit,
        those least widths, and the table is wider than asked."""
        cells = [
            [_plain(row[i]).split("\n") for row in self.rows] for i in range(len(self.columns))
        ]
        longest, least = [], []
        for column, lines in zip(self.columns, cells):
            flat = [line for cell in lines for line in cell]
            longest.append(max([cell_len(column.header), *map(cell_len, flat)]))
            words = (
                flat
                if column.kind == "number"
                else [word for line in flat for word in line.split()]
            )
            least.append(
                max(
                    [cell_len(w) for w in column.header.split()]
                    + [cell_len(w) for w in words]
                    + [1]
                )
            )
        widths = list(longest)
        for kind in ("text", "name"):
            shrinkable = [i for i, column in enumerate(self.columns) if column.kind == kind]
            while sum(widths) > room and shrinkable:
                slack = {i: widths[i] - least[i] for i in shrinkable}
                widest = max(slack, key=slack.get)
                if slack[widest] <= 0:
                    break
                widths[widest] -= 1
        return widths

    def rich(self, available: int = 10**5) -> Table:
        """The rich table in at most ``available`` characters where it fits (:meth:`widths`): text
        wraps at word boundaries, and nothing is ever folded inside a word or cut."""
        table = Table(
            title=self.title,
            caption=self.caption or None,
            show_lines=self.lines,
            title_style=self.title_style,
        )
        for column, width in zip(self.columns, self.widths(available - self.rich_frame)):
            table.add_column(
                column.header,
                justify="right" if column.kind == "number" else "left",
                width=width,
                no_wrap=column.kind == "number",
                overflow="fold",
            )
        for row in self.rows:
            table.add_row(*row)
        return table

    @property
    def rich_frame(self) -> int:
        """The characters the rich table adds to its cells: "│ " before each column, " │" after the
        last."""
        return 3 * len(self.columns) + 1

    def plain(self, available: int = 10**5) -> str:
        """Aligned plain text in at most ``available`` characters where it fits (:meth:`widths`):
        the title, the headers over a rule of dashes, each row's cells (text wrapped at spaces
        only, a name or number whole; a cell of several lines takes as many), the caption last,
        wrapped the same way."""
        widths = self.widths(available - 2 * (len(self.columns) - 1))  # two spaces between columns
        if self.records_when_narrow and sum(widths) + 2 * (len(self.columns) - 1) > available:
            return self.records(available)

        def wrap(text: str, width: int, kind: str) -> list[str]:
            lines = _plain(text).split("\n")
            if kind == "number":
                return lines
            return [part for line in lines for part in _wrap(line, width)]

        cells = [
            [wrap(cell, width, c.kind) for cell, width, c in zip(row, widths, self.columns)]
            for row in self.rows
        ]
        headers = [column.header for column in self.columns]
        widths = [
            max([cell_len(headers[i]), *(cell_len(line) for row in cells for line in row[i])])
            for i in range(len(headers))
        ]

        def line(parts: list[str]) -> str:
            padded = [
                " " * (width - cell_len(part)) + part
                if column.kind == "number"
                else part + " " * (width - cell_len(part))
                for part, width, column in zip(parts, widths, self.columns)
            ]
            return "  ".join(padded).rstrip()

        out = (
            [self.title, line(headers), "  ".join("-" * width for width in widths)]
            if self.title
            else [line(headers), "  ".join("-" * width for width in widths)]
        )
        for index, row in enumerate(cells):
            if self.lines and index:
                out.append("")
            for depth in range(max(len(cell) for cell in row)):
                out.append(line([cell[depth] if depth < len(cell) else "" for cell in row]))
        if self.caption:
            out += ["", *_wrap(_plain(self.caption), max(available, len(out[1])))]
        return "\n".join(out) + "\n"

    def records(self, available: int) -> str:
        """The table as one block per row, for a width its columns cannot share: the title, then
        each row's first cell (its first line, a name, whole) and every other cell under it as
        ``header: text`` (a cell's lines joined by commas), indented and wrapped at spaces to
        ``available``, rows apart by a blank line, the caption last."""
        out = [self.title] if self.title else []
        for row in self.rows:
            out.append("")
            name, *more = _plain(row[0]).split("\n")
            out += [name, *(part for line in more for part in _wrap(line, available))]
            for column, cell in zip(self.columns[1:], row[1:]):
                text = ", ".join(
                    " ".join(line.split()) for line in _plain(cell).split("\n") if line
                )
                if text:
                    out += textwrap.wrap(
                        f"{column.header}: {text}",
                        available,
                        initial_indent="  ",
                        subsequent_indent="    ",
                        break_long_words=False,
                        break_on_hyphens=False,
                    )
        if self.caption:
            out += ["", *_wrap(_plain(self.caption), available)]
        return "\n".join(out) + "\n"

    def print(self, console: Console) -> None:
        """On a terminal the rich table (as wide as it must be for no name to break); elsewhere
        :meth:`plain`."""
        if not console.is_terminal:
            console.file.write(self.plain(console.width))
            console.file.flush()
            return
        table = self.rich(console.width)
        needed = sum(self.widths(console.width - self.rich_frame)) + self.rich_frame
        if needed <= console.width:
            console.print(table)
            return
        wider = Console(
            file=console.file,
            width=needed,
            force_terminal=True,
            color_system=console.color_system,
            legacy_windows=False,
        )
        wider.print(table)


def _wrap(line: str, width: int) -> list[str]:
    """``line`` in lines of at most ``width`` characters, broken at spaces only (a longer word
    stands whole on its own line); an empty line stays one empty line."""
    wrapped = textwrap.wrap(line, width, break_long_words=False, break_on_hyphens=False)
    return wrapped or [""]


def _plain(cell: str) -> str:
    """A cell's text without its rich markup."""
    return Text.from_markup(cell).plain
