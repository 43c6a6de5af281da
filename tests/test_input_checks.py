"""Bad input is refused before any training: every case below exits 2 with one line, no traceback
and no ledger; the cheap checks (grids, number lists, seeds, empty lists) answer before torch is
imported; the seed limit and the sign-flip arithmetic at any seed count; ``gridmix report`` says how
many runs an unfinished study lacks."""

import pytest
from typer.testing import CliRunner

from gridmix import orchestrate
from gridmix.analysis.stats import exact_level, min_attainable_p
from gridmix.cli import app
from gridmix.core.inputs import parse_grids, parse_over, parse_rates, split_list
from gridmix.tracks.budget import BUDGETS, MAX_SEEDS, resolve_budget
from tests.python_child import run_python

RUN = (
    "run",
    "--track",
    "image",
    "--grid",
    "8x8",
    "--budget",
    "smoke",
    "--threads",
    "1",
    "--no-scaling",
)
SWEEP = ("sweep", "--track", "mqar", "--budget", "smoke", "--threads", "1")
SCALE = ("scale", "--track", "image", "--no-memory", "--repeats", "1", "--warmup", "0")

BAD_INPUTS = {
    "run seeds 1024": (*RUN, "--seeds", "1024"),
    "run seeds past any integer": (*RUN, "--seeds", "99999999999999999999"),
    "run lrs inf": (*RUN, "--lrs", "inf"),
    "run lrs 1e400": (*RUN, "--lrs", "1e400"),
    "run lrs nan": (*RUN, "--lrs", "nan"),
    "run lrs negative": (*RUN, "--lrs", "1e-3,-1e-3"),
    "run lrs not a number": (*RUN, "--lrs", "fast"),
    "run lrs empty": (*RUN, "--lrs", ""),
    "run lrs only a comma": (*RUN, "--lrs", ","),
    "run lrs empty item": (*RUN, "--lrs", "1e-3,,3e-3"),
    "run lrs repeated": (*RUN, "--lrs", "1e-3,3e-3,1e-3"),
    "run lrs repeated once parsed": (*RUN, "--lrs", "1e-3,0.001"),
    "run grid with spaces": ("run", "--track", "image", "--grid", "8 x 8", "--budget", "smoke"),
    "run grid empty": ("run", "--track", "image", "--grid", "", "--budget", "smoke"),
    "run eval grids only a comma": (*RUN, "--eval-grids", ","),
    "run eval grids empty": (*RUN, "--eval-grids", ""),
    "run eval grid with spaces": (*RUN, "--eval-grids", "16 x 16"),
    "run eval grid too large": (*RUN, "--eval-grids", "100000x100000"),
    "run models empty": (*RUN, "--models", ""),
    "run baselines only a comma": (*RUN, "--baselines", ","),
    "run models repeated": (*RUN, "--models", "vit,vit"),
    "run baselines repeated": (*RUN, "--baselines", "global-filter,global-filter"),
    "run eval grids repeated once parsed": (*RUN, "--eval-grids", "16x16,016x16"),
    "run set embed_dim negative": (*RUN, "--set", "embed_dim=-4"),
    "run set depth 0": (*RUN, "--set", "depth=0"),
    "run jobs 0": (*RUN, "--jobs", "0"),
    "sweep seeds 1024": (*SWEEP, "--over", "grid=32,64", "--seeds", "1024"),
    "sweep lrs inf": (*SWEEP, "--over", "grid=32,64", "--lrs", "inf"),
    "sweep over nothing": (*SWEEP, "--over", "grid="),
    "sweep over empty item": (*SWEEP, "--over", "grid=32,,64"),
    "sweep over grid with spaces": (*SWEEP, "--over", "grid=32 x 1,64"),
    "sweep over embed_dim negative": (*SWEEP, "--over", "embed_dim=-4,32"),
    "sweep set embed_dim negative": (*SWEEP, "--over", "depth=1,2", "--set", "embed_dim=-4"),
    "sweep models empty": (*SWEEP, "--over", "grid=32,64", "--models", ""),
    "scale grids empty": (*SCALE, "--grids", ""),
    "scale grids only a comma": (*SCALE, "--grids", ","),
    "scale grid with spaces": (*SCALE, "--grids", "8 x 8"),
    "scale models empty": (*SCALE, "--grids", "8x8", "--models", ""),
    "scale grids repeated": (*SCALE, "--grids", "8x8,16x16,8x8"),
    "sweep over a value repeated": (*SWEEP, "--over", "grid=32,64,32"),
}


@pytest.mark.parametrize("args", list(BAD_INPUTS.values()), ids=list(BAD_INPUTS))
def test_bad_input_is_refused_in_one_line_before_anything_is_trained(args, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [*args, "--out", str(out)], env={"COLUMNS": "300"})
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)  # no exception escaped: no traceback
    lines = result.output.strip().splitlines()
    assert (
        len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.output
    ), result.output
    assert not out.exists()  # no ledger, no report: nothing ran


@pytest.mark.parametrize("args", [("report", "{tmp}/nothing"), ("report", "{tmp}")])
def test_report_refuses_a_directory_without_a_study_in_one_line(args, tmp_path):
    result = CliRunner().invoke(app, [arg.format(tmp=tmp_path) for arg in args])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert len(result.output.strip().splitlines()) == 1 and result.output.startswith("error: ")


