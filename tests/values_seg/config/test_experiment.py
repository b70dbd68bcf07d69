"""One typed experiment: load_config returns a frozen Experiment with every component reference
resolved once and every default in one place; the checks that build objects are the runner's
pre-flight step, before anything is written."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
from omegaconf.errors import ReadonlyConfigError

from values_seg.config.checks import ConfigError
from values_seg.config.checks import recipe
from values_seg.config.loading import EvaluationConfig, load_config, to_yaml
from values_seg.config.experiment import Experiment
from values_seg.components.run_context import RunContext
from values_seg.runner import run_experiment
from values_seg.config.checks import preflight
from values_seg.components.settings import EvaluationSettings

BASE = {
    "name": "t",
    "datasets": [{"name": "toy", "params": {"scenario": "2", "dims": 2, "size": 32}}],
    "backbones": ["unet"],
    "prediction_models": ["deterministic"],
    "measures": ["predictive_entropy", {"name": "predictive_entropy", "label": "pe2"}],
    "aggregations": [{"name": "patch", "params": {"size": 5}}],
    "tasks": ["ood_detection"],
    "threads": 2,
}


@pytest.fixture(scope="module")
def experiment():
    return load_config(base=BASE, overrides=["evaluation.n_bins=10"])


def test_a_frozen_typed_experiment(experiment):
    assert isinstance(experiment, Experiment)
    assert experiment.seeds == (0,) and experiment.threads == 2 and experiment.plugins == ()
    assert experiment.evaluation == EvaluationSettings(n_bins=10, threads=2)
    assert experiment.recipe == recipe(experiment.config) and experiment.recipe.precision == "fp32"
    with pytest.raises(dataclasses.FrozenInstanceError):
        experiment.threads = 3
    with pytest.raises(ReadonlyConfigError):
        experiment.config.threads = 3


def test_references_are_resolved_once(experiment):
    measures = experiment.refs("measures")
    assert [m.label for m in measures] == ["predictive_entropy", "pe2"]
    assert all(a is b for a, b in zip(measures, experiment.measures))  # the same objects, not rebuilt
    assert experiment.refs("aggregations")[0].kwargs == {"size": 5}


def test_every_evaluation_default_in_one_place():
    """The YAML schema's defaults are the settings' defaults (one place); a key left out is the default."""
    schema = {f.name: f.default for f in dataclasses.fields(EvaluationConfig)}
    settings = {f.name: f.default for f in dataclasses.fields(EvaluationSettings)}
    assert schema == {k: v for k, v in settings.items() if k != "threads"}
    assert load_config(base=BASE).evaluation == EvaluationSettings(threads=2)
    assert EvaluationSettings.of({"n_bins": None}).n_bins == 20
    assert dict(EvaluationSettings()) == EvaluationSettings().to_dict()  # a read-only mapping too
    with pytest.raises(ValueError, match="unknown key.*nbins.*valid keys: n_bins"):
        EvaluationSettings.of({"nbins": 3})


def test_the_typed_fields_read_as_the_config_did(experiment):
    assert experiment.name == "t" and experiment.rules.exclude == [] and experiment.tasks[0].name == "ood_detection"
    assert "n_bins: 10" in to_yaml(experiment)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        experiment.nope


def test_no_fall_through_to_the_raw_config(experiment):
    """Every section is a typed, frozen value; nothing reads through to the DictConfig (issue 38)."""
    from omegaconf import DictConfig

    from values_seg.config.experiment import ActiveLearning, LearningCurves, Ray, RayStage, Rules, Statistics

    sections = {"rules": Rules, "active_learning": ActiveLearning, "statistics": Statistics, "ray": Ray,
                "learning_curves": LearningCurves}
    assert all(type(getattr(experiment, key)) is kind for key, kind in sections.items())
    assert type(experiment.ray.resources.train) is RayStage and experiment.description == ""
    fields = [getattr(experiment, f.name) for f in dataclasses.fields(experiment) if f.name != "config"]
    assert not any(isinstance(v, DictConfig) for v in fields)
    with pytest.raises(TypeError):
        experiment["tasks"]  # noqa: B018
    with pytest.raises(dataclasses.FrozenInstanceError):
        experiment.rules.task_types = False
    with pytest.raises(KeyError, match="valid: datasets"):
        experiment.refs("rules")


def test_the_yaml_schema_is_derived_from_the_typed_sections():
    """One place for every default: the omegaconf schema of each section is built from its typed value."""
    from values_seg.config.loading import ActiveLearningConfig, RayConfig, RulesConfig, StatisticsConfig
    from values_seg.config.experiment import ActiveLearning, Ray, Rules, Statistics

    for schema, typed in [(RulesConfig, Rules), (ActiveLearningConfig, ActiveLearning), (StatisticsConfig, Statistics),
                          (RayConfig, Ray)]:
        assert dataclasses.asdict(schema()) == dataclasses.asdict(typed())


def test_objects_are_built_by_the_pre_flight_step_before_anything_is_written(tmp_path):
    bad = load_config(base={**BASE, "aggregations": [{"name": "patch", "params": {"size": 0}}]})  # loads
    with pytest.raises(ConfigError, match="config aggregations: .*size must be >= 1"):
        preflight(bad)
    with pytest.raises(ConfigError, match="size must be >= 1"):
        run_experiment(bad, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_the_run_context_travels_to_workers(tmp_path):
    context = RunContext(str(tmp_path), "cpu", 2, ("my_plugin",), False, None)
    assert pickle.loads(pickle.dumps(context)) == context and context.cache == tmp_path
