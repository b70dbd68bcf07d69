"""Sweep expansion and the compatibility rules."""

import pytest

from values_seg.config.checks import ConfigError
from values_seg.config.loading import load_config
from values_seg.config.sweep import describe_gap, expand, family_gaps, unique_training_specs

BASE = {
    "datasets": [{"name": "toy", "label": "a", "params": {"scenario": "2", "size": 32}},
                 {"name": "toy", "label": "b", "params": {"scenario": "1", "size": 32}}],
    "backbones": ["unet"],
    "prediction_models": ["deterministic", {"name": "ensemble", "params": {"members": 5}}, "test_time_augmentation",
                          "test_time_dropout", "ssn"],
    "measures": ["predictive_entropy", "expected_entropy", "mutual_information", "max_softmax"],
    "aggregations": ["patch", "threshold"],
    "tasks": ["ood_detection"],
}


def test_measures_follow_the_uncertainty_type_table():
    combos = {(c.scenario, c.model.label): c for c in expand(load_config(base=BASE))}
    det = combos[("a", "deterministic")].measure_types()
    assert det == {"predictive_entropy": "PU", "max_softmax": "PU"}
    assert combos[("a", "ensemble")].measure_types() == {
        "predictive_entropy": "PU", "expected_entropy": "AU", "mutual_information": "EU"}
    assert combos[("a", "ssn")].measure_types()["mutual_information"] == "AU"
    assert combos[("a", "ssn")].measure_types()["expected_entropy"] == "EU"


def test_ensemble_and_tta_reuse_deterministic_trainings():
    cfg = load_config(base={**BASE, "prediction_models": ["deterministic", "ensemble", "test_time_augmentation"]})
    combos = expand(cfg)
    assert len(combos) == 6  # 2 datasets x 3 models
    # per dataset: 5 ensemble members, the first of which is the deterministic (and TTA) training
    assert len(unique_training_specs(combos)) == 2 * 5


def test_each_seed_has_its_own_ensemble_members():
    cfg = load_config(base={**BASE, "seeds": [0, 1, 2],
                            "prediction_models": ["deterministic", "ensemble", "test_time_augmentation"]})
    combos = [c for c in expand(cfg) if c.scenario == "a"]
    members = {c.seed: {s.key() for s in c.specs} for c in combos if c.model.label == "ensemble"}
    assert all(len(keys) == 5 for keys in members.values())
    for s, t in [(0, 1), (0, 2), (1, 2)]:
        assert not members[s] & members[t], f"the ensembles of seeds {s} and {t} share members"
    ens = {c.seed: c.specs for c in combos if c.model.label == "ensemble"}
    assert [sp.seed for sp in ens[1]] == [5, 6, 7, 8, 9]
    det = {c.seed: c.specs[0].key() for c in combos if c.model.label == "deterministic"}
    assert det[0] in members[0]  # seed 0: the deterministic training is ensemble member 0
    # dedup: 15 member trainings per data set; deterministic and TTA seeds 0-2 are members 0-2 of seed 0
    assert len(unique_training_specs(combos)) == 15


def test_exclude_rules_and_seeds():
    cfg = load_config(base={**BASE, "seeds": [0, 1], "rules": {"exclude": [
        {"scenario": "b", "aggregation": "threshold"}, {"prediction_model": "ssn"}]}})
    combos = expand(cfg)
    assert {c.model.label for c in combos} == {"deterministic", "ensemble", "test_time_augmentation", "test_time_dropout"}
    assert len(combos) == 2 * 4 * 2
    for c in combos:
        labels = [a.label for a in c.aggregations]
        assert labels == (["patch"] if c.scenario == "b" else ["patch", "threshold"])


def test_measure_type_rule_can_be_switched_off():
    cfg = load_config(base={**BASE, "rules": {"measure_needs_type": False}})
    det = next(c for c in expand(cfg) if c.model.label == "deterministic")
    assert set(det.measure_types()) == set(BASE["measures"])
    assert det.measure_types()["expected_entropy"] is None  # no type for a deterministic model