def test_cheap_refusals_import_no_torch():
    code = (
        "import sys\nfrom gridmix.cli import app\ncases = [['run', '--grid', '8 x 8'], ['run', "
        "'--lrs', 'inf'], ['run', '--lrs', ','],\n         ['run', '--seeds', '1024'], ['run', "
        "'--eval-grids', ','], ['run', '--models', ''],\n         ['sweep', '--over', "
        "'grid=32,,64'], ['sweep', '--over', 'grid=32,64', '--lrs', '1e400'],\n         ['scale', "
        "'--grids', ''], ['scale', '--grids', '8 x 8']]\nfor args in cases:\n    try:\n        "
        "app(args)\n    except SystemExit as done:\n        assert done.code == 2, "
        "args\nprint('torch' in sys.modules)"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False"
    assert len(done.stderr.strip().splitlines()) == 10 and "Traceback" not in done.stderr


def test_the_list_rule_and_finite_rates():
    assert split_list(" 8x8 , 16x16", "--grids", "8x8") == (
        "8x8",
        "16x16",
    )  # spaces around the commas: ignored
    for text in ("", " ", ",", " , "):
        with pytest.raises(ValueError, match="names nothing; expected a comma-separated list"):
            split_list(text, "--grids", "8x8")
    with pytest.raises(ValueError, match="--models 'a,,b' holds an empty item"):
        split_list("a,,b", "--models", "a,b")
    assert parse_rates("1e-3, 3e-3") == (1e-3, 3e-3)
    for text in ("inf", "-inf", "nan", "1e400", "0", "-1e-3"):
        with pytest.raises(ValueError, match=f"'{text}' is not a finite positive number"):
            parse_rates(text)
    assert parse_over(["grid=64, 128"]) == [("grid", ("64", "128"))]
    with pytest.raises(ValueError, match="--over grid '64,' holds an empty item"):
        parse_over(["grid=64,"])
    # no item twice: as typed, and once parsed (the same rate, the same grid, written otherwise)
    with pytest.raises(ValueError, match="--models 'a, b,a' names 'a' twice; expected each once"):
        split_list("a, b,a", "--models", "a,b")
    with pytest.raises(ValueError, match="--lrs '1e-3,0.001' names '0.001' twice"):
        parse_rates("1e-3,0.001")
    with pytest.raises(ValueError, match="--grids '8x8,08x8' names '8x8' twice"):
        parse_grids("8x8,08x8", "--grids")


def test_the_seed_limit_and_the_sign_flip_arithmetic_at_any_seed_count():
    assert MAX_SEEDS == 1000  # comparison seeds 0 … 999, below the sweep seeds 1000, 1001, …
    assert resolve_budget("default", seeds=MAX_SEEDS).seeds == MAX_SEEDS
    for seeds in (MAX_SEEDS + 1, 99999999999999999999):
        with pytest.raises(ValueError, match="seeds=.*; a paired comparison needs 2 to 1000"):
            resolve_budget("default", seeds=seeds)
    for lrs in ((float("inf"),), (1e-3, float("nan"))):
        with pytest.raises(ValueError, match="expected finite positive learning rates"):
            resolve_budget("default", lrs=lrs)
    # a rate swept twice would train the same runs twice and show two columns of one rate
    with pytest.raises(ValueError, match=r"lrs=\(0.001, 0.003, 0.001\) repeats a learning rate"):
        resolve_budget("default", lrs=(1e-3, 3e-3, 1e-3))
    assert BUDGETS["default"].seeds <= MAX_SEEDS
    # 2/2^n without overflow: exact where a float holds it, 0.0 below the smallest one; Monte Carlo
    # past 20 pairs.
    assert min_attainable_p(6) == 2 / 64 and min_attainable_p(1024, exact_max_n=2000) == 2.0**-1023
    assert min_attainable_p(1076, exact_max_n=2000) == 0.0
    assert min_attainable_p(1024) == min_attainable_p(99999999999999999999) == 1 / 100_001
    assert exact_level(8) == 12 / 256 and 0.05 - 2**-1022 <= exact_level(1100) <= 0.05


def test_report_on_an_unfinished_study_says_how_many_runs_are_missing(fake_registry, tmp_path):
    options = dict(budget="smoke", seeds=3, threads=1, scaling=False)
    # planned, nothing run
    orchestrate.open_ledger(tmp_path, orchestrate.plan_study("fake", "8", **options)).close()
    result = CliRunner().invoke(app, ["report", str(tmp_path)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert (
        "unfinished: 15 of 15 planned runs are missing or failed, so this report covers only the "
        "runs done; the same `gridmix run` command resumes the study"
    ) in result.output
    orchestrate.run("fake", "8", out=tmp_path, **options)
    finished = CliRunner().invoke(app, ["report", str(tmp_path)], env={"COLUMNS": "300"})
    assert finished.exit_code == 0 and "unfinished:" not in finished.output, finished.output


def test_the_python_api_refuses_a_model_named_twice():
    # a tuple skips the command line's list rule; planning checks it again
    with pytest.raises(ValueError, match="--models 'vit,vit' names 'vit' twice"):
        orchestrate.plan_study("image", "8x8", models=("vit", "vit"), budget="smoke")
