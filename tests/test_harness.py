"""The paired-seed harness end to end on a tiny in-test track: sweep on validation, divergence
recorded and excluded, ledger resume, deterministic numbers, and a report with the reference
report's keys."""

import dataclasses
import json

import pytest

from gridmix.analysis.idea_mechanism import idea_mechanism
from gridmix.report.build import build_report, write_report
from gridmix.study.executors import Executor, InProcessExecutor, WorkerPoolExecutor
from gridmix.study.harness import Runner
from gridmix.study.ledger import Ledger
from gridmix.study.spec import AA_SUFFIX, Study
from gridmix.tracks.budget import BUDGETS
from gridmix.tracks.plugin_loader import load_registry
from tests import fake_track

BUDGET = dataclasses.replace(
    BUDGETS["smoke"], seeds=3, sweep_seeds=1, lrs=(1e-3, 3e-3), epochs=2, n_train=128
)


@pytest.fixture(autouse=True)
def registry():
    yield load_registry(extra_plugins=[fake_track], refresh=True)
    load_registry(refresh=True)


def study(models=("fake-mixer", "fake-attention", "fake-fragile"), budget=BUDGET) -> Study:
    return Study(
        track="fake",
        grid="8",
        models=models,
        idea="fake-mixer",
        matched_baseline="fake-attention",
        metric_name="test MSE",
        direction="lower",
        budget=budget,
        device="cpu",
        threads=1,
    )


def test_model_kwargs_keep_their_stored_name_in_run_keys_and_study_specs():
    """Ledgers written before model_kwargs had that name stay readable, and their runs keep their
    keys."""
    spec = dataclasses.replace(study(), model_kwargs={"fake-mixer": {"dim": 4}})
    config = spec.task("fake-mixer", 1e-3, 0).config
    assert config["knobs"] == {"dim": 4} and "model_kwargs" not in config
    stored = json.loads(json.dumps(spec.to_dict()))
    assert stored["knobs"] == {"fake-mixer": {"dim": 4}} and "model_kwargs" not in stored
    # where the field has always been
    assert list(stored).index("knobs") == list(stored).index("threads") + 1
    assert Study.from_dict(stored) == spec


def test_execute_trains_with_the_values_the_task_holds(monkeypatch):
    """Every training value train_run takes from the task arrives under its name, as the task holds
    it (an A/A copy's own init seed)."""
    from gridmix.study import harness

    seen = {}
    monkeypatch.setattr(harness, "train_run", lambda *args, **kwargs: seen.update(kwargs))
    task = dataclasses.replace(
        study().task("fake-mixer" + AA_SUFFIX, 3e-3, 2),
        model_kwargs={"dim": 4},
        precision="bf16",
        stop_at=0.5,
        compile=True,
    )
    assert harness.execute(task).status == "failed"  # train_run, replaced, returned no result
    expected = dict(lr=3e-3, seed=2, init_seed=task.init_seed, budget=BUDGET, precision="bf16")
    assert {name: seen[name] for name in expected} == expected and task.init_seed != 2
    assert (seen["model_kwargs"], seen["stop_at"], seen["compile"]) == ({"dim": 4}, 0.5, True)


def test_execute_keeps_freed_memory_for_reuse_and_records_it(monkeypatch):
    """A run's process keeps freed memory for reuse before it trains (its step would otherwise
    page-fault its activations in afresh), and the row says so."""
    from gridmix.study import harness

    calls = []

    def keep(mode):
        calls.append(mode)
        return dict(mode=mode, applied=True)

    monkeypatch.setattr(harness, "keep_freed_memory", keep)
    task = study().task("fake-mixer", 3e-3, 0)
    row = harness.execute(task)
    assert row.status == "ok" and row.extras["allocator"] == "reuse" and calls == ["reuse"]
    monkeypatch.setattr(harness, "keep_freed_memory", lambda mode: dict(mode=mode, applied=False))
    assert harness.execute(task).extras["allocator"] == "default"  # not glibc: nothing was set


class CountingExecutor(InProcessExecutor):
    def __init__(self, stop_after=None):
        super().__init__(after_training=idea_mechanism)  # as gridmix run hands it in
        self.executed, self.stop_after = [], stop_after

    def run(self, tasks, *, on_done, on_start=None, on_epoch=None):
        def done(task, row):
            self.executed.append(task.key)
            on_done(task, row)
            if self.stop_after is not None and len(self.executed) >= self.stop_after:
                raise KeyboardInterrupt  # an interrupted sweep, after `stop_after` finished runs

        super().run(tasks, on_done=done, on_start=on_start, on_epoch=on_epoch)


