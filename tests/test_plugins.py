"""The plugin manager: loading one plugin at a time, broken plugins reported by name, validation,
env vars."""

import dataclasses
import inspect
import pickle
import types
from pathlib import Path

import pluggy
import pytest
import torch
from gridmix_tracks.torchvision_sets import DATASETS

import gridmix
from gridmix.core.grid import Grid
from gridmix.core.suggest import did_you_mean
from gridmix.tracks import ContractError, DataSizes, ModelSpec, Split, Track, TrackData, hookspecs
from gridmix.tracks.hookspecs import hookimpl
from gridmix.tracks.plugin_loader import (
    ALLOW_ENV,
    DISABLE_AUTOLOAD_ENV,
    _call,
    build_registry,
    load_registry,
    validate_data,
)

BUILTIN = {"sequence", "image", "video", "mqar", "recall", "pathfinder", "copy", "occlusion"}


def tiny_track(name: str = "tiny", **changes) -> Track:
    """A valid 1-D track whose models are trivial linear maps."""

    def make_data(grid, seed, sizes):
        gen = torch.Generator().manual_seed(seed)

        def split(n):
            x = torch.randn(n, 1, grid[0], generator=gen)
            return Split(x, x.sum(dim=(1, 2)))

        return TrackData(split(sizes.n_train), split(sizes.n_val), split(sizes.n_test))

    def build(grid):
        return torch.nn.Sequential(
            torch.nn.Flatten(), torch.nn.Linear(grid[0], 1), torch.nn.Flatten(0)
        )

    fields = dict(
        name=name,
        description="a tiny track",
        ndim=1,
        default_grid=Grid((8,)),
        make_data=make_data,
        loss=torch.nn.functional.mse_loss,
        metric=lambda p, t: torch.nn.functional.mse_loss(p, t).item(),
        metric_name="MSE",
        direction="lower",
        models=(ModelSpec("base", build), ModelSpec("idea", build, role="idea")),
        matched_baseline="base",
    )
    return Track(**{**fields, **changes})


def plugin(name: str, **hooks) -> types.SimpleNamespace:
    """A plugin object named ``name`` with the given hook functions, marked with ``@hookimpl``."""
    return types.SimpleNamespace(
        __name__=name, **{hook: hookimpl(function) for hook, function in hooks.items()}
    )


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv(DISABLE_AUTOLOAD_ENV, raising=False)
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    yield monkeypatch
    monkeypatch.undo()
    load_registry(refresh=True)


def test_every_hook_is_documented():
    specs = [
        obj
        for name, obj in vars(hookspecs).items()
        if inspect.isfunction(obj) and hasattr(obj, f"{hookspecs.PROJECT_NAME}_spec")
    ]
    assert {spec.__name__ for spec in specs} == {
        "gridmix_tracks",
        "gridmix_models",
        "gridmix_mixers",
    }
    for spec in specs:
        assert spec.__doc__ and len(spec.__doc__.strip()) > 40, (
            f"hook {spec.__name__} has no docstring"
        )
    guide = (Path(__file__).parents[1] / "docs" / "plugins.md").read_text()
    assert all(f"`{spec.__name__}(" in guide for spec in specs), (
        "every hook is listed in docs/plugins.md"
    )


def test_builtin_tracks_load_through_entry_points(clean_env):
    registry = load_registry(refresh=True)
    assert BUILTIN <= set(registry.tracks)
    assert list(registry.tracks) == sorted(registry.tracks)
    for name in BUILTIN:
        track = registry.track(name)
        assert track.plugin == name and track.plugin_version == gridmix.__version__
        assert all(
            spec.plugin == name and spec.plugin_version == gridmix.__version__
            for spec in track.models
        )
    assert {(p.name, p.distribution) for p in registry.plugins} >= {(n, "gridmix") for n in BUILTIN}
    assert not [b for b in registry.broken if b.name in BUILTIN]


def test_registry_is_cached_until_refreshed(clean_env):
    first = load_registry(refresh=True)
    assert load_registry() is first
    assert load_registry(refresh=True) is not first


def test_unknown_track_suggests_the_closest_name(clean_env):
    registry = load_registry(refresh=True)
    with pytest.raises(
        ValueError, match=r"unknown track 'imag'; did you mean 'image'\? installed: .*image, "
    ):
        registry.track("imag")
    # no close name
    with pytest.raises(ValueError, match=r"^unknown track 'nope'; installed: .*image, "):
        registry.track("nope")


