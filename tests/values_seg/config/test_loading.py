"""Experiment configs fail before any work starts, naming what is wrong and what is valid."""

import pytest

from values_seg.config.checks import ConfigError
from values_seg.config.loading import load_config
from values_seg.config.checks import preflight

BASE = {
    "name": "t",
    "datasets": [{"name": "toy", "params": {"scenario": "2", "size": 32}}],
    "backbones": ["unet"],
    "prediction_models": ["deterministic"],
    "measures": ["predictive_entropy"],
    "aggregations": [{"name": "patch", "params": {"size": 5}}],
    "tasks": ["ood_detection"],
}


def test_valid_config_is_normalised():
    cfg = load_config(base=BASE)
    assert cfg.measures[0].name == "predictive_entropy" and cfg.measures[0].kwargs == {}
    assert cfg.aggregations[0].kwargs["size"] == 5
    assert cfg.seeds == (0,) and cfg.executor == "local"


def test_overrides_set_any_key():
    cfg = load_config(base=BASE, overrides=["seeds=[0,1]", "recipe.epochs=3", "aggregations.0.params.size=7"])
    assert list(cfg.seeds) == [0, 1] and cfg.recipe.epochs == 3 and cfg.aggregations[0].kwargs["size"] == 7


@pytest.mark.parametrize(
    "change, message",
    [
        ({"measures": ["mutual_informaton"]}, r"unknown measure 'mutual_informaton'.*closest match: 'mutual_information'"),
        ({"aggregations": [{"name": "patch", "params": {"sise": 3}}]}, r"unknown parameter 'sise'.*did you mean 'size'"),
        ({"aggregations": [{"name": "patch", "params": {"size": 0}}]}, r"size must be >= 1"),
        ({"datasets": [{"name": "toy", "params": {"scenario": "9"}}]}, r"scenario.*must be one of"),
        ({"tasks": ["od_detection"]}, r"unknown task 'od_detection'.*ood_detection"),
        ({"executor": "slurm"}, r"executor.*local, processes, ray"),
        ({"seeds": []}, r"at least one seed"),
        ({"prediction_models": []}, r"list at least one prediction_model \(available: .*deterministic"),
        ({"measures": ["predictive_entropy", "predictive_entropy"]}, r"duplicate label"),
        ({"epochs": 3}, r"epochs"),  # not a top-level key
        ({"recipe": {"optimizer": "adamw"}}, r"recipe"),
        ({"recipe": {"lr_shedule": "poly"}}, r"recipe.lr_shedule: unknown key; valid keys: preset, optimizer.*did you mean 'lr_schedule'"),
        ({"rules": {"exclud": []}}, r"rules.exclud: unknown key.*did you mean 'exclude'"),
        ({"measures": [{"name": "predictive_entropy", "parms": {}}]}, r"measures.0.parms: unknown key.*'params'"),
        ({"plugins": ["no_such_plugin_module"]}, r"cannot import plugin module"),
        ({"statistics": {"n_resamples": 1}}, r"statistics.n_resamples must be 0 \(no intervals\) or in \[2, 100000\]"),
        # typed right but absurd: refused by name instead of running until killed
        ({"seeds": [0, 0]}, r"seeds: seed\(s\) \[0\] given more than once"),
        ({"seeds": [0, 1, 1, 2]}, r"seeds: seed\(s\) \[1\] given more than once"),
        ({"seeds": [-1]}, r"seeds: each seed must lie in \[0, 2147483647\], got -1"),
        ({"recipe": {"epochs": 99999999999999999999999}}, r"recipe: epochs must be in \[1, 100000\]"),
        ({"recipe": {"steps_per_epoch": 10**9}}, r"recipe: steps_per_epoch must be in \[1, 100000\]"),
        ({"prediction_models": [{"name": "ensemble", "params": {"members": 10**11}}]},
         r"prediction_models: prediction_model 'ensemble': parameter 'members' must lie in \[1, 100\], got 100000000000"),
        ({"prediction_models": [{"name": "test_time_dropout", "params": {"num_samples": 10**6}}]},
         r"parameter 'num_samples' must lie in \[1, 1000\]"),
        ({"datasets": [{"name": "toy", "params": {"scenario": "2", "size": 10**12}}]},
         r"dataset 'toy': parameter 'size' must lie in \[-2147483647, 2147483647\]"),
        ({"statistics": {"n_resamples": 10**10}}, r"statistics.n_resamples must be 0 \(no intervals\) or in \[2, 100000\]"),
        ({"workers": 10**7}, r"workers: must lie in \[1, 1024\]"),
        ({"statistics": {"level": 95}}, r"statistics.level must lie in \(0, 1\)"),
        ({"statistics": {"resamples": 10}}, r"statistics.resamples: unknown key.*did you mean 'n_resamples'"),
        ({"evaluation": {"ndsc_r": 0}}, r"evaluation.ndsc_r must lie in \(0, 1\)"),
        ({"evaluation": {"lesion_iou_rule": "geq"}}, r"evaluation.lesion_iou_rule must be one of above, at_least"),
    ],
)
def test_invalid_configs_fail_early(change, message):
    with pytest.raises(ConfigError, match=message):
        preflight(load_config(base={**BASE, **change}))


