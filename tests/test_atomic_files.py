"""Every file gridmix writes is written whole or not at all (``gridmix.core.files``): a disk that
fills mid-write leaves the previous file, or none, never a truncated one, and no temporary file
behind."""

import builtins
import errno
import io
import json
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from typer.testing import CliRunner

from gridmix.cli import app
from gridmix.core.files import replacing, write_atomic
from tests import report_example


class FillingFile:
    """A file opened for writing on a disk that fills: the first write stores half its data, then
    fails."""

    def __init__(self, handle, name) -> None:
        self._handle, self._name = handle, name

    def write(self, data):
        self._handle.write(data[: len(data) // 2])
        self._handle.flush()
        raise OSError(errno.ENOSPC, "No space left on device", str(self._name))

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._handle.close()


@pytest.fixture
def full_disk(monkeypatch):
    """``full_disk(directory)``: from now on, every file opened for writing in ``directory`` fills
    the disk."""

    def fill(directory: Path) -> None:
        real_open = io.open

        def opener(file, mode="r", *args, **kwargs):
            handle = real_open(file, mode, *args, **kwargs)
            if (
                ("w" in mode or "x" in mode)
                and isinstance(file, (str, Path))
                and Path(file).parent == directory
            ):
                return FillingFile(handle, file)
            return handle

        monkeypatch.setattr(io, "open", opener)  # pathlib's write_text opens through io.open
        monkeypatch.setattr(builtins, "open", opener)  # matplotlib and Pillow through open

    return fill


def contents(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir()) if path.is_file()}


def test_a_full_disk_leaves_the_previous_report_whole(tmp_path, full_disk):
    out = report_example.fill(tmp_path)
    written = CliRunner().invoke(app, ["report", str(out)], env={"COLUMNS": "200"})
    assert written.exit_code == 0, written.output
    before = contents(out)
    assert {"bench_report.json", "report.md", "paired.png"} <= set(before)
    full_disk(out)
    failed = CliRunner().invoke(app, ["report", str(out)], env={"COLUMNS": "200"})
    assert failed.exit_code == 2 and "No space left on device" in failed.output, failed.output
    assert len(failed.output.strip().splitlines()) == 1, failed.output
    # every file as it was (the old code left them truncated), no temporary file
    assert contents(out) == before
    json.loads((out / "bench_report.json").read_text())


def test_a_failed_first_write_leaves_no_file(tmp_path, full_disk):
    full_disk(tmp_path)
    with pytest.raises(OSError, match="No space left on device"):
        write_atomic(tmp_path / "scaling.json", "{}\n" * 1000)
    fig = plt.figure()
    with (
        pytest.raises(OSError, match="No space left on device"),
        replacing(tmp_path / "plot.png") as temp,
    ):
        fig.savefig(temp, format="png")
    plt.close(fig)
    assert list(tmp_path.iterdir()) == []


def test_a_written_file_replaces_the_previous_one_whole(tmp_path):
    target = write_atomic(tmp_path / "report.md", "first\n")
    assert write_atomic(target, "second ✓\n").read_text(encoding="utf-8") == "second ✓\n"
    assert [path.name for path in tmp_path.iterdir()] == ["report.md"]
