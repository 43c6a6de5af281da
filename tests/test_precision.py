"""Training precision: `--precision` resolves, mixed-precision runs train and are recorded, fp32
keys stay."""

import dataclasses

import pytest

from gridmix.report.build import build_report
from gridmix.report.markdown import render_markdown
from gridmix.study.executors import InProcessExecutor
from gridmix.study.harness import Runner
from gridmix.study.ledger import Ledger
from gridmix.study.precision import resolve_precision
from gridmix.study.spec import Study
from gridmix.tracks.budget import BUDGETS
from gridmix.tracks.plugin_loader import load_registry
from tests import fake_track

BUDGET = dataclasses.replace(
    BUDGETS["smoke"], seeds=2, sweep_seeds=1, lrs=(1e-3,), epochs=2, n_train=64
)


@pytest.fixture(autouse=True)
def registry():
    yield load_registry(extra_plugins=[fake_track], refresh=True)
    load_registry(refresh=True)


def _study(precision):
    return Study(
        track="fake",
        grid="8",
        models=("fake-mixer", "fake-attention"),
        idea="fake-mixer",
        matched_baseline="fake-attention",
        metric_name="test MSE",
        direction="lower",
        budget=BUDGET,
        device="cpu",
        threads=1,
        precision=precision,
    )


def test_auto_is_bf16_on_cuda_and_fp32_on_cpu_and_bad_values_are_named():
    assert (
        resolve_precision("auto", "cuda") == "bf16" and resolve_precision("auto", "cpu") == "fp32"
    )
    assert resolve_precision("fp16", "cpu") == "fp16"
    with pytest.raises(
        ValueError, match="precision 'fp8'; expected 'auto' or one of fp32, bf16, fp16"
    ):
        resolve_precision("fp8", "cpu")


def test_fp32_run_keys_are_those_of_before_and_mixed_precision_keys_differ():
    chosen = {"fake-mixer": 1e-3, "fake-attention": 1e-3}
    fp32, bf16 = (_study(precision).final_tasks(chosen)[0] for precision in ("fp32", "bf16"))
    assert "precision" not in fp32.config and bf16.config["precision"] == "bf16"
    assert fp32.key != bf16.key


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_a_mixed_precision_study_trains_and_its_report_says_so(tmp_path, precision, recwarn):
    with Ledger(tmp_path) as ledger:
        Runner(_study(precision), ledger, InProcessExecutor()).run()
        report = build_report(ledger)
        rows = ledger.rows()
    assert all(row.status == "ok" for row in rows), [row.error for row in rows]
    # a step the fp16 scaler skips (inf gradients at its first scale) advances no learning-rate
    # schedule
    assert not [w for w in recwarn if "lr_scheduler.step()" in str(w.message)]
    assert report.precision == report.to_dict()["precision"] == precision
    assert f"Device cpu ({precision})" in render_markdown(report)
