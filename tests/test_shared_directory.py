"""Two studies in one directory: another idea or other models on the same track and grid reuse the
finished runs they share, and each report's parity and scaling are measured on its own models (the
idea against each of them), never carried over from the study before."""

import json

from gridmix import orchestrate
from gridmix.report.build import analyses_of


def test_a_second_study_in_the_directory_measures_its_own_parity_and_scaling(
    fake_registry, tmp_path
):
    options = dict(budget="smoke", seeds=2, threads=1, jobs=1)
    orchestrate.run("fake", "8", out=tmp_path, models=("fake-attention",), **options)
    report = orchestrate.run(
        "fake", "8", out=tmp_path, models=("fake-attention", "fake-fragile"), **options
    )
    models = ["fake-mixer", "fake-attention", "fake-fragile"]
    document = json.loads((tmp_path / "bench_report.json").read_text())
    assert [row["model"] for row in document["parity"]["rows"]] == models
    assert document["scaling"]["models"] == models
    assert "models" not in document and report.analyses["parity"]["rows"][2]["model"] == models[2]
    # the first study's own command: its runs and its analyses again, for its two models
    orchestrate.run("fake", "8", out=tmp_path, models=("fake-attention",), **options)
    document = json.loads((tmp_path / "bench_report.json").read_text())
    assert [row["model"] for row in document["parity"]["rows"]] == models[:2]


def test_analyses_stored_without_their_models_are_refused_where_they_name_another_study():
    rows = [{"model": "idea"}, {"model": "baseline"}]
    legacy = {"parity": {"idea": "idea", "rows": rows}, "scaling": {"models": ["idea"]}}
    assert analyses_of(legacy, ("idea", "baseline", "control"), "idea") == legacy
    assert analyses_of(legacy, ("other", "idea", "baseline"), "other") == {}  # another idea
    assert analyses_of(legacy, ("idea", "control"), "idea") == {}  # a model it does not train
    assert analyses_of({"parity": {"error": "…"}}, ("idea",), "idea") == {"parity": {"error": "…"}}
    # stored with their models: matched by them exactly, and returned without them (no report key)
    pair = ["idea", "baseline"]
    assert analyses_of(dict(legacy, models=pair), tuple(pair), "idea") == legacy
    assert analyses_of(dict(legacy, models=pair), (*pair, "control"), "idea") == {}
    assert analyses_of(None, ("idea",), "idea") == {} and analyses_of({}, ("idea",), "idea") == {}