def test_a_task_consuming_an_unknown_quantity_fails_early():
    import types

    from values_seg import hookimpl, registry
    from values_seg.components.task import Task

    class NeedsAQuantity(Task):
        """A task that reads a per-case quantity nobody registered."""

        name = "needs_a_quantity"
        consumes = ("dice", "second_opinion")

    plugin = types.SimpleNamespace(values_seg_tasks=hookimpl(lambda: [NeedsAQuantity]), __name__="test_quantity_plugin")
    registry.register(plugin, source="test_quantity_plugin")
    with pytest.raises(ConfigError, match=r"task 'needs_a_quantity' consumes unknown quantity 'second_opinion'; "
                                          r"known quantities: calibration_bins, conformal_sets, dice, ged, "):
        preflight(load_config(base={**BASE, "tasks": ["needs_a_quantity"]}))


def test_every_recipe_field_can_be_set_from_yaml():
    cfg = load_config(base={**BASE, "recipe": {"preset": "hrnet", "loss": "dice_ce", "flip_axes": [0], "flip_prob": 0.3,
                                                "scale_range": [0.9, 1.1], "lr_schedule": "constant", "noise_prob": 0.2}})
    r = cfg.recipe
    assert (r.optimizer, r.loss, r.flip_axes, r.flip_prob, r.scale_range, r.lr_schedule, r.noise_prob) == (
        "sgd", "dice_ce", (0,), 0.3, (0.9, 1.1), "constant", 0.2)


def test_malformed_override_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="key=value"):
        preflight(load_config(base=BASE, overrides=["seeds"]))
    with pytest.raises(ConfigError, match="not found"):
        preflight(load_config(tmp_path / "nope.yaml"))


def test_shipped_experiments_are_valid(tmp_path):
    """Every shipped experiment loads, its data sets built on small data in their real layout."""
    from pathlib import Path

    from values_seg.cli import main
    from values_seg_plugins.datasets._gta_cityscapes.prepare import prepare
    from values_seg_plugins.datasets._gta_cityscapes.synthetic import write_small_trees
    from values_seg_plugins.datasets._lidc.synthetic import write_synthetic
    from values_seg_plugins.datasets._nnunet_raw.testing import write_raw_dataset

    write_synthetic(tmp_path / "lidc", patients=24, ood_patients=6, seed=0)
    assert main(["data", "lidc", "splits", "--root", str(tmp_path / "lidc")]) == 0
    write_raw_dataset(tmp_path / "Dataset001_Own", dims=2)
    prepare(*write_small_trees(tmp_path / "gta_sources", gta5_frames=7, cityscapes_val=1), tmp_path / "gta",
            progress=False)
    local_data = {"lidc": f"datasets.0.params.root={tmp_path / 'lidc'}",
                  "gta_cityscapes": f"datasets.0.params.root={tmp_path / 'gta'}",
                  "own_data": f"datasets.0.params.folder={tmp_path / 'Dataset001_Own'}"}
    root = Path(__file__).resolve().parents[3] / "experiments"
    configs = sorted(root.glob("*.yaml"))
    assert configs
    for path in configs:
        overrides = [v for k, v in local_data.items() if path.name.startswith(k)]
        load_config(path, overrides)


def test_backbones_are_validated_on_meta_without_random_fills():
    """Meta tensors hold no values: their random fills are skipped (so the validation does not pay
    for torch's Python decompositions); a real tensor is still filled, and shape errors still raise."""
    import torch

    from values_seg.config.checks import _no_random_fills

    with torch.device("meta"), _no_random_fills():
        conv = torch.nn.Conv2d(1, 4, 3)
        torch.nn.init.kaiming_normal_(conv.weight)
        assert conv.weight.is_meta and conv.weight.shape == (4, 1, 3, 3)
        with pytest.raises(RuntimeError):
            conv(torch.zeros(1, 2, 8, 8))  # two channels into a one-channel convolution
    with _no_random_fills():
        real = torch.zeros(1000).normal_()
    assert real.std() > 0.5


