"""The report's words match its numbers: parity states the ratios and warns only when the matched
baseline's parameter count is off the idea's (never on FLOPs, never about the control); a fit
through two grids has no R²; headers say what they compare; numbers follow one precision rule; the
Method line says what the budget was (patience, command-line changes); and the docs say exactly
which verdict smoke prints."""

import dataclasses
import re
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gridmix import orchestrate
from gridmix.cli import app
from gridmix.cli.run import DELTA_HEADER, results_table
from gridmix.report.build import build_report
from gridmix.report.format import column_decimals, fmt, fmt_column
from gridmix.report.markdown import render_markdown
from gridmix.study.ledger import Ledger
from gridmix.tracks.hookspecs import hookimpl
from gridmix.tracks.plugin_loader import load_registry
from tests import fake_track, report_example

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    with Ledger(report_example.fill(tmp_path_factory.mktemp("study")), create=False) as ledger:
        return build_report(ledger)


def section(markdown: str, title: str) -> str:
    return markdown.split(f"## {title}")[1].split("\n## ")[0]


def with_parity(report, rows, warnings=()):
    parity = dict(
        grid="8",
        batch=4,
        knobs={},
        tolerance=0.1,
        matched_baseline="base",
        warnings=list(warnings),
        rows=[
            dict(
                model=m,
                role=role,
                params=p,
                flops=f,
                params_ratio=1000 / p,
                flops_ratio=2e9 / f,
                skipped=None,
            )
            for m, role, p, f in rows
        ],
    )
    return dataclasses.replace(report, analyses={**report.analyses, "parity": parity})


def test_parity_states_the_ratios_and_never_warns_on_flops_or_the_control(report):
    saving = with_parity(
        report,
        [
            ("mix", "idea", 1000, 2e9),
            ("base", "baseline", 1040, 22e9),  # 0.09 x the FLOPs
            ("nomix", "control", 700, 1.5e9),
        ],  # far fewer parameters: a control, by design
        warnings=["mix vs base on 8: FLOPs 0.09x (beyond ±10%)"],
    )  # what older ledgers stored
    text = section(render_markdown(saving), "Parity")
    assert "⚠" not in text and "FLOPs 0.09x" not in text
    assert (
        f"- mix has {fmt(1000 / 1040)} times the parameters and {fmt(2e9 / 22e9)} times the FLOPs "
        "of its matched baseline base." in text
    )
    assert "| parameters, idea / model | FLOPs, idea / model |" in text


def test_parity_warns_when_the_matched_baseline_is_another_size(report):
    unfair = with_parity(
        report,
        [
            ("mix", "idea", 1000, 2e9),
            ("base", "baseline", 1300, 2.5e9),
            ("nomix", "control", 700, 1.5e9),
        ],
    )
    warnings = [
        line for line in section(render_markdown(unfair), "Parity").splitlines() if "⚠" in line
    ]
    assert warnings == [
        f"- ⚠ mix has {1000 / 1300:.4g} times the parameters of its matched baseline base (beyond "
        "±10%): a difference between them may come from their size, not their token mixer; "
        "`--match-params base` evens it."
    ]


def test_a_fit_through_two_grids_shows_no_exponent(report):
    """A ledger written before the rule may hold a slope through two grids: it is not shown."""
    fits = [
        dict(model="mix", quantity="time", exponent=1.02, r2=None, points=2, tail_exponent=1.02),
        dict(
            model="mix", quantity="flops", exponent=1.5, r2=0.9912345, points=3, tail_exponent=1.4
        ),
    ]
    scaling = dict(report.analyses["scaling"], fits=fits)
    text = section(
        render_markdown(
            dataclasses.replace(report, analyses={**report.analyses, "scaling": scaling})
        ),
        "Scaling",
    )
    assert (
        "| mix | time | 2 | – | – | – |" in text
        and "| mix | flops | 3 | 1.5 | 0.991 | 1.4 |" in text
    )
    assert "only from 3 grids or more" in text


def test_headers_say_what_they_compare(report):
    table = results_table(report)
    assert DELTA_HEADER == "Δ (idea − model)" and DELTA_HEADER in [c.header for c in table.columns]
    assert (
        "idea − it" not in table.plain()
        and "Δ (idea − model): the idea's test MSE minus this model's" in table.plain()
    )
    assert "| baseline | n | Δ mean (idea − baseline) |" in render_markdown(report)


