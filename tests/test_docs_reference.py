"""The reference tables of docs/plugins.md and docs/mixers.md list every field of the contract's
data classes with its type and whether it has a default, so a new or changed field cannot be left
out of the docs."""

import dataclasses
from pathlib import Path

import pytest

from gridmix.mixers.contract import MixerSpec
from gridmix.tracks.contract import Backbone, ModelSpec, Track, TrackData

DOCS = Path(__file__).resolve().parents[1] / "docs"


def table_after(page: str, marker: str) -> dict[str, tuple[str, str]]:
    """The first markdown table after ``marker`` on ``page``: field name -> (type, default), the
    cells' backticks and ``\\|`` escapes removed."""
    text = (DOCS / page).read_text()
    assert marker in text, f"docs/{page} has no {marker!r}"
    lines = text[text.index(marker) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| field |"))
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.replace("\\|", "¦").strip("|").split(" | ")]
        name, kind, default = (cell.replace("¦", "|").strip("`") for cell in cells[:3])
        rows[name] = (kind, default)
    return rows


@pytest.mark.parametrize(
    "cls, page, marker",
    [
        (Track, "plugins.md", "**`Track`**"),
        (ModelSpec, "plugins.md", "**`ModelSpec`**"),
        (TrackData, "plugins.md", "**`TrackData`**"),
        (Backbone, "plugins.md", "**`Backbone`**"),
        (MixerSpec, "mixers.md", "It is registered as a `MixerSpec`"),
    ],
)
def test_every_field_is_in_the_docs_table_with_its_type(cls, page, marker):
    rows = table_after(page, marker)
    fields = dataclasses.fields(cls)
    assert list(rows) == [f.name for f in fields], (
        f"docs/{page}'s {cls.__name__} table lists {list(rows)}; the class's fields are "
        f"{[f.name for f in fields]}"
    )
    for f in fields:
        kind, default = rows[f.name]
        assert kind == f.type.replace("torch.Tensor", "Tensor"), (cls.__name__, f.name, kind)
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        assert (default == "required") == required, (cls.__name__, f.name, default)