def test_executors_declare_the_interface_the_runner_uses():
    assert all(
        isinstance(executor, Executor)
        for executor in (InProcessExecutor(), WorkerPoolExecutor(2), CountingExecutor())
    )
    assert not isinstance(object(), Executor)
    with pytest.raises(ValueError, match="jobs=0; expected >= 1"):
        WorkerPoolExecutor(0)


def run_study(out, spec=None, executor=None):
    executor = executor or CountingExecutor()
    with Ledger(out) as ledger:
        chosen = Runner(spec or study(), ledger, executor).run()
        return chosen, build_report(ledger), executor


def test_sweep_divergence_and_report(tmp_path):
    chosen, built, executor = run_study(tmp_path / "a")
    report = built.to_dict()  # bench_report.json's keys
    # 3 models x 2 lrs x 1 sweep seed (1000), then the 3 comparison seeds (0, 1, 2) of each at its
    # chosen rate
    assert len(executor.executed) == 6 + 3 * 3
    assert chosen["fake-fragile"] == 1e-3  # 3e-3 diverged, so it cannot be chosen
    fragile = report["baselines"]["fake-fragile"]
    statuses = {entry["cfg"]["lr"]: entry["statuses"] for entry in fragile["sweep"]}
    assert statuses[3e-3] == ["diverged"] and statuses[1e-3] == ["ok"]
    assert any(
        f["model"] == "fake-fragile" and f["status"] == "diverged" for f in report["failures"]
    )
    for key in (
        "bench_version",
        "track",
        "metric_direction",
        "n_seeds",
        "baseline",
        "idea",
        "comparison",
        "mechanism_signature",
        "comparisons",
        "budget",
        "timings",
        "versions",
    ):
        assert key in report, key
    assert report["baseline"]["name"] == "fake-attention"
    assert set(report["baseline"]) >= {"best_cfg", "sweep", "full"}
    assert report["idea"]["n"] == 3 and len(report["idea"]["per_seed"]) == 3
    comparison = report["comparison"]
    assert comparison["n_pairs"] == 3 and len(comparison["per_seed_diffs"]) == 3
    # three pairs: 2^3 exact sign patterns, so p can never fall below 2/8 and nothing is significant
    assert comparison["p_method"] == "exact" and comparison["n_patterns"] == 8
    assert (
        comparison["p_value"] >= 0.25 and comparison["verdict"] == "cannot reach α (too few seeds)"
    )
    assert set(report["comparisons"]) == {"fake-attention", "fake-fragile"}
    assert report["primary_baseline"] == "fake-attention" and comparison["family"] == "primary"
    # the secondary family: the other baselines
    assert report["holm_adjusted_over"] == ["fake-fragile"]
    # the sweep reports validation means, and the chosen rate is the best one of them
    idea_sweep = report["idea"]["sweep"]
    best = min((e for e in idea_sweep if e["eligible"]), key=lambda e: e["mean"])
    assert best["cfg"]["lr"] == report["idea"]["best_cfg"]["lr"]
    mech = report["mechanism_signature"]
    assert mech["confirmed"] is True and len(mech["per_seed"]) == 3
    paths = write_report(built, tmp_path / "a")
    names = {p.name for p in paths}
    assert {"bench_report.json", "report.md", "paired.png", "sweep.png", "curves.png"} <= names
    markdown = (tmp_path / "a" / "report.md").read_text()
    assert markdown.splitlines()[2].startswith("**Verdict: ")
    assert json.loads((tmp_path / "a" / "bench_report.json").read_text())["track"] == "fake"


def test_same_study_twice_gives_identical_numbers(tmp_path):
    spec = study(models=("fake-mixer", "fake-attention"))
    _, first, _ = run_study(tmp_path / "a", spec)
    _, second, _ = run_study(tmp_path / "b", spec)
    for model in ("fake-mixer", "fake-attention"):
        assert first.arms[model].per_seed == second.arms[model].per_seed
    strip = lambda r: {k: v for k, v in r.to_dict().items() if k not in ("timings",)}  # noqa: E731
    assert strip(first) == strip(second)


def test_interrupted_sweep_resumes_without_redoing_finished_runs(tmp_path):
    spec = study(models=("fake-mixer", "fake-attention"))
    with pytest.raises(KeyboardInterrupt):
        run_study(tmp_path / "r", spec, CountingExecutor(stop_after=3))
    with Ledger(tmp_path / "r") as ledger:
        assert len(ledger.rows()) == 3
    _, resumed, executor = run_study(tmp_path / "r", spec)
    assert len(executor.executed) == 4 + 2 * 3 - 3  # only what was missing
    _, uninterrupted, _ = run_study(tmp_path / "u", spec)
    strip = lambda r: {k: v for k, v in r.to_dict().items() if k not in ("timings",)}  # noqa: E731
    assert strip(resumed) == strip(uninterrupted)