def test_one_precision_rule(report):
    assert [fmt(v) for v in (12345.6, 0.69314718, -3.9e-07, 1024, 0.0, None)] == [
        "12,346",
        "0.6931",
        "-3.9e-07",
        "1,024",
        "0",
        "–",
    ]
    assert fmt_column([0.01291, 0.006872, 0.03311]) == ["0.012910", "0.006872", "0.033110"]
    assert fmt_column([-3.9e-07, 0.5]) == [
        "-0.000000",
        "0.500000",
    ]  # at most two decimals beyond the largest's
    stds = [arm.std for arm in report.arms.values()]
    plain = results_table(report).plain().splitlines()
    end = plain[1].index(" std ") + len(" std")  # the right-aligned column's right edge
    column = [line[:end].split()[-1] for line in plain[3 : 3 + len(stds)]]
    decimals = column_decimals(stds)
    assert (
        column == [f"{s:.{decimals}f}" for s in stds]
        and len({len(c.split(".")[1]) for c in column}) == 1
    )
    models = section(
        render_markdown(report),
        "Models (test metric over the comparison seeds, at each model's chosen learning rate)",
    )
    cells = [
        line.split(" | ")[4]
        for line in models.splitlines()
        if line.startswith("| ") and "---" not in line
    ][1:]
    assert cells == [f"{s:.{decimals}f}" for s in stds]


def test_the_method_line_says_what_the_budget_was(report):
    budget = dict(report.budget, patience=5, epochs=60, overrides={"epochs": 60, "n_train": 256})
    method = section(render_markdown(dataclasses.replace(report, budget=budget)), "Method")
    assert "Budget `default` (changed on the command line: epochs 60, n_train 256)" in method
    assert "up to 60 epochs, stopping after 5 without a better validation metric" in method


def test_a_control_at_chance_is_no_warning_but_another_arm_at_chance_is(report):
    """A model without token mixing at chance is what a task that needs mixing should show (the
    fixture's nomix)."""
    assert report.arms["nomix"].role == "control" and report.arms["nomix"].flag == "at chance"
    lines = render_markdown(report).splitlines()
    control = [line for line in lines if line.startswith(("- nomix", "- ⚠ nomix"))]
    assert control == [
        "- nomix (control) is at chance on every seed (2.5), as a model without token mixing is "
        "expected to be on a task that needs mixing."
    ]
    base = dataclasses.replace(report.arms["base"], flag="at chance")
    flagged = render_markdown(dataclasses.replace(report, arms=dict(report.arms, base=base)))
    assert (
        "- ⚠ base (baseline): every seed at chance (2.5): its comparisons say little about mixing."
        in flagged
    )


@pytest.fixture
def at_chance_registry():
    """The fake track, and a copy whose chance level every MSE is worse than (every arm sits "at
    chance")."""
    floor = dataclasses.replace(fake_track.TRACK, name="fake-floor", chance=1e-9)
    plugin = types.SimpleNamespace(__name__="floor", gridmix_tracks=hookimpl(lambda: [floor]))
    yield load_registry(extra_plugins=[fake_track, plugin], refresh=True)
    load_registry(refresh=True)


def smoke_verdicts() -> set[str]:
    """The verdicts docs/analysis.md says smoke prints, in backticks in its "What smoke prints"
    section."""
    text = (DOCS / "analysis.md").read_text().split("### What smoke prints")[1].split("\n### ")[0]
    return set(re.findall(r"^- `([^`]+)`(?: \(or `([^`]+)`\))?", text, re.M)[0]) | set(
        re.findall(r"^- `([^`]+)` otherwise", text, re.M)
    )


def test_the_docs_say_exactly_what_smoke_prints(at_chance_registry, tmp_path):
    listed = smoke_verdicts()
    assert listed == {
        "uninformative: both arms at chance",
        "uninformative: both arms at ceiling",
        "cannot reach α (too few seeds)",
    }
    printed = {}
    for track in ("fake", "fake-floor"):
        result = CliRunner().invoke(
            app,
            [
                "run",
                "--track",
                track,
                "--budget",
                "smoke",
                "--threads",
                "1",
                "--no-scaling",
                "--out",
                str(tmp_path / track),
            ],
            env={"COLUMNS": "200"},
        )
        assert result.exit_code == 0, result.output
        printed[track] = re.search(r"^verdict: (.+?); report: ", result.output, re.M).group(1)
    assert printed == {
        "fake": "cannot reach α (too few seeds)",
        "fake-floor": "uninformative: both arms at chance",
    }
    guide = " ".join((DOCS / "guide.md").read_text().split())
    assert (
        "it never gives a verdict" not in guide
        and "always reports" not in (DOCS / "analysis.md").read_text()
    )
    for verdict in printed.values():
        assert f"`{verdict}`" in guide, verdict
    assert orchestrate.plan_study("fake", budget="smoke").study.budget.exploratory
