"""The example third-party plugin, registered through the real entry-point path, runs end to end;
broken plugins next to it (import error, raising hook, malformed track) are reported by name and
break nothing else.

Instead of pip-installing (slow, and it would change the environment), each test puts a
``*.dist-info`` folder with an ``entry_points.txt`` on ``sys.path``: ``importlib.metadata`` finds it
exactly as it finds an installed distribution.
"""

import dataclasses
import sys
from pathlib import Path

import pytest
import torch
from gridmix_tracks.torchvision_sets import DATASETS

from gridmix.core.grid import Grid
from gridmix.study.train import train_run
from gridmix.tracks.plugin_loader import load_registry, validate_data
from tests.installed import install

EXAMPLE = Path(__file__).resolve().parents[1] / "plugins" / "gridmix-example-track"

BROKEN_MODULES = {
    "broken_import": "import gridmix_no_such_dependency  # noqa: F401\n",
    "broken_hook": (
        "from gridmix import hookimpl\n\n@hookimpl\ndef gridmix_tracks():\n    raise "
        "RuntimeError('cannot reach the dataset server')\n"
    ),
    "broken_track": (
        "import dataclasses\nfrom gridmix import hookimpl\nfrom gridmix_example_track.heat import "
        "heat_track\n\n@hookimpl\ndef gridmix_tracks():\n    return "
        "[dataclasses.replace(heat_track(), name='heat2', ndim=3)]\n"
    ),
}


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """The example plugin and a broken distribution, 'installed' through dist-info folders on
    sys.path."""
    for module, source in BROKEN_MODULES.items():
        (tmp_path / f"{module}.py").write_text(source)
    yield install(
        monkeypatch,
        tmp_path,
        {
            "gridmix-example-track": {"example": "gridmix_example_track.plugin"},
            "gridmix-broken-demo": {
                "import-error": "broken_import",
                "raises": "broken_hook",
                "malformed": "broken_track",
            },
        },
        code=(EXAMPLE,),
    )
    monkeypatch.undo()
    for module in [
        *BROKEN_MODULES,
        "gridmix_example_track",
        "gridmix_example_track.plugin",
        "gridmix_example_track.heat",
        "gridmix_example_track.conv_mixer",
    ]:
        sys.modules.pop(module, None)
    load_registry(refresh=True)


def test_example_plugin_adds_a_track_and_a_baseline_to_a_builtin_track(installed):
    heat = installed.track("heat")
    assert (heat.plugin, heat.plugin_version) == ("example", "0.1.0")
    assert [m.name for m in heat.models] == [
        "vit",
        "vit-concentration",
        "vit-concentration-uncapped",
        "vit-tokenwise",
        "vit-dwconv",
    ]
    image = installed.track("image")
    assert image.plugin == "image" and image.models[-1].name == "vit-dwconv"
    assert (image.models[-1].plugin, image.models[-1].plugin_version) == ("example", "0.1.0")
    assert "vit-dwconv" not in [m.name for m in installed.track("sequence").models]


def test_broken_plugins_are_reported_by_name_and_the_others_keep_working(installed):
    broken = {plugin.name: plugin for plugin in installed.broken}
    assert set(broken) == {"import-error", "raises", "malformed"}
    assert (
        broken["import-error"].error
        == "ModuleNotFoundError: No module named 'gridmix_no_such_dependency'"
    )
    assert broken["raises"].error == "RuntimeError: cannot reach the dataset server"
    assert (
        "track 'heat2' (plugin 'malformed'): default_grid 16x16 does not have ndim=3"
        in broken["malformed"].error
    )
    # the distribution's version
    assert all(plugin.version == "0.1.0" for plugin in broken.values())
    user_data = {"image-folder", "sequence-csv"}  # listed without their data, as needing it
    assert {
        "sequence",
        "image",
        "video",
        "mqar",
        "recall",
        "pathfinder",
        "copy",
        "occlusion",
        "heat",
    } | {spec.track for spec in DATASETS} | user_data == set(installed.tracks)


def test_example_track_runs_end_to_end(installed):
    heat = installed.track("heat")
    grid = heat.check_grid("8x8")
    budget = dataclasses.replace(heat.budget("smoke"), n_train=64, n_val=16, n_test=16, epochs=3)
    assert budget.epochs == 3
    data = validate_data(heat, heat.make_data(grid, 0, budget.sizes), grid)
    assert data.train.inputs.shape == (64, 1, 8, 8) and data.train.targets.shape == (64, 64)
    for spec in heat.models:
        result = train_run(
            heat, spec, grid, lr=3e-3, seed=0, budget=budget, data=data, device=torch.device("cpu")
        )
        assert result.status == "ok", (spec.name, result.error)
        assert (
            result.train_loss[-1] < result.train_loss[0]
            and result.test_metric < data.test.targets.var().item()
        )


def test_conv_baseline_differs_from_the_vit_in_the_token_mixer_only(installed):
    from gridmix_example_track.conv_mixer import DepthwiseConvMixer

    image = installed.track("image")
    grid = Grid((8, 8))
    conv, vit = image.model("vit-dwconv").build(grid), image.model("vit").build(grid)
    assert all(isinstance(block.attn, DepthwiseConvMixer) for block in conv.blocks)
    outside = [name for name, _ in conv.named_modules() if ".attn" not in name]
    assert outside == [name for name, _ in vit.named_modules() if ".attn" not in name]
    inputs = image.make_data(grid, 0, image.budget("smoke").sizes).train.inputs[:4]
    assert conv(inputs).shape == (4, 2)