def test_disable_autoload_loads_no_entry_point_but_extra_plugins_register(clean_env):
    clean_env.setenv(DISABLE_AUTOLOAD_ENV, "1")
    registry = load_registry(
        refresh=True, extra_plugins=[plugin("mine", gridmix_tracks=lambda: [tiny_track()])]
    )
    assert list(registry.tracks) == ["tiny"] and registry.broken == []
    assert registry.track("tiny").plugin == "mine"


def test_allow_list_loads_only_named_plugins_and_reports_unknown_names(clean_env):
    clean_env.setenv(ALLOW_ENV, "image, vidoe")
    registry = load_registry(refresh=True)
    assert list(registry.tracks) == ["image"]
    assert [b.name for b in registry.broken] == ["vidoe"]
    assert "did you mean 'video'?" in registry.broken[0].error
    clean_env.setenv(ALLOW_ENV, "gridmix")  # a distribution name allows all of its entry points
    assert BUILTIN <= set(load_registry(refresh=True).tracks)


def test_extra_plugins_replace_the_cache_until_refresh(clean_env):
    registry = load_registry(
        refresh=True, extra_plugins=[plugin("mine", gridmix_tracks=lambda: [tiny_track()])]
    )
    assert load_registry() is registry and "tiny" in load_registry().tracks
    assert "tiny" not in load_registry(refresh=True).tracks


def broken_plugins():
    def raises():
        raise RuntimeError("database not found\nsecond line")

    return {
        "raises": plugin("raises", gridmix_tracks=raises),
        "not-a-list": plugin("not-a-list", gridmix_tracks=lambda: tiny_track("single")),
        "not-a-track": plugin("not-a-track", gridmix_tracks=lambda: ["image"]),
        "bad-direction": plugin(
            "bad-direction", gridmix_tracks=lambda: [tiny_track("dir", direction="up")]
        ),
        "duplicate": plugin("duplicate", gridmix_tracks=lambda: [tiny_track("image")]),
        "typo-hook": plugin("typo-hook", gridmix_track=lambda: [tiny_track("typo")]),
        "no-hooks": types.SimpleNamespace(
            __name__="no-hooks", gridmix_tracks=lambda: [tiny_track("unmarked")]
        ),
        "adds-idea": plugin(
            "adds-idea", gridmix_models=lambda track: [ModelSpec("x", print, role="idea")]
        ),
        "models-raise": plugin("models-raise", gridmix_models=lambda track: 1 / 0),
    }


def test_broken_plugins_are_reported_by_name_and_the_others_keep_working(clean_env):
    good = plugin("good", gridmix_tracks=lambda: [tiny_track("good")])
    half = plugin(
        "half",
        gridmix_tracks=lambda: [tiny_track("fine"), tiny_track("half", matched_baseline="x")],
    )
    registry = load_registry(refresh=True, extra_plugins=[*broken_plugins().values(), good, half])
    errors = {}
    for broken in registry.broken:
        errors.setdefault(broken.name, []).append(broken.error)
    assert set(errors) == set(broken_plugins()) | {"half"}
    assert errors["raises"] == ["RuntimeError: database not found"]  # one line
    assert (
        "returned Track" in errors["not-a-list"][0] and "expected a list" in errors["not-a-list"][0]
    )
    assert "returned str 'image'" in errors["not-a-track"][0]
    assert (
        "direction 'up'" in errors["bad-direction"][0]
        and "plugin 'bad-direction'" in errors["bad-direction"][0]
    )
    assert "already provided by plugin 'image'" in errors["duplicate"][0]
    assert "unknown hook 'gridmix_track'; did you mean 'gridmix_tracks'?" in errors["typo-hook"][0]
    assert "implements no gridmix hook" in errors["no-hooks"][0]
    assert all("a plugin may add baselines only" in e for e in errors["adds-idea"])
    assert all("ZeroDivisionError" in e for e in errors["models-raise"])
    # the bad track fails as it is built, in the plugin's hook: that call's other track ("fine")
    # goes with it
    assert errors["half"] == [
        "ValueError: track 'half' (plugin 'half'): matched_baseline 'x' is not one of its "
        "baselines ['base']"
    ]
    user_data = {"image-folder", "sequence-csv"}  # listed without their data, as needing it
    assert BUILTIN | {"good"} | {spec.track for spec in DATASETS} | user_data == set(
        registry.tracks
    )
    assert [m.name for m in registry.track("image").models] == [
        "vit",
        "vit-concentration",
        "mlp-mixer",
        "vit-concentration-uncapped",
        "vit-tokenwise",
    ]


