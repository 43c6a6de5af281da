"""The command line's conventions: ``-h`` and ``--version``; help without importing torch, with
every budget's contents and every option's default, the same defaults across commands; ``--epochs``
/ ``--n-train`` recorded in the run keys and the report; the log naming the sweep and the comparison
and what the ledger already holds; ``gridmix budgets``, ``runs``, ``status`` and ``export``; tables
that never cut a name, on a terminal of any width and piped."""

import csv
import dataclasses
import inspect
import io
import json
import os
import re
import types

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from gridmix import orchestrate
from gridmix.cli import app
from gridmix.cli.run import results_table
from gridmix.cli.tracks import registry_summary
from gridmix.core.version import __version__
from gridmix.report.build import build_report
from gridmix.study.ledger import Ledger
from gridmix.tracks.budget import BUDGETS, describe
from gridmix.tracks.hookspecs import hookimpl
from gridmix.tracks.plugin_loader import load_registry
from tests import fake_track, report_example
from tests.python_child import run_python

SUFFIX = "-with-a-rather-long-descriptive-name"
LONG = dataclasses.replace(
    fake_track.TRACK,
    name="fake-long",
    models=tuple(
        dataclasses.replace(spec, name=spec.name + SUFFIX) for spec in fake_track.TRACK.models
    ),
    matched_baseline=fake_track.TRACK.matched_baseline + SUFFIX,
)
long_plugin = types.SimpleNamespace(__name__="long_plugin", gridmix_tracks=hookimpl(lambda: [LONG]))


@pytest.fixture
def registry():
    yield load_registry(extra_plugins=[fake_track, long_plugin], refresh=True)
    load_registry(refresh=True)


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "2000"})


def test_h_is_help_everywhere_and_version_prints_the_version():
    assert invoke("--version").output == f"gridmix {__version__}\n"
    top = invoke("-h")
    assert top.exit_code == 0 and "Usage:" in top.output and "budgets" in top.output
    for command in (
        "run",
        "scale",
        "report",
        "tracks",
        "mixers",
        "budgets",
        "runs",
        "status",
        "export",
        "info",
    ):
        result = invoke(command, "-h")
        assert result.exit_code == 0 and "Usage:" in result.output, (command, result.output)


COMMANDS = (
    "run", "sweep", "scale", "report", "tracks", "mixers", "budgets", "runs", "status", "export",
    "info",
)  # fmt: skip


@pytest.mark.parametrize("command", [(), *((name,) for name in COMMANDS)])
def test_help_at_80_columns_cuts_and_splits_nothing(command):
    """Piped at 80 columns, every help fits and says word for word what it says on a wide terminal:
    no default ends in "…", no choice breaks mid-word, no path splits at a hyphen."""
    narrow = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "80"}).output
    wide = invoke(*command, "--help").output
    assert max(len(line) for line in narrow.splitlines()) <= 80, narrow
    assert narrow.split() == wide.split(), narrow
    options = {line.split()[0]: line for line in narrow.splitlines() if line.startswith("  -")}
    if not command:
        assert options["--version"].split()[:2] == ["--version", "Print"]  # no <bool>


def test_a_mistyped_choice_is_named_with_the_closest_choice():
    for args, hint in (
        (["run", "--budget", "smok"], "'smok' is not a budget; did you mean 'smoke'? expected "
         "smoke, default or full"),
        (["sweep", "--over", "grid=8", "--budget", "ful"], "did you mean 'full'?"),
        (["run", "--device", "cdua"], "'cdua' is not a device; did you mean 'cuda'?"),
    ):  # fmt: skip
        result = invoke(*args)
        assert result.exit_code == 2 and hint in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1 and "Value error" not in result.output


def test_runs_without_a_runs_folder_says_none_exists_yet(tmp_path):
    result = CliRunner().invoke(app, ["runs", str(tmp_path / "runs")])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert f"there is no folder {tmp_path / 'runs'}: no study was run here yet" in result.output
    (tmp_path / "file").write_text("")
    result = CliRunner().invoke(app, ["runs", str(tmp_path / "file")])
    assert result.exit_code == 2 and f"{tmp_path / 'file'} is a file; expected" in result.output