@pytest.mark.parametrize("change, key", [
    ({"description": "token ${oc.env:VALUES_SEG_TEST_SECRET}"}, "description"),
    ({"measures": [{"name": "predictive_entropy", "label": "${oc.env:VALUES_SEG_TEST_SECRET}"}]}, "measures.0.label"),
    ({"aggregations": [{"name": "patch", "params": {"size": "${ oc.env:VALUES_SEG_TEST_SECRET,5}"}}]},
     "aggregations.0.params.size"),
])
def test_environment_values_are_refused_outside_path_keys(monkeypatch, change, key):
    """Issue 32, item 2: ``${oc.env:SECRET}`` was resolved and written verbatim into config.yaml and
    the reports. Outside the keys that name paths it is refused, naming the key, before any work."""
    monkeypatch.setenv("VALUES_SEG_TEST_SECRET", "5")
    with pytest.raises(ConfigError, match=rf"config {key}: .*reads an environment variable.*cache_dir"):
        load_config(base={**BASE, **change})
    with pytest.raises(ConfigError, match=r"config description: .*environment variable"):
        load_config(base=BASE, overrides=["description=${oc.env:VALUES_SEG_TEST_SECRET}"])


def test_environment_values_name_paths(monkeypatch, tmp_path):
    """Where a key names a path (a data set root, a folder, cache_dir) the environment may supply it,
    as the shipped GTA5/Cityscapes configs do."""
    from values_seg.config.loading import to_yaml

    monkeypatch.setenv("VALUES_SEG_TEST_DIR", str(tmp_path))
    cfg = load_config(base={**BASE, "cache_dir": "${oc.env:VALUES_SEG_TEST_DIR}/cache"})
    assert cfg.cache_dir == f"{tmp_path}/cache" and f"{tmp_path}/cache" in to_yaml(cfg)
    from values_seg.config.checks import check_environment_values

    check_environment_values({"datasets": [{"name": "lidc", "params": {"root": "${oc.env:X,data/lidc}"}}],
                              "prediction_models": [{"name": "nnunet", "params": {"model_folder": "${oc.env:M}"}}]})


@pytest.mark.parametrize("change, message", [
    ({"datasets": [{"name": "toy", "label": "d" * 300, "params": {"scenario": "2", "size": 32}}]},
     r"config datasets.0.label: 'd{20}'... has 300 characters; labels name the run's files: at most 64"),
    ({"measures": ["predictive_entropy", {"name": "mutual_information", "label": "m" * 65}]},
     r"config measures.1.label: .* has 65 characters"),
    ({"statistics": {"seed": -5}}, r"config statistics.seed: must lie in \[0, 2147483647\], got -5"),
    ({"statistics": {"seed": 2**31}}, r"config statistics.seed: must lie in \[0, 2147483647\]"),
])
def test_labels_and_the_statistics_seed_fail_before_training(change, message):
    """Issue 32, item 11: a 300-character label ("File name too long" writing montages/) and
    statistics.seed=-5 (every bootstrap failed) passed validation and failed after training
    without naming the key."""
    with pytest.raises(ConfigError, match=message):
        load_config(base={**BASE, **change})
    load_config(base={**BASE, "measures": [{"name": "predictive_entropy", "label": "m" * 64}],
                      "statistics": {"seed": 2**31 - 1}})


def test_the_configs_of_the_quick_training_say_it_is_under_trained():
    """The quick toy studies train 15 epochs at lr 3e-3, and their learning curves flag every training
    as possibly under-trained: no config claims that the training converges, and each says what is true."""
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[3] / "experiments"
    quick = []
    for path in sorted(root.glob("*.yaml")):
        text = path.read_text()
        assert "converge" not in text.lower(), path.name
        recipe = (yaml.safe_load(text) or {}).get("recipe") or {}
        if recipe.get("epochs") == 15 and float(recipe.get("lr", 0)) == 3e-3:
            quick.append(path.name)
            assert "under-trained by design" in text and "learning curves flag it" in text, path.name
    assert {"toy_quick.yaml", "aggregations_quick.yaml", "toy_conformal_quick.yaml", "toy_lesions_quick.yaml"} <= set(quick)


def test_the_conformal_study_takes_its_levels_from_the_rule_it_states():
    """alpha: the smallest level of the task's grid at which the finite-sample correction (1 - alpha) / n
    takes at most half of alpha; max_risk: twice the Hoeffding slack at n / 2 accepted cases, to a tenth."""
    import math
    from pathlib import Path

    import yaml

    from values_seg import registry

    path = Path(__file__).resolve().parents[3] / "experiments" / "toy_conformal_quick.yaml"
    text = path.read_text()
    cfg = yaml.safe_load(text)
    (n,) = {d["params"]["val_cases"] for d in cfg["datasets"]}
    params = next(t["params"] for t in cfg["tasks"] if isinstance(t, dict) and t["name"] == "conformal")
    grid = registry.create("task", "conformal").alphas
    assert params["alpha"] == min(a for a in grid if (1 - a) / (n * a) <= 0.5) == 0.05
    slack = math.sqrt(math.log(1 / params["delta"]) / (2 * (n // 2)))
    assert params["max_risk"] == round(2 * slack, 1) == 0.4
    assert "rule" in text and "not from any result" in text
