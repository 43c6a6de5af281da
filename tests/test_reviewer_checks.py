"""What a reviewer would reject, reproduced on small data: arms that predict one constant class,
arms identical on every seed, models that only tie the majority class, an early-overfitting
significant verdict and an inactive eigenvalue cap. (A linear series that ridge wins, an 11-periodic
series and the interval at n = 6: tests/test_references.py, tests/test_csv_forecasting.py,
tests/test_stats.py.)"""

import dataclasses
import json
import re

import pytest
import torch
from torch import nn
from typer.testing import CliRunner

from gridmix.cli import app
from gridmix.core.grid import Grid
from gridmix.report.build import build_report
from gridmix.report.markdown import render_markdown
from gridmix.study.ledger import Ledger
from gridmix.tracks import DataSizes, ModelSpec, Split, Track, TrackData
from gridmix.tracks.hookspecs import hookimpl
from gridmix.tracks.plugin_loader import load_registry
from tests import report_example

N = 8  # features per sample


def make_data(grid: Grid, seed: int, sizes: DataSizes) -> TrackData:
    """Two classes, 70 % of them class 1; the class is the sign of the first feature, shifted: a
    line separates it."""
    gen = torch.Generator().manual_seed(seed)

    def split(count):
        labels = (torch.rand(count, generator=gen) < 0.7).long()  # (S,)
        x = torch.randn(count, grid[0], generator=gen)  # (S, n)
        x[:, 0] += 3.0 * (2 * labels - 1)
        return Split(x, labels)

    return TrackData(split(sizes.n_train), split(sizes.n_val), split(sizes.n_test))


class BiasOnly(nn.Module):
    """Ignores its inputs: two learned logits for every sample, so it can only learn the majority
    class."""

    def __init__(self):
        super().__init__()
        self.logits = nn.Parameter(torch.zeros(2))

    def forward(self, x):  # (B, n) -> (B, 2)
        return self.logits.expand(len(x), 2)


def accuracy(logits, labels):
    return float((logits.argmax(-1) == labels).float().mean())


TRACK = Track(
    name="flat",
    description="a separable task, an idea and a matched baseline that ignore their inputs",
    ndim=1,
    default_grid=Grid((N,)),
    make_data=make_data,
    loss=nn.functional.cross_entropy,
    metric=accuracy,
    metric_name="accuracy",
    direction="higher",
    matched_baseline="bias-copy",
    models=(
        ModelSpec("bias", lambda g: BiasOnly(), role="idea"),
        ModelSpec("bias-copy", lambda g: BiasOnly()),
        ModelSpec("linear", lambda g: nn.Linear(g[0], 2)),
    ),
    budget_overrides={"default": dict(n_train=128, n_val=64, n_test=128, epochs=3, lrs=(5e-2,))},
)


class FlatPlugin:
    @hookimpl
    def gridmix_tracks(self):
        return [TRACK]


@pytest.fixture
def flat():
    yield load_registry(extra_plugins=[FlatPlugin()], refresh=True)
    load_registry(refresh=True)


def test_constant_and_identical_arms_are_flagged_and_only_tie_the_majority_class(
    tmp_path, flat, one_thread
):
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        ["run", "--track", "flat", "--no-scaling", "--threads", "1", "--out", str(out)],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    report = json.loads((out / "bench_report.json").read_text())
    seeds = report["seeds"]["comparison"]
    for name in ("bias", "bias-copy"):  # one class for every test sample, on every seed
        arm = report["idea"] if name == "bias" else report["baselines"][name]
        assert arm["constant_prediction_seeds"] == seeds
    assert report["baselines"]["linear"]["constant_prediction_seeds"] == []
    assert report["comparison"]["verdict"] == "identical: the comparison says nothing"
    assert report["comparison"]["per_seed_diffs"] == [0.0] * len(seeds)
    # The constant arms score exactly the majority class of their training split, seed by seed; the
    # best reference (a logistic probe, which the linear task favours) beats them on every seed.
    refs = report["references"]
    assert refs["seeds"] == seeds and not refs["fixed_split"]
    assert report["idea"]["full"]["per_seed"] == refs["per_seed"]["majority class"]
    assert set(refs["values"]) == {"majority class", "logistic probe", "1-NN"}
    against = report["reference_comparisons"]
    best = max(refs["values"], key=refs["values"].get)  # a fitted one: the task is separable
    assert best != "majority class" and against["bias"]["b"] == best
    assert against["bias"]["verdict"] == "idea worse (significant)"
    text = (out / "report.md").read_text()
    assert "**Verdict: identical: the comparison says nothing**" in text
    assert (
        "- ⚠ bias and bias-copy are identical on every seed (Δ = 0): the comparison says nothing."
        in text
    )
    assert (
        "- ⚠ bias (idea) predicted one constant (the same class or value for every test sample) "
        f"on seeds {', '.join(map(str, seeds))}" in text
    )
    assert re.search(
        r"the idea loses to it \(Δ = -0\.3\d+, p = [0-9.]+\) and the matched baseline bias-copy "
        r"loses "
        r"to it \(Δ = -0\.3\d+, p = [0-9.]+\)\*\*",
        text,
    )


def example_report(tmp_path, change_row) -> object:
    """The example study's report after ``change_row(row)`` rewrote each of its comparison runs."""
    with Ledger(report_example.fill(tmp_path), create=False) as ledger:
        for row in ledger.rows():
            if row.seed < 100 and row.status == "ok":
                ledger.record(change_row(row))
        return build_report(ledger)


def test_a_significant_verdict_reached_while_the_runs_overfit_says_so_in_its_headline(tmp_path):
    def overfit(
        row,
    ):  # best validation at the first of 3 epochs, then 0.3 worse; the last epoch's model tested
        v = row.test_metric
        return (
            dataclasses.replace(row, val_curve=[v - 0.3, v - 0.1, v])
            if row.model in ("mix", "base")
            else row
        )

    report = example_report(tmp_path, overfit)
    assert report.verdict == "idea better (significant)"
    headline = render_markdown(report).split("\n")[2]
    assert headline.startswith("**Verdict: idea better (significant)**")
    assert (
        "⚠ This verdict was reached while training checks fire: mix overfit on 6/6 seeds; base "
        "overfit on 6/6 seeds; the val split has only 32 items." in headline
    )  # the example's validation split is small
    assert "still improving" not in headline  # their best epoch is no longer the last


def test_an_inactive_cap_makes_the_ablation_untestable(tmp_path):
    def inactive(
        row,
    ):  # the idea's largest learned eigenvalue 0.88 on every seed, against the cap 1
        return (
            dataclasses.replace(
                row, extras=dict(row.extras, mechanism=report_example._signature(0.88))
            )
            if row.model == "mix"
            else row
        )

    report = example_report(tmp_path, inactive)
    ablation = report.mechanism["ablation"]
    assert ablation.verdict == ablation.result.verdict == "untestable: the cap was inactive"
    text = render_markdown(report)
    assert (
        "**The cap was inactive**: the largest eigenvalue (factor singular value) of the idea's "
        "trained models is 0.88 < 1 on every seed"
    ) in text and "so the ablation cannot test it" in text
    assert "mix − uncapped: Δ" not in text  # no test is reported for it
    # the other questions stand
    assert report.mechanism["idea_vs_control"].verdict == "idea better (significant)"