def test_pm_hook_cannot_blame_one_plugin_so_each_implementation_is_called_alone():
    """Why ``plugins._call`` calls each implementation itself: what pluggy's own callers do, on this
    version.

    If a pluggy release changes one of these, this test fails: then re-examine ``_call``'s
    docstring.
    """
    manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    # a valid answer: no models for this track
    nothing = plugin("nothing", gridmix_models=lambda track: None)
    adds = plugin("adds", gridmix_models=lambda track: ["model"])
    for name, each in (("nothing", nothing), ("adds", adds)):
        manager.register(each, name=name)
    # the results are a bare list: None answers are dropped, so a position does not say which plugin
    # answered
    assert manager.hook.gridmix_models(track=None) == [["model"]]
    assert len(manager.hook.gridmix_models.get_hookimpls()) == 2
    # the first implementation that raises ends the call: every other plugin's answer is lost with
    # it
    manager.register(plugin("raises", gridmix_models=lambda track: 1 / 0), name="raises")
    with pytest.raises(ZeroDivisionError):
        manager.hook.gridmix_models(track=None)
    # pluggy's public caller for one plugin at a time collects the plugins it leaves out in a set:
    # plugin objects that registration accepts but that are not hashable (SimpleNamespace, dataclass
    # instances) break it
    with pytest.raises(TypeError, match="unhashable"):
        manager.subset_hook_caller("gridmix_models", remove_plugins=[nothing, adds])
    # what gridmix does instead: one implementation at a time, each answer (None too) attributed to
    # its plugin
    answers = {}
    for impl in manager.hook.gridmix_models.get_hookimpls():
        try:
            answers[impl.plugin_name] = _call(impl, track=None)
        except ZeroDivisionError as error:
            answers[impl.plugin_name] = type(error).__name__
    assert answers == {"nothing": None, "adds": ["model"], "raises": "ZeroDivisionError"}


def test_gridmix_models_adds_a_baseline_to_an_existing_track(clean_env):
    extra = ModelSpec(
        "linear", lambda grid: torch.nn.Linear(1, 1), description="a plugin's baseline"
    )
    adder = plugin(
        "adder", gridmix_models=lambda track: [extra] if track.name == "sequence" else None
    )
    registry = load_registry(refresh=True, extra_plugins=[adder])
    sequence = registry.track("sequence")
    assert sequence.models[-1].name == "linear" and sequence.models[-1].plugin == "adder"
    assert sequence.plugin == "sequence" and sequence.idea.plugin == "sequence"
    assert "linear" not in [m.name for m in registry.track("image").models]


def test_builtin_tracks_offer_an_ablation_and_a_control_on_the_ideas_backbone(clean_env):
    registry = load_registry(refresh=True)
    for name in BUILTIN:
        track = registry.track(name)
        assert track.ablation is not None and track.control is not None, name
        assert track.ablation.name == f"{track.idea.name}-uncapped" and track.control.name.endswith(
            "tokenwise"
        )
        assert track.baselines == tuple(m for m in track.models if m.role == "baseline")
    assert tiny_track().ablation is None and tiny_track().control is None


