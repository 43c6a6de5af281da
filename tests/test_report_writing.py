"""The writing shared by the sweep's and the suite's reports: a plot that fails costs only itself
(its error in the JSON and under the Markdown), a file-system error propagates; and the Markdown
table every renderer lays its cells out with."""

import json

import pytest

from gridmix.report.format import markdown_table
from gridmix.report.writing import write_with_plots


def test_a_failed_plot_is_a_line_in_both_files_and_the_others_are_drawn(tmp_path):
    def draw_ok():
        path = tmp_path / "ok.png"
        path.write_bytes(b"png")
        return path

    def draw_bad():
        raise RuntimeError("no backend")

    paths = (tmp_path / "r.json", tmp_path / "r.md")
    written = write_with_plots(
        paths,
        {"numbers": [1, 2]},
        lambda drawn: "# r\n" + "".join(f"![{k}]({p.name})\n" for k, p in drawn.items()),
        [("bad", draw_bad), ("ok", draw_ok)],
    )
    assert written == [*paths, tmp_path / "ok.png"]
    assert json.loads(paths[0].read_text()) == {
        "numbers": [1, 2],
        "plot_errors": ["bad plot: RuntimeError: no backend"],
    }
    assert paths[1].read_text() == "# r\n![ok](ok.png)\n\n- ⚠ bad plot: RuntimeError: no backend\n"


def test_without_failures_there_is_no_plot_errors_key(tmp_path):
    paths = (tmp_path / "r.json", tmp_path / "r.md")
    write_with_plots(paths, {"a": 1}, lambda drawn: "# r", [])
    assert json.loads(paths[0].read_text()) == {"a": 1} and paths[1].read_text() == "# r"


def test_a_file_system_error_while_drawing_propagates(tmp_path):
    def draw():
        raise PermissionError("read-only")

    paths = (tmp_path / "r.json", tmp_path / "r.md")
    with pytest.raises(PermissionError):
        write_with_plots(paths, {}, lambda drawn: "", [("p", draw)])
    assert not paths[0].exists()


def test_a_markdown_table_is_its_header_its_rule_and_a_line_per_row():
    assert markdown_table(["a", "b"], [["1", ""], ["x", "y"]]) == [
        "| a | b |",
        "|---|---|",
        "| 1 |  |",
        "| x | y |",
    ]
    assert markdown_table(["a"], []) == ["| a |", "|---|"]