def test_family_gaps_name_the_models_a_measure_has_no_rows_for():
    cfg = load_config(base=BASE)
    gaps = family_gaps(cfg)
    combos = expand(cfg)
    for measure in BASE["measures"]:  # exactly the models whose combinations leave the measure out
        without = {c.model.label: c.family for c in combos if c.scenario == "a" and measure not in c.measure_types()}
        assert gaps.get(measure, {}) == without
    assert gaps["max_softmax"] == {"ensemble": "bayesian", "test_time_augmentation": "augmentation",
                                   "test_time_dropout": "bayesian", "ssn": "variability"}
    assert "predictive_entropy" not in gaps
    line = describe_gap("max_softmax", gaps["max_softmax"])
    assert "'max_softmax' produces no rows under ensemble (bayesian), test_time_augmentation" in line
    assert "rules.measure_needs_type: false" in line
    assert family_gaps(load_config(base={**BASE, "rules": {"measure_needs_type": False}})) == {}


def test_a_model_trained_elsewhere_needs_no_backbone(tmp_path):
    from values_seg_plugins._nnunet.testing import make_model_folder

    folder = make_model_folder(tmp_path / "model")
    base = {"datasets": ["toy"], "prediction_models": [{"name": "nnunet", "params": {"model_folder": str(folder)}}],
            "measures": ["mutual_information"], "tasks": ["segmentation"]}
    (combo,) = expand(load_config(base={**base, "backbones": []}))
    assert combo.backbone is None and combo.specs == () and combo.context["backbone"] == ""
    mixed = expand(load_config(base={**base, "backbones": ["unet"], "prediction_models": base["prediction_models"]
                                     + ["deterministic"]}))
    assert [(c.model.name, c.backbone and c.backbone.name) for c in mixed] == [("deterministic", "unet"), ("nnunet", None)]
    with pytest.raises(ConfigError, match="backbones: list at least one backbone"):
        load_config(base={**base, "backbones": [], "prediction_models": ["deterministic"]})


SCENE_TOY = '''
from values_seg import hookimpl
from values_seg_plugins.datasets.toy import ToyDataset


class SceneToy(ToyDataset):
    """Toy data whose every class is an object class (no background), as in scene parsing."""

    name = "scene_toy"
    background = None


@hookimpl
def values_seg_datasets():
    return [SceneToy]
'''


def test_an_aggregation_that_needs_a_background_runs_only_where_there_is_one(tmp_path, monkeypatch):
    """Declared by the aggregation (threshold) and the dataset (its background), no dataset named in the config."""
    from values_seg import registry
    from values_seg.config.loading import RulesConfig

    (tmp_path / "scene_toy_plugin.py").write_text(SCENE_TOY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_default", registry.Registry(entry_points=False))
    base = {**BASE, "plugins": ["scene_toy_plugin"], "prediction_models": ["deterministic"],
            "datasets": [BASE["datasets"][0], {"name": "scene_toy", "label": "s", "params": {"size": 32}}]}
    aggregations = {c.scenario: [a.label for a in c.aggregations] for c in expand(load_config(base=base))}
    assert aggregations == {"a": ["patch", "threshold"], "s": ["patch"]}
    off = load_config(base={**base, "rules": {"aggregation_needs_background": False}})
    assert {c.scenario: [a.label for a in c.aggregations] for c in expand(off)}["s"] == ["patch", "threshold"]
    assert RulesConfig().exclude == []  # the config's defaults name no dataset and no aggregation
    assert registry.get("dataset", "gta_cityscapes").obj.background is None


@pytest.mark.parametrize("task, quantity", [("ambiguity", "ncc"), ("calibration", "calibration_bins")])
def test_a_model_without_measures_is_left_out_where_a_task_needs_a_per_measure_quantity(task, quantity):
    """Issue 32 item 10: the deterministic model with only mutual information and a task that needs
    a per-measure quantity is left out with one line naming it, before any work."""
    from values_seg.components.quantity import resolve
    from values_seg.config.sweep import without_measures

    cfg = load_config(base={**BASE, "measures": ["mutual_information"], "tasks": [task],
                            "prediction_models": ["deterministic", "ensemble"]})
    combos = expand(cfg)
    kept, lines = without_measures(combos, resolve([quantity, "dice"]))
    assert {c.model.label for c in kept} == {"ensemble"} and len(kept) == 2
    assert len(lines) == 1 and "'deterministic'" in lines[0] and quantity in lines[0]
    assert without_measures(combos, resolve(["dice"])) == (combos, [])  # per-case quantities need no measure
