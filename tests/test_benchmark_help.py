"""The benchmark scripts' ``--help`` describes each script by its docstring's whole first
paragraph, not by its first line, which ends mid-sentence where the paragraph wraps."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.parametrize("script", ["pilot_budget.py", "bench_aa.py", "profile_step.py"])
def test_help_gives_the_whole_first_paragraph(script):
    path = BENCHMARKS / script
    doc = path.read_text().split('"""')[1]
    first_paragraph = " ".join(doc.split("\n\n")[0].split())
    assert "\n" in doc.split("\n\n")[0]  # the paragraph wraps: its first line alone is cut short
    result = subprocess.run(
        [sys.executable, str(path), "--help"], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert first_paragraph in " ".join(result.stdout.split())
