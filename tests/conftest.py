"""Shared fixtures, and the check that `gridmix report` succeeds on every ledger a test writes."""

import pytest
import torch


@pytest.fixture(scope="module")
def one_thread():
    """Small tensors: one thread avoids OpenMP hand-off stalls when other processes share the cores."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(autouse=True)
def every_ledger_reports(request):
    """After each test, `gridmix report` must succeed on every ledger with a study that the test left behind."""
    tmp_path = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if tmp_path is None:
        return
    from typer.testing import CliRunner

    from gridmix.cli import app
    from gridmix.store import LEDGER_NAME, Ledger

    for path in sorted(tmp_path.rglob(LEDGER_NAME)):
        try:
            with Ledger(path.parent, create=False) as ledger:
                study = ledger.study()
        except Exception:  # the deliberately foreign, corrupt or half-created files of the store tests
            continue
        if study is None:
            continue
        result = CliRunner().invoke(app, ["report", str(path.parent)], env={"COLUMNS": "200"})
        if "budget" in study:  # a study the harness wrote: its report must succeed
            assert result.exit_code == 0, f"gridmix report {path.parent} failed:\n{result.output}"
        else:  # a hand-made spec of the store tests: refused in one line, never a traceback
            assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