def test_help_imports_no_torch():
    code = (
        "import sys\nfrom gridmix.cli import app\nfor args in (['--help'], ['run', '--help'], "
        "['scale', '--help'], ['budgets']):\n    try:\n        app(args)\n    except "
        "SystemExit:\n        pass\nprint('torch' in sys.modules, 'matplotlib' in sys.modules)"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False False"


def test_commands_that_read_a_ledger_or_answer_at_once_import_no_torch(tmp_path_factory):
    """``status``, ``export`` and ``runs`` read SQLite and JSON; ``--help``, ``--version`` and a
    mistyped option or value answer before any work: none of them loads torch (seconds of CPU)."""
    runs = tmp_path_factory.mktemp("runs")  # not tmp_path: no `gridmix report` after the test
    study = report_example.fill(runs / "study")
    commands = [
        ["status", str(study)],
        ["export", str(study), "--out", str(runs / "results.csv")],
        ["export", str(study), "--json", "--out", "-"],
        ["runs", str(runs)],
        ["runs", str(runs / "nothing")],
        ["--help"],
        ["--version"],
        ["run", "--trak", "image"],
        ["run", "--budget", "smok"],
        ["status", "--help"],
    ]
    code = (
        f"import sys\nfrom gridmix.cli import app\nfor args in {commands!r}:\n    try:\n        "
        "app(args)\n    except SystemExit:\n        pass\n    print(args[:2], 'torch' in "
        "sys.modules)"
    )
    done = run_python(code)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    loaded = [line for line in done.stdout.splitlines() if line.endswith(" True")]
    assert not loaded, f"torch imported by the first of {loaded}"


def test_run_help_shows_every_budget_and_every_default():
    output = " ".join(invoke("run", "--help").output.split())  # the help, unwrapped
    for name, budget in BUDGETS.items():
        assert f"{name}: {describe(budget)}" in output, name
    assert "smoke 2, default 6, full 8" in output  # --seeds' default: the budget's
    command = typer.main.get_command(app)
    for name, sub in command.commands.items():
        for param in sub.params:
            if (
                isinstance(param, typer.core.TyperOption)
                and not param.is_flag
                and not param.required
            ):
                shown = param.default is not None and param.show_default is not False
                assert shown or "default" in (param.help or "").lower(), (name, param.name)


def test_the_same_options_have_the_same_defaults_across_commands():
    command = typer.main.get_command(app)
    options = {
        name: {p.name: p.default for p in sub.params} for name, sub in command.commands.items()
    }
    for option in ("track", "device"):
        assert options["run"][option] == options["scale"][option], option
    assert options["run"]["track"] == "image" and str(options["scale"]["device"]) in (
        "auto",
        "DeviceName.auto",
    )


def test_run_and_sweep_command_functions_are_short():
    """The commands only hand their options to gridmix.run / gridmix.sweep: 30 lines each, signature
    included."""
    from gridmix.cli.run import run
    from gridmix.cli.sweep import sweep

    for command in (run, sweep):
        lines, _ = inspect.getsourcelines(command)
        assert len(lines) <= 30, (command.__name__, len(lines))


def test_budgets_lists_each_budgets_contents_and_a_tracks_changes(registry):
    table = invoke("budgets").output
    header = table.splitlines()[1].split()
    assert header[:4] == ["budget", "seeds", "sweep_seeds", "lrs"]
    for name, budget in BUDGETS.items():
        row = next(line for line in table.splitlines() if line.startswith(name + " ")).split()
        assert (
            row[1:3] == [str(budget.seeds), str(budget.sweep_seeds)]
            and f"{budget.n_train:,}" in row
        )
    image = json.loads(invoke("budgets", "--track", "image", "--json").output)
    expected = dataclasses.asdict(load_registry().track("image").budget("default"))
    assert image["default"] == json.loads(json.dumps(expected))
    marked = invoke("budgets", "--track", "image").output
    # epochs=3 by the track
    assert "3*" in next(line for line in marked.splitlines() if line.startswith("default "))
    assert invoke("budgets", "--track", "nowhere").exit_code == 2


def test_epochs_and_n_train_change_the_budget_the_run_keys_and_the_report(registry, tmp_path):
    planned = orchestrate.plan_study("fake", budget="smoke", epochs=3, n_train=48)
    plain = orchestrate.plan_study("fake", budget="smoke")
    assert (planned.study.budget.epochs, planned.study.budget.n_train) == (3, 48)
    assert planned.study.overrides == {"epochs": 3, "n_train": 48} and plain.study.overrides == {}
    task, before = planned.study.sweep_tasks()[0], plain.study.sweep_tasks()[0]
    assert task.config["epochs"] == 3 and task.config["n_train"] == 48 and task.key != before.key
    assert (
        planned.default_out.name == "fake-8-smoke-epochs3-ntrain48"
        and plain.default_out.name == "fake-8-smoke"
    )
    out = tmp_path / "changed"
    result = invoke(
        "run",
        "--track",
        "fake",
        "--budget",
        "smoke",
        "--epochs",
        "3",
        "--n-train",
        "48",
        "--threads",
        "1",
        "--no-scaling",
        "--out",
        str(out),
    )
    assert result.exit_code == 0, result.output
    report = json.loads((out / "bench_report.json").read_text())
    assert (
        report["budget"]["overrides"] == {"epochs": 3, "n_train": 48}
        and report["budget"]["epochs"] == 3
    )
    assert "(changed on the command line: epochs 3, n_train 48)" in (out / "report.md").read_text()
    with Ledger(out, create=False) as ledger:
        assert {
            (row.config["epochs"], row.config["n_train"], row.epochs_done)
            for row in ledger.rows()
            if row.status == "ok"
        } == {(3, 48, 3)}
    assert invoke("run", "--track", "fake", "--epochs", "0").exit_code == 2


def test_the_log_names_each_phase_and_what_the_ledger_holds(registry, tmp_path):
    args = (
        "run",
        "--track",
        "fake",
        "--budget",
        "smoke",
        "--seeds",
        "3",
        "--threads",
        "1",
        "--no-scaling",
        "--out",
        str(tmp_path / "out"),
    )
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    lines = first.output.splitlines()
    sweep = lines.index("sweep (choosing the learning rate on seed 1000): 6 runs")
    comparison = lines.index("comparison (seeds 0–2 at the chosen rates): 9 runs")
    assert sweep < comparison
    assert all(
        "sweep seed 1000" in line
        for line in lines[sweep + 1 : comparison]
        if line.startswith("done ")
    )
    assert "already in the ledger" not in first.output
    again = invoke(*args)
    assert "15 of 15 runs already in the ledger" in again.output.splitlines()
    assert (
        "sweep (choosing the learning rate on seed 1000): 6 runs, all already in the ledger"
        in again.output
    )


def test_runs_status_and_export_read_a_studys_ledger(registry, tmp_path):
    out = tmp_path / "studies" / "one"
    assert (
        invoke(
            "run",
            "--track",
            "fake",
            "--budget",
            "smoke",
            "--seeds",
            "3",
            "--threads",
            "1",
            "--no-scaling",
            "--out",
            str(out),
        ).exit_code
        == 0
    )
    listed = invoke("runs", str(tmp_path / "studies")).output
    row = next(line for line in listed.splitlines() if line.startswith(str(out)))
    verdict = json.loads((out / "bench_report.json").read_text())["comparison"]["verdict"]
    assert row.split()[1:4] == ["fake", "8", "smoke"] and verdict in row
    with Ledger(out, create=False) as ledger:
        rows = ledger.rows()
    status = invoke("status", str(out)).output
    failed = sum(row.status == "failed" for row in rows)
    done = sum(row.status in ("ok", "diverged") for row in rows)
    assert (
        f"{done} of 15 runs done, {failed} failed; not running: no process holds the lock" in status
    )
    assert "sweep (choosing the learning rate on seed 1000): 6 runs" in status
    with Ledger(out, create=False, lock=True):  # this process now holds the study's lock
        assert f"running: pid {os.getpid()} holds the lock" in invoke("status", str(out)).output
        assert f"running (pid {os.getpid()})" in invoke("runs", str(tmp_path / "studies")).output
    assert invoke("export", str(out), "--csv").exit_code == 0
    exported = list(csv.DictReader((out / "results.csv").open()))
    assert len(exported) == 15 and list(exported[0]) == [
        "phase",
        "model",
        "role",
        "lr",
        "seed",
        "status",
        "val_metric",
        "test_metric",
        "epochs_done",
        "wall_s",
        "error",
    ]
    by_key = {(row.model, row.lr, row.seed): row for row in rows}
    for line in exported:
        row = by_key[(line["model"], float(line["lr"]), int(line["seed"]))]
        assert line["status"] == row.status and line["phase"] == (
            "sweep" if row.seed >= 1000 else "comparison"
        )
        assert line["test_metric"] == ("" if row.test_metric is None else repr(row.test_metric))
    as_json = json.loads(invoke("export", str(out), "--json", "--out", "-").output)
    assert [r["seed"] for r in as_json] == [int(line["seed"]) for line in exported]
    assert invoke("status", str(tmp_path / "nothing")).exit_code == 2
    assert invoke("runs", str(tmp_path / "nothing")).exit_code == 2


def rendered(table, width: int | None) -> str:
    """The table on a terminal ``width`` columns wide, or piped (``None``)."""
    buffer = io.StringIO()
    console = Console(
        file=buffer, width=width or 80, force_terminal=width is not None, color_system=None
    )
    table.print(console)
    return buffer.getvalue()


@pytest.mark.parametrize("width", [80, 100, 200, None])
def test_tables_never_cut_a_name(registry, tmp_path, width):
    out = tmp_path / "long"
    assert (
        invoke(
            "run",
            "--track",
            "fake-long",
            "--budget",
            "smoke",
            "--threads",
            "1",
            "--no-scaling",
            "--out",
            str(out),
        ).exit_code
        == 0
    )
    with Ledger(out, create=False) as ledger:
        report = build_report(ledger)
    from gridmix.cli.mixers import mixers_summary

    text = rendered(results_table(report), width)
    lines = text.splitlines()
    assert "…" not in text
    for name in report.arms:
        assert any(name in line for line in lines), (width, name)  # whole, on one line
    if width is None:
        assert not set("┃│┏━") & set(text) and lines[1].split()[:3] == ["model", "role", "lr"]
    else:
        # grown only when it must
        assert all(len(line) <= max(width, len(lines[1])) for line in lines)
    summary = registry_summary(load_registry())
    tracks = command_output(["tracks"], width)
    for track in summary["tracks"]:
        assert any(track["name"] in line for line in tracks.splitlines()), (width, track["name"])
        for model in track["models"]:
            assert any(model["name"] in line for line in tracks.splitlines()), (
                width,
                model["name"],
            )
    mixers = command_output(["mixers"], width)
    assert "…" not in tracks + mixers
    assert all(
        any(m["name"] in line for line in mixers.splitlines()) for m in mixers_summary()["mixers"]
    )
    if width is not None:
        assert "┃" in tracks and max(len(line) for line in mixers.splitlines()) >= min(width, 80)


def command_output(args: list[str], width: int | None) -> str:
    """A command's output on a terminal ``width`` columns wide (colour off), or piped (``None``)."""
    env = {"COLUMNS": str(width or 80)}
    if width is not None:
        env.update(FORCE_COLOR="1", NO_COLOR="1")
    output = CliRunner().invoke(app, args, env=env).output
    return re.sub(r"\x1b\[[0-9;]*m", "", output)


def test_piped_tables_wrap_text_to_the_width_and_keep_names_whole():
    from gridmix.cli.tables import Column, TextTable

    words = [f"word{i}" for i in range(60)]
    table = TextTable(
        title="t",
        columns=(Column("name", "name"), Column("what"), Column("n", "number")),
        rows=[("a-rather-long-model-name-kept-whole", " ".join(words), "123456")],
        caption=" ".join(words),
    )
    text = rendered(table, None)  # piped, 80 columns
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert any(
        line.startswith("a-rather-long-model-name-kept-whole  ") for line in text.splitlines()
    )
    assert [w for w in text.split() if w.startswith("word")] == words + words  # cell, caption
    assert not set("┃│┏━") & set(text)


@pytest.mark.parametrize("width", [80, 100, 200])
def test_tables_on_a_terminal_wrap_only_at_word_boundaries(registry, width):
    from gridmix.cli.tracks import broken_table

    summary = registry_summary(load_registry())
    words = {word for track in summary["tracks"] for word in track["description"].split()}
    table = broken_table(
        [
            type(
                "Broken",
                (),
                dict(name="plugin-with-a-long-name", version="1.0", error=" ".join(sorted(words))),
            )()
        ]
    )
    text = rendered(table, width)
    cells = [part.strip() for line in text.splitlines() for part in line.split("│")[1:-1]]
    assert "plugin-with-a-long-name 1.0" in " ".join(cells) or "plugin-with-a-long-name" in cells
    printed = {word for cell in cells for word in cell.split()}
    assert printed >= words  # every word whole in some cell: a line broke only between words


@pytest.mark.parametrize("command", ["tracks", "mixers"])
def test_piped_listings_fit_80_columns_as_one_block_per_row(command):
    text = CliRunner().invoke(app, [command], env={"COLUMNS": "80"}).output
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80, max(lines, key=len)
    assert "…" not in text and not set("┃│┏━") & set(text)
    assert any(line.startswith("  plugin: ") for line in lines)  # a row's cells, one per line
