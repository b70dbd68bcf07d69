"""The evaluation stage's key follows from its declared inputs: every field of
:class:`EvaluationInputs`, each setting, and the labels that name its outputs."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from values_seg.config.loading import load_config
from values_seg.evaluation.combination import evaluation_folder, evaluation_key, run_evaluation
from values_seg.evaluation.inputs import EvaluationInputs
from values_seg.components.settings import EvaluationSettings
from values_seg.config.sweep import expand

BASE = {"name": "k", "datasets": [{"name": "toy", "params": {"scenario": "1", "dims": 2, "size": 32,
                                                               "train_cases": 4, "val_cases": 2}}],
        "backbones": [{"name": "unet", "params": {"base_width": 4}}],
        "prediction_models": ["deterministic"], "measures": ["predictive_entropy"],
        "aggregations": ["image"], "tasks": ["segmentation"]}


def combination(**change):
    return expand(load_config(base={**BASE, **change}))[0]


@pytest.fixture(scope="module")
def inputs():
    return EvaluationInputs.of(combination(), {}, ["dice"])


def test_each_setting_changes_the_key(inputs):
    other = {"n_bins": 10, "montage_cases": 1, "prediction_dtype": "float32", "ndsc_r": 0.01, "threads": 2,
             "lesion_connectivity": "vertex", "lesion_iou": 0.25, "lesion_iou_rule": "at_least"}
    assert set(other) == {f.name for f in dataclasses.fields(EvaluationSettings)}  # a new setting: add it here
    keys = {inputs.key()} | {dataclasses.replace(inputs, settings=dataclasses.replace(inputs.settings, **{k: v})).key()
                              for k, v in other.items()}
    assert len(keys) == 1 + len(other)


def test_each_field_changes_the_key(inputs):
    changed = {"combination": combination(seeds=[1]), "settings": EvaluationSettings(n_bins=5),
               "quantities": ("dice", "ged"), "splits": ("pool",)}
    assert set(changed) == {f.name for f in dataclasses.fields(EvaluationInputs)}  # a new field: add it here
    for name, value in changed.items():
        assert dataclasses.replace(inputs, **{name: value}).key() != inputs.key(), name


def test_the_labels_that_name_the_outputs_change_the_key(inputs):
    """The montage and the manifest name the scenario and the prediction model: a renamed one is a
    new evaluation (the hand-built key of before left both labels out, and reused the old files)."""
    renamed_model = combination(prediction_models=[{"name": "deterministic", "label": "det"}])
    renamed_scenario = combination(datasets=[{**BASE["datasets"][0], "label": "toy_one"}])
    for combo in (renamed_model, renamed_scenario):
        assert EvaluationInputs.of(combo, {}, ["dice"]).key() != inputs.key()


def test_the_folder_and_the_key_are_those_of_the_inputs(inputs, tmp_path):
    combo = inputs.combination
    assert evaluation_key(combo, {}, ["dice", "dice"]) == inputs.key()  # order and repeats do not matter
    assert evaluation_folder(combo, tmp_path, EvaluationSettings(), ["dice"]) == inputs.path(tmp_path)
    with pytest.raises(ValueError, match="unknown key.*n_binz"):
        evaluation_key(combo, {"n_binz": 3}, ["dice"])


def test_the_stage_takes_its_inputs_and_the_run_context_only():
    """Whatever ``run_evaluation`` is given besides its declared inputs is where and how it runs."""
    fields = {f.name for f in dataclasses.fields(EvaluationInputs)} - {"combination"}
    params = set(inspect.signature(run_evaluation).parameters) - {"combo"}
    assert params - fields == {"cache_dir", "device", "progress"}
