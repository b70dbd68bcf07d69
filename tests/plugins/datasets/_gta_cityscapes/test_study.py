"""The GTA5 -> Cityscapes experiment configs: the paper's settings, and the reduced study end to end."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from values_seg.config.loading import load_config
from values_seg.config.sweep import expand, unique_training_specs

EXPERIMENTS = Path(__file__).resolve().parents[4] / "experiments"
TASKS = {"segmentation", "ood_detection", "failure_detection", "calibration", "ambiguity", "active_learning",
         "separation"}


def by_model(combos):
    return {c.model.label: c for c in combos}


def test_the_gpu_config_has_the_papers_settings(monkeypatch, prepared):
    root = prepared[0]
    monkeypatch.setenv("GTA_CITYSCAPES_ROOT", str(root))
    cfg = load_config(EXPERIMENTS / "gta_cityscapes.yaml")
    assert list(cfg.seeds) == [0, 1, 2] and cfg.datasets[0].kwargs["root"] == str(root)
    assert {t.name for t in cfg.tasks} == TASKS
    assert [a.name for a in cfg.aggregations] == ["image", "patch"] and cfg.aggregations[1].kwargs["size"] == 10
    combos = expand(cfg)
    assert len(combos) == 5 * 3
    models = by_model(c for c in combos if c.seed == 0)
    det = models["deterministic"].specs[0]
    r = det.recipe
    assert (det.backbone.name, det.backbone.kwargs["variant"]) == ("hrnet", "hrnet_w48")
    assert (r.optimizer, r.lr, r.weight_decay, r.momentum, r.batch_size, r.epochs, r.loss) == \
        ("sgd", 0.01, 5e-4, 0.9, 6, 150, "ce")
    assert r.flip_axes == (-1,) and r.rotation_deg > 0 and r.scale_range is not None and r.noise_std > 0
    ssn = models["ssn"].specs[0]
    assert (ssn.recipe.optimizer, ssn.recipe.lr, ssn.recipe.weight_decay, ssn.recipe.momentum) == \
        ("rmsprop", 1e-4, 5e-4, 0.6)
    assert ssn.head.rank == 10 and ssn.head.pretrain_epochs == 5
    assert models["test_time_dropout"].specs[0].dropout == 0.5
    assert len(models["ensemble"].specs) == 5
    tta = models["test_time_augmentation"].model.create()
    assert tta.augmentations(2) == [((), False), ((), True), ((1,), False), ((1,), True)]  # flip x noise
    # plain trainings of seeds 0..14 (ensembles 5s..5s+4; deterministic and TTA use seed s), TTD and SSN per seed
    assert len(unique_training_specs(combos)) == 15 + 3 + 3


def test_the_quick_config_is_the_same_study_reduced(monkeypatch, prepared):
    monkeypatch.setenv("GTA_CITYSCAPES_ROOT", str(prepared[0]))
    cfg = load_config(EXPERIMENTS / "gta_cityscapes_quick.yaml")
    assert {t.name for t in cfg.tasks} == TASKS and list(cfg.seeds) == [0]
    assert cfg.datasets[0].kwargs["shrink"] == 4 and cfg.datasets[0].kwargs["max_per_split"] == 24
    models = by_model(expand(cfg))
    assert set(models) == {"deterministic", "test_time_dropout", "ensemble", "test_time_augmentation", "ssn"}
    assert models["ssn"].specs[0].head.rank == 10 and models["ssn"].specs[0].recipe.optimizer == "rmsprop"


@pytest.mark.parametrize("name", ["gta_cityscapes.yaml", "gta_cityscapes_quick.yaml"])
def test_root_defaults_to_data_gta_cityscapes(monkeypatch, name, prepared):
    from values_seg.config.checks import ConfigError
    from values_seg.config.checks import preflight

    monkeypatch.delenv("GTA_CITYSCAPES_ROOT", raising=False)
    with pytest.raises(ConfigError, match="data/gta_cityscapes: no such folder; prepare it with: values-seg data"):
        preflight(load_config(EXPERIMENTS / name))  # checked before any work
    root = str(prepared[0])
    assert load_config(EXPERIMENTS / name, [f"datasets.0.params.root={root}"]).datasets[0].kwargs["root"] == root


@pytest.mark.slow
def test_the_reduced_study_runs_end_to_end(prepared, tmp_path, one_torch_thread):
    """The quick config on the synthetic prepared data, shrunk 8x (32 x 59) and 2 epochs: every
    task, i.i.d. (GTA5) and OoD (Cityscapes) rows, 24-class NCC and GED."""
    from values_seg.runner import run_experiment

    overrides = [f"datasets.0.params.root={prepared[0]}", "datasets.0.params.shrink=8", "recipe.epochs=2",
                 "prediction_models.2.params.members=2", "prediction_models.4.params.pretrain_epochs=1",
                 "prediction_models.4.params.mc_samples=4", "aggregations=[image]", "executor=local"]
    cfg = load_config(EXPERIMENTS / "gta_cityscapes_quick.yaml", overrides)
    summary = run_experiment(cfg, tmp_path / "run", progress=False)
    assert summary.ok, summary.describe()
    results = pd.read_csv(tmp_path / "run" / "results.csv")
    assert set(results["task"]) == TASKS
    ambiguity = results[results["task"] == "ambiguity"]
    for model in ("deterministic", "test_time_dropout", "ensemble", "test_time_augmentation", "ssn"):
        rows = ambiguity[ambiguity["prediction_model"] == model]
        for metric in ("ncc", "ged"):
            assert set(rows.loc[rows["metric"] == metric, "split"]) == {"iid", "ood"}, (model, metric)
    assert np.isfinite(ambiguity["value"]).all()
    assert (ambiguity.loc[ambiguity["metric"] == "ged", "value"] > 0).all()
    assert (ambiguity.loc[ambiguity["metric"] == "ncc", "value"].abs() <= 1).all()
    cases = pd.read_csv(tmp_path / "run" / "cases.csv")
    test = cases[cases["split"] == "test"]
    assert set(test.loc[~test["ood"], "source"]) == {"gta5"} and set(test.loc[test["ood"], "source"]) == {"cityscapes"}
    assert (tmp_path / "run" / "report.md").exists()
