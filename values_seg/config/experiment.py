"""One typed experiment: what :func:`values_seg.config.loading.load_config` returns.

Built once from the validated config, frozen, every reference resolved and every section typed; the
sections here are the one place of their fields and defaults, from which the YAML schema is derived
(docs/design-rationale.md, "The typed experiment").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from omegaconf import DictConfig

from values_seg.engine.specs import Recipe
from values_seg.registry import ComponentRef
from values_seg.components.settings import EvaluationSettings


@dataclass(frozen=True)
class Rules:
    """Which combinations the sweep runs (section 4.2 of the paper, made explicit).

    ``measure_needs_type``: a measure runs with a prediction model only where it declares an
    uncertainty type for the model's family (the type table of docs/concepts.md; e.g. max_softmax only for
    deterministic models). ``exclude``: mappings of field -> value; a (dataset, scenario,
    prediction_model, measure, aggregation, task) combination matching every field of one
    mapping is skipped. ``task_types``: tasks run only with the uncertainty types they declare
    suitable (e.g. active learning queries with PU and EU measures only).
    ``aggregation_needs_background``: an aggregation that declares ``needs_background`` runs only
    on datasets with a background class (e.g. threshold aggregation not on GTA5/Cityscapes).
    """

    measure_needs_type: bool = True
    task_types: bool = True
    aggregation_needs_background: bool = True
    exclude: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class ActiveLearning:
    """Second-cycle protocol (appendix A.4): query this share of the unlabeled pool."""

    query_fraction: float = 0.5
    pool_split: str = "pool"


@dataclass(frozen=True)
class Statistics:
    """Bootstrap confidence intervals of every task metric (values_seg.statistics).

    ``n_resamples`` resamples of each data set's test cases (stratified by i.i.d./OoD), drawn once
    from the sorted case ids with ``seed`` and shared by every method on that data set (0: no
    bootstrap); ``level``: the central coverage of the percentile intervals (and 1 - level the
    significance level of the paired comparisons).
    """

    n_resamples: int = 1000
    level: float = 0.95
    seed: int = 0


@dataclass(frozen=True)
class RayStage:
    """What each job of one stage asks Ray for (``null``: the default): ``num_cpus`` (default: the
    run's ``threads``), ``num_gpus`` (default: 1 when jobs run on CUDA (device cuda; auto: the
    cluster has GPUs)), ``custom`` Ray resources, e.g. ``{big_memory: 1}``."""

    num_cpus: Optional[float] = None
    num_gpus: Optional[float] = None
    custom: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RayResources:
    """One entry per stage whose jobs go to the executor: ``train``, ``evaluate`` (predicts, then
    evaluates), ``al_train`` (active learning's second training cycle), ``al_predict`` (its
    predictions on the OoD test cases)."""

    train: RayStage = field(default_factory=RayStage)
    evaluate: RayStage = field(default_factory=RayStage)
    al_train: RayStage = field(default_factory=RayStage)
    al_predict: RayStage = field(default_factory=RayStage)


@dataclass(frozen=True)
class Ray:
    """The Ray executor (``executor: ray``); see docs/guides/ray.md. ``address``: a running cluster
    (default: $RAY_ADDRESS, else a local Ray instance); ``max_retries``: re-runs of a job whose
    worker process or node died (a job that raises is not re-run); ``runtime_env``: Ray's
    runtime_env for every job, e.g. ``{env_vars: {...}}``."""

    address: Optional[str] = None
    max_retries: int = 3
    runtime_env: dict[str, Any] = field(default_factory=dict)
    resources: RayResources = field(default_factory=RayResources)


@dataclass(frozen=True)
class LearningCurves:
    """Each training's validation Dice during training (its loss per epoch is always recorded);
    it never changes the weights (:class:`values_seg.engine.curves.CurveSettings`, built from this).
    ``dice_every``: epochs between two validation-Dice points (0: off); ``dice_cases``: cases of
    ``dice_split``, evenly spread over its sorted ids."""

    dice_every: int = 5
    dice_cases: int = 4
    dice_split: str = "val"


@dataclass(frozen=True, eq=False)
class Experiment:
    """A validated experiment (see the module docstring); compared by identity. The six component
    lists (``datasets`` … ``tasks``) hold their references in config order."""

    config: DictConfig  # the resolved config, read-only: what config.yaml records
    name: str
    description: str
    seeds: tuple[int, ...]
    device: str
    executor: str
    workers: int
    threads: int
    loader_workers: int | None
    fuse_training: bool
    cache_dir: str | None
    plugins: tuple[str, ...]
    datasets: tuple[ComponentRef, ...]
    backbones: tuple[ComponentRef, ...]
    prediction_models: tuple[ComponentRef, ...]
    measures: tuple[ComponentRef, ...]
    aggregations: tuple[ComponentRef, ...]
    tasks: tuple[ComponentRef, ...]
    recipe: Recipe
    rules: Rules
    active_learning: ActiveLearning
    evaluation: EvaluationSettings
    statistics: Statistics
    ray: Ray
    learning_curves: LearningCurves
    tracking: Mapping[str, Mapping[str, Any]]  # tracker name -> its parameters (values_seg.runner.tracking)

    def refs(self, key: str) -> list[ComponentRef]:
        """The component references of one list of the config (e.g. ``"measures"``), in order."""
        if key not in COMPONENT_LISTS:
            raise KeyError(f"{key!r} is not a component list; valid: {', '.join(COMPONENT_LISTS)}")
        return list(getattr(self, key))


COMPONENT_LISTS = {
    "datasets": "dataset",
    "backbones": "backbone",
    "prediction_models": "prediction_model",
    "measures": "measure",
    "aggregations": "aggregation",
    "tasks": "task",
}