def test_build_registry_reads_only_the_environment_it_is_given():
    registry = build_registry(environ={DISABLE_AUTOLOAD_ENV: "1"})
    assert registry.tracks == {} and registry.broken == [] and registry.plugins == []


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(name=""), "name ''"),
        (dict(name="has space"), "name 'has space'"),
        (dict(ndim=0), "ndim 0"),
        (dict(default_grid=Grid((8, 8))), "default_grid 8x8 does not have ndim=1"),
        (dict(default_grid="8x"), "default_grid: invalid grid"),
        (dict(direction="up"), "direction 'up'; expected one of ('lower', 'higher')"),
        (dict(metric_name=""), "metric_name non-empty"),
        (dict(loss="mse"), "loss is 'mse'; expected a callable"),
        (dict(models=()), "expected a non-empty tuple"),
        (
            dict(matched_baseline="idea"),
            "matched_baseline 'idea' is not one of its baselines ['base']",
        ),
        (dict(budget_overrides={"huge": {}}), "unknown budget 'huge'"),
        (
            dict(budget_overrides={"smoke": {"epoch": 3}}),
            "overrides unknown budget fields ['epoch']",
        ),
        (
            dict(budget_overrides=[("smoke", {})]),
            "budget_overrides [('smoke', {})]; expected a dict",
        ),
        (
            dict(supports=lambda grid: "too short"),
            "its own default_grid 8 is unsupported: too short",
        ),
        (
            dict(chance="half"),
            "chance 'half'; expected None or a finite number or a function of the grid",
        ),
        (dict(ceiling=float("nan")), "ceiling nan; expected None or a finite number"),
        (
            dict(default_models=("base", "vit")),
            "default_models names ['vit'], which it does not offer; its models are "
            "['base', 'idea']",
        ),
        (dict(default_models="base"), "default_models 'base'; expected a tuple of model names"),
    ],
)
def test_a_track_checks_its_fields_when_built(changes, message):
    with pytest.raises(ContractError, match="plugin 'p'") as error:
        tiny_track(plugin="p", **changes)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("models", "message"),
    [
        (
            lambda b: (ModelSpec("base", b), ModelSpec("base", b, role="idea")),
            "model names ['base'] appear more than once",
        ),
        (lambda b: (ModelSpec("base", b),), "0 models with role 'idea'"),
        (
            lambda b: (
                ModelSpec("base", b),
                ModelSpec("i", b, role="idea"),
                ModelSpec("j", b, role="idea"),
            ),
            "2 models with role 'idea'",
        ),
        (
            lambda b: (
                ModelSpec("base", b),
                ModelSpec("i", b, role="idea"),
                ModelSpec("a", b, role="ablation"),
                ModelSpec("a2", b, role="ablation"),
            ),
            "2 models with role 'ablation'",
        ),
        (lambda b: (ModelSpec("base", b), "idea"), "models holds str 'idea'"),
    ],
)
def test_a_track_checks_its_models_when_built(models, message):
    track = tiny_track()
    with pytest.raises(ContractError, match="track 'tiny'") as error:
        dataclasses.replace(track, models=models(track.models[0].build))
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(name="has space"), "model 'has space': name 'has space'; expected letters"),
        (
            dict(role="hero"),
            "model 'm': role 'hero'; expected one of ('idea', 'baseline', 'ablation', 'control')",
        ),
        (dict(build=None), "model 'm': build is None; expected a callable"),
        (dict(supports="small"), "model 'm': supports is 'small'; expected a callable"),
        (dict(width_kwarg=2.0), "model 'm': width_kwarg 2.0; expected None or a keyword name"),
        (dict(description=None), "model 'm': description None; expected a string"),
        (dict(role="hero", plugin="p"), "model 'm' (plugin 'p'): role 'hero'"),
    ],
)
def test_a_model_spec_checks_its_fields_when_built(changes, message):
    with pytest.raises(ContractError) as error:
        ModelSpec(**{"name": "m", "build": print, **changes})
    assert message in str(error.value)


def test_a_track_accepts_a_list_of_models_and_any_grid_spelling():
    track = tiny_track(
        models=[ModelSpec("base", print), ModelSpec("idea", print, role="idea")],
        default_grid="8",
        default_models=["base"],
    )
    assert (
        isinstance(track.models, tuple)
        and track.default_grid == Grid((8,))
        and track.default_models == ("base",)
    )


def test_a_contract_error_names_the_plugin_that_built_the_object_and_survives_pickling():
    error = ContractError("track", "t", "direction 'up'")
    assert str(error) == "track 't': direction 'up'"
    assert error.blaming("mine") == "track 't' (plugin 'mine'): direction 'up'"
    owned = ContractError("track", "t", "direction 'up'", plugin="theirs")
    # an object stamped with its plugin keeps naming that plugin
    assert owned.blaming("mine") == str(owned)
    assert str(pickle.loads(pickle.dumps(owned))) == str(owned) and isinstance(owned, ValueError)


def test_malformed_models_built_in_a_hook_name_the_plugin(clean_env):
    clean_env.setenv(DISABLE_AUTOLOAD_ENV, "1")
    bad_model = plugin(
        "bad-model",
        gridmix_tracks=lambda: [
            tiny_track(models=(ModelSpec("base", print), ModelSpec("i", print, role="x")))
        ],
    )
    clash = plugin("clash", gridmix_models=lambda track: [ModelSpec("base", print)])
    registry = load_registry(
        refresh=True,
        extra_plugins=[plugin("mine", gridmix_tracks=lambda: [tiny_track()]), bad_model, clash],
    )
    errors = {broken.name: broken.error for broken in registry.broken}
    assert errors["bad-model"] == (
        "ValueError: model 'i' (plugin 'bad-model'): role 'x'; expected one of "
        "('idea', 'baseline', 'ablation', 'control')"
    )
    assert errors["clash"] == (
        "ValueError: gridmix_models(track='tiny'): track 'tiny' (plugin 'mine'): model names "
        "['base'] appear more than once in ['base', 'idea', 'base']"
    )
    assert [m.name for m in registry.track("tiny").models] == ["base", "idea"]


