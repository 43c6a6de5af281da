"""``gridmix run --compile``: every run's model trained and evaluated compiled with torch.compile.

A compiled run keeps the eager run's status and its numbers within float32 round-off; a model that
cannot be compiled trains eager, exactly as without ``--compile``, its row and the report saying so;
the choice enters a run's key only when on, so every other run keeps its key. Most tests compile
with ``aot_eager`` (graph capture and AOT autograd, no C++ code generation); one with inductor.
"""

import json

import pytest
import torch
from typer.testing import CliRunner

from gridmix.cli import app
from gridmix.core.grid import Grid
from gridmix.study import compiling
from gridmix.study.harness import Study
from gridmix.study.ledger import Ledger
from gridmix.study.train import train_run
from gridmix.tracks.plugin_loader import load_registry
from tests import fake_track
from tests.test_verdicts import ClearPlugin, clear_track, fake_budget

GRID = Grid((8,))


@pytest.fixture(autouse=True)
def registry():
    yield load_registry(extra_plugins=[ClearPlugin(), fake_track], refresh=True)
    load_registry(refresh=True)
    torch._dynamo.reset()


@pytest.fixture
def aot_eager(monkeypatch):
    monkeypatch.setattr(compiling, "COMPILE_BACKEND", "aot_eager")


def broken_backend(graph, example_inputs):
    raise RuntimeError("no C compiler found\n(pages of compiler output)")


def train(model: str, *, compile: bool):
    track = clear_track()
    budget = fake_budget(epochs=2, n_train=48, batch_size=32)  # a partial last batch too
    torch.set_num_threads(1)
    return train_run(
        track,
        track.model(model),
        GRID,
        lr=3e-3,
        seed=0,
        budget=budget,
        data=track.make_data(GRID, 0, budget.sizes),
        device=torch.device("cpu"),
        compile=compile,
    )


def assert_close_runs(compiled, eager):
    assert (compiled.status, eager.status) == ("ok", "ok"), (compiled.error, eager.error)
    assert compiled.epochs_done == eager.epochs_done
    for got, want in [
        (compiled.train_loss, eager.train_loss),
        (compiled.val_curve, eager.val_curve),
        ([compiled.test_metric], [eager.test_metric]),
    ]:
        assert got == pytest.approx(want, rel=1e-4)


@pytest.mark.parametrize("model", ["mixer", "one-token"])
def test_a_compiled_run_matches_the_eager_run(aot_eager, model):
    compiled, eager = train(model, compile=True), train(model, compile=False)
    assert_close_runs(compiled, eager)
    assert compiled.extras["compile"]["backend"] == "aot_eager"
    assert "fallback" not in compiled.extras["compile"] and "compile" not in eager.extras


def test_inductor_compiles_a_tiny_model_to_the_eager_numbers():
    compiled, eager = train("one-token", compile=True), train("one-token", compile=False)
    assert_close_runs(compiled, eager)
    assert compiled.extras["compile"]["backend"] == "inductor"
    assert "fallback" not in compiled.extras["compile"]


def test_a_model_that_cannot_be_compiled_trains_eager_with_the_same_numbers(monkeypatch):
    monkeypatch.setattr(compiling, "COMPILE_BACKEND", broken_backend)
    fallen, eager = train("mixer", compile=True), train("mixer", compile=False)
    # the warm-up left no trace (random state, gradients, buffers): the very same run
    assert (fallen.status, fallen.train_loss, fallen.val_curve, fallen.test_metric) == (
        eager.status,
        eager.train_loss,
        eager.val_curve,
        eager.test_metric,
    )
    assert fallen.extras["compile"]["fallback"] == (
        "BackendCompilerFailed: RuntimeError: no C compiler found"
    )


def test_the_warm_up_leaves_no_trace(aot_eager):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4), torch.nn.Dropout(0.5)
    )  # statistics to update, random numbers to draw
    buffers = [buffer.clone() for buffer in model.buffers()]
    state = torch.random.get_rng_state()

    def warm_up(compiled):
        compiled.train()
        compiled(torch.randn(8, 4)).sum().backward()  # (8, 4) -> ()

    compiled, record = compiling.compile_model(model, warm_up, torch.device("cpu"))
    assert compiled is not model and "fallback" not in record and record["seconds"] > 0
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(a, b) for a, b in zip(model.buffers(), buffers))
    assert all(parameter.grad is None for parameter in model.parameters())


def test_the_run_key_and_spec_change_only_with_compile():
    fields = dict(
        track="fake",
        grid="8",
        models=("fake-mixer", "fake-attention"),
        idea="fake-mixer",
        matched_baseline="fake-attention",
        metric_name="test MSE",
        direction="lower",
        device="cpu",
        threads=1,
        budget=fake_budget(),
    )
    plain = Study(**fields)
    task = plain.task("fake-attention", 1e-3, 0)
    assert "compile" not in task.config and "compile" not in plain.to_dict()
    compiled = Study(**fields, compile=True)
    assert compiled.task("fake-attention", 1e-3, 0).config == dict(task.config, compile=True)
    assert compiled.task("fake-attention", 1e-3, 0).key != task.key
    assert Study.from_dict(compiled.to_dict()) == compiled
    with pytest.raises(ValueError, match="compile 'yes'; expected True or False"):
        Study(**fields, compile="yes")


def run(*args):
    return CliRunner().invoke(
        app,
        ["run", "--no-scaling", "--threads", "1", "--jobs", "1", "--track", "clear",
         "--budget", "smoke", "--seeds", "2", "--lrs", "3e-3", "--models", "one-token", *args],
        env={"COLUMNS": "200"},
    )  # fmt: skip


def test_the_cli_compiles_every_run_and_the_method_says_so(aot_eager, tmp_path):
    result = run("--compile", "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    with Ledger(tmp_path / "out", create=False) as ledger:
        rows = ledger.rows()
    assert rows and all(row.config["compile"] is True for row in rows)
    assert all(row.extras["compile"]["backend"] == "aot_eager" for row in rows)
    method = (tmp_path / "out" / "report.md").read_text().split("## Method")[1]
    assert "Models compiled with torch.compile (aot_eager)." in method
    report = json.loads((tmp_path / "out" / "bench_report.json").read_text())
    assert report["compiled"] == {"backend": "aot_eager", "eager_fallback": {}}


def test_the_report_names_the_models_that_trained_eager(monkeypatch, tmp_path):
    monkeypatch.setattr(compiling, "COMPILE_BACKEND", broken_backend)
    result = run("--compile", "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    method = (tmp_path / "out" / "report.md").read_text().split("## Method")[1]
    error = "BackendCompilerFailed: RuntimeError: no C compiler found"
    assert f"trained eager where that failed: mixer (2 of 2 runs: {error})" in method
    assert f"one-token (2 of 2 runs: {error})" in method


def test_without_compile_the_report_says_nothing_of_it(tmp_path):
    result = run("--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert "torch.compile" not in (tmp_path / "out" / "report.md").read_text()
    assert "compiled" not in json.loads((tmp_path / "out" / "bench_report.json").read_text())


def test_a_sweep_compiles_every_point_in_its_own_directory():
    from gridmix.orchestrate.sweeping import plan_sweep

    over = [("grid", ["8", "16"])]
    planned = plan_sweep("clear", over, budget="smoke", seeds=2, compile=True)
    assert all(study.compile for study in planned.studies)
    assert planned.default_out.name.endswith("-compile")
    plain = plan_sweep("clear", over, budget="smoke", seeds=2)
    assert not any(study.compile for study in plain.studies)
    assert f"{plain.default_out}-compile" == str(planned.default_out)
