"""Experiment configs: omegaconf YAML, structured, validated before any work starts.

A config names datasets, seeds and lists of components; a component entry is a name or a
mapping ``{name, params, label}`` (``label`` tells apart two entries of one component with
different parameters; it defaults to the name). Any key can be overridden from the command line
(``key=value``, omegaconf dot-list syntax, e.g. ``recipe.epochs=2 seeds=[0,1]``).

:func:`load_config` merges the file and overrides into the :class:`ExperimentConfig` schema
(unknown keys and wrong types fail there), then :func:`validate` checks every component name
and parameter against the registry (unknown names list the valid ones).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

COMPONENT_LISTS = {
    "datasets": "dataset",
    "backbones": "backbone",
    "prediction_models": "prediction_model",
    "measures": "measure",
    "aggregations": "aggregation",
    "tasks": "task",
}


@dataclass
class ComponentConfig:
    name: str = "???"
    params: dict[str, Any] = field(default_factory=dict)
    label: Optional[str] = None


@dataclass
class RecipeConfig:
    """Training recipe (values_seg.engine.Recipe); ``preset`` picks a named recipe first."""

    preset: Optional[str] = None
    optimizer: Optional[str] = None
    lr: Optional[float] = None
    weight_decay: Optional[float] = None
    momentum: Optional[float] = None
    batch_size: Optional[int] = None
    epochs: Optional[int] = None
    steps_per_epoch: Optional[int] = None
    noise_std: Optional[float] = None


@dataclass
class RulesConfig:
    """Which combinations the sweep runs (section 4.2 of the paper, made explicit).

    ``measure_needs_type``: a measure runs with a prediction model only where it declares an
    uncertainty type for the model's family (DESIGN.md's table; e.g. max_softmax only for
    deterministic models). ``exclude``: mappings of field -> value; a (dataset, scenario,
    prediction_model, measure, aggregation, task) combination matching every field of one
    mapping is skipped. ``task_types``: tasks run only with the uncertainty types they declare
    suitable (e.g. active learning queries with PU and EU measures only).
    """

    measure_needs_type: bool = True
    task_types: bool = True
    exclude: list[dict[str, Any]] = field(
        default_factory=lambda: [{"dataset": "gta_cityscapes", "aggregation": "threshold"}]
    )


@dataclass
class ActiveLearningConfig:
    """Second-cycle protocol (appendix A.4): query this share of the unlabeled pool."""

    query_fraction: float = 0.5
    pool_split: str = "pool"


@dataclass
class EvaluationConfig:
    n_bins: int = 20
    montage_cases: int = 3  # per subset (i.i.d. and OoD) and combination
    prediction_dtype: str = "float16"


@dataclass
class ExperimentConfig:
    name: str = "experiment"
    description: str = ""
    seeds: list[int] = field(default_factory=lambda: [0])
    device: str = "auto"
    executor: str = "local"  # local | processes | ray
    workers: int = 2
    cache_dir: Optional[str] = None  # default: <run dir>/cache; share it between runs to reuse
    plugins: list[str] = field(default_factory=list)
    datasets: list[ComponentConfig] = field(default_factory=list)
    backbones: list[ComponentConfig] = field(default_factory=list)
    recipe: RecipeConfig = field(default_factory=RecipeConfig)
    prediction_models: list[ComponentConfig] = field(default_factory=list)
    measures: list[ComponentConfig] = field(default_factory=list)
    aggregations: list[ComponentConfig] = field(default_factory=list)
    tasks: list[ComponentConfig] = field(default_factory=list)
    rules: RulesConfig = field(default_factory=RulesConfig)
    active_learning: ActiveLearningConfig = field(default_factory=ActiveLearningConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)


class ConfigError(ValueError):
    """An invalid experiment config; the message names the key and what is valid."""


def _normalise_components(raw: DictConfig) -> None:
    """Turn ``- name`` entries into ``- {name: name}`` so the schema can type-check them."""
    for key in COMPONENT_LISTS:
        entries = raw.get(key)
        if entries is None:
            continue
        if not isinstance(entries, ListConfig):
            raise ConfigError(f"config: {key} must be a list, got {type(entries).__name__}")
        raw[key] = [{"name": e} if isinstance(e, str) else e for e in entries]


def load_config(path: str | Path | None = None, overrides: Sequence[str] = (), base: dict | None = None) -> DictConfig:
    """The resolved, schema-checked config from a YAML file (or ``base``) and ``key=value`` overrides."""
    try:
        raw = OmegaConf.load(path) if path is not None else OmegaConf.create(base or {})
        if not isinstance(raw, DictConfig):
            raise ConfigError(f"config {path}: the top level must be a mapping")
        if overrides:
            bad = [o for o in overrides if "=" not in o]
            if bad:
                raise ConfigError(f"override {bad[0]!r} is not of the form key=value")
            for override in overrides:  # OmegaConf.update understands list indices (a.0.b=1)
                key, value = override.split("=", 1)
                OmegaConf.update(raw, key.strip(), yaml.safe_load(value) if value.strip() else None, merge=True)
        _normalise_components(raw)
        schema = OmegaConf.structured(ExperimentConfig)
        cfg = OmegaConf.merge(schema, raw)
        OmegaConf.resolve(cfg)
    except ConfigError:
        raise
    except (OmegaConfBaseException, yaml.YAMLError, TypeError) as e:
        raise ConfigError(f"config {path or ''}: {e}".replace("\n", "; ")) from e
    except FileNotFoundError as e:
        raise ConfigError(f"config file not found: {path}") from e
    validate(cfg)
    return cfg


def labels(entries) -> list[str]:
    return [e.label or e.name for e in entries]


def validate(cfg: DictConfig) -> None:
    """Check components and parameters against the registry; raise :class:`ConfigError`."""
    from values_seg import registry

    for module in cfg.plugins:
        try:
            registry.load(module)
        except ValueError as e:
            raise ConfigError(f"config plugins: {e}") from e
    if cfg.executor not in ("local", "processes", "ray"):
        raise ConfigError(f"config executor: {cfg.executor!r} is not one of local, processes, ray")
    if not cfg.seeds:
        raise ConfigError("config seeds: give at least one seed")
    for key, kind in COMPONENT_LISTS.items():
        entries = cfg[key]
        if not entries and key != "aggregations":
            raise ConfigError(f"config {key}: list at least one {kind} (available: {', '.join(registry.names(kind))})")
        names = labels(entries)
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(f"config {key}: duplicate label(s) {dupes}; give each entry a distinct 'label'")
        for entry in entries:
            try:
                component = registry.get(kind, entry.name)
                params = OmegaConf.to_container(entry.params, resolve=True)
                _check_params(component, params)
            except ValueError as e:
                raise ConfigError(f"config {key}: {e}") from e
    if not 0 < cfg.active_learning.query_fraction <= 1:
        raise ConfigError("config active_learning.query_fraction must lie in (0, 1]")
    from values_seg.engine import Recipe

    try:
        recipe(cfg, Recipe)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"config recipe: {e}") from e


def _check_params(component, params: dict) -> None:
    from values_seg.engine.specs import BACKBONE_ARGS
    from values_seg.params import validate as validate_params

    declared = component.params
    if component.kind == "backbone":
        declared = tuple(p for p in declared if p.name not in BACKBONE_ARGS)
    if component.kind == "dataset" or component.kind == "backbone":
        validate_params(f"{component.kind} {component.name!r}", declared, params)
    else:  # build it: constructors validate their own value ranges too
        component.create(**params)


def recipe(cfg: DictConfig, recipe_cls):
    """The engine Recipe of a config (preset first, then the fields that are set)."""
    settings = {k: v for k, v in OmegaConf.to_container(cfg.recipe).items() if v is not None}
    preset = settings.pop("preset", None)
    return recipe_cls.preset(preset, **settings) if preset else recipe_cls(**settings)


def component_params(entry) -> dict:
    return OmegaConf.to_container(entry.params, resolve=True)


def to_yaml(cfg: DictConfig) -> str:
    return OmegaConf.to_yaml(cfg, resolve=True)