def test_a_track_built_with_a_field_it_lacks_is_refused_in_one_line_listing_its_fields(clean_env):
    clean_env.setenv(DISABLE_AUTOLOAD_ENV, "1")
    old_name = plugin("old-name", gridmix_tracks=lambda: [tiny_track(knobs={"dim": 8})])
    misspelt = plugin(
        "misspelt",
        gridmix_tracks=lambda: [
            tiny_track(models=(ModelSpec("base", print), ModelSpec("i", print, rol="idea")))
        ],
    )
    registry = load_registry(refresh=True, extra_plugins=[old_name, misspelt])
    errors = {broken.name: broken.error for broken in registry.broken}
    fields = ", ".join(field.name for field in dataclasses.fields(Track))
    assert (
        errors["old-name"] == f"TypeError: gridmix.Track has no field 'knobs'; its fields: {fields}"
    )
    assert "settings, rebuild" in errors["old-name"] and "\n" not in errors["old-name"]
    assert errors["misspelt"].startswith(
        "TypeError: gridmix.ModelSpec has no field 'rol'; did you mean 'role'? "
        "its fields: name, build, role,"
    )
    assert registry.tracks == {}


def test_did_you_mean_suggests_the_closest_known_name_or_only_separates():
    assert did_you_mean("imag", ["image", "video"]) == "; did you mean 'image'?"
    assert did_you_mean("xyz", ["image", "video"]) == ";"  # the list of known names follows it
    assert did_you_mean("imag", iter(["image"])) == "; did you mean 'image'?"


def test_validate_data_accepts_a_tracks_data_and_rejects_bad_values():
    track = dataclasses.replace(tiny_track(), plugin="p")
    grid = Grid((8,))
    data = track.make_data(grid, 0, DataSizes(8, 4, 4))
    assert validate_data(track, data, grid) is data

    def broken(split="train", **parts):
        return dataclasses.replace(
            data, **{split: dataclasses.replace(getattr(data, split), **parts)}
        )

    x, y = data.train.inputs, data.train.targets
    cases = [
        (("not data",), "make_data returned tuple; expected gridmix.TrackData"),
        (broken(inputs=x.numpy()), "train.inputs is ndarray; expected a torch.Tensor"),
        (broken(inputs=x.int()), "train.inputs has dtype torch.int32"),
        (broken(targets=y[:5]), "train has 8 inputs and 5 targets"),
        (broken(inputs=x[:0], targets=y[:0]), "train has 0 inputs and 0 targets"),
        (broken(inputs=torch.where(x > 1, float("nan"), x)), "train.inputs holds"),
        (broken("test", targets=y[:4] * float("inf")), "test.targets holds 4 non-finite values"),
        (
            broken(inputs=x[..., :7]),
            "train.inputs has shape (8, 1, 7); expected (S, …, 8) ending in the grid",
        ),
        (
            broken("val", targets=data.val.targets[:, None]),
            "val has per-sample inputs (1, 8) torch.float32, targets (1,) torch.float32; train has",
        ),
    ]
    for bad, message in cases:
        with pytest.raises(ValueError, match="track 'tiny' \\(plugin 'p'\\) on grid 8") as error:
            validate_data(track, bad, grid)
        assert message in str(error.value), (message, str(error.value))
    assert data.check(grid) is data
    with pytest.raises(
        ValueError, match=r"^train.inputs has shape \(8, 1, 8\); expected \(S, …, 4\)"
    ):
        data.check(Grid((4,)))


def test_check_grid_rejects_other_dimensionalities_and_unsupported_grids(clean_env):
    registry = load_registry(refresh=True)
    assert registry.track("image").check_grid("16x8").shape == (16, 8)
    with pytest.raises(
        ValueError, match=r"track 'image' takes 2-d grids \(e.g. 32x32\); got the 1-d grid 64"
    ):
        registry.track("image").check_grid(64)
    with pytest.raises(
        ValueError, match="track 'video' cannot use grid 2x8x8: needs at least 3 frames"
    ):
        registry.track("video").check_grid("2x8x8")
    with pytest.raises(ValueError, match="invalid grid"):
        registry.track("sequence").check_grid("64x")
