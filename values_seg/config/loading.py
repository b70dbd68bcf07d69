"""Experiment configs: the YAML file and ``key=value`` overrides merged into the schema, resolved and
typed (:class:`~values_seg.config.experiment.Experiment`); every check is in
:mod:`values_seg.config.checks`. What a config may say: ``docs/reference/config.md``."""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Literal, Optional, Sequence, get_args, get_origin

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from values_seg.engine.specs import Recipe
from values_seg.params import closest
from values_seg.config.checks import ConfigError, check_environment_values, check_nesting, omegaconf_message, recipe, validate
from values_seg.config.experiment import COMPONENT_LISTS, ActiveLearning, Experiment, LearningCurves, Ray, Rules, Statistics
from values_seg.storage.redaction import redacted
from values_seg.registry import ComponentRef
from values_seg.components.settings import EvaluationSettings



@dataclass
class _ComponentEntry:
    """The YAML shape of one component entry (it becomes a :class:`ComponentRef`)."""

    name: str = "???"
    params: dict[str, Any] = field(default_factory=dict)
    label: Optional[str] = None


def _schema_type(annotation: Any) -> Any:
    """An omegaconf-compatible Optional type for a Recipe field annotation."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _schema_type(inner[0]) if len(inner) == 1 else Any
    if origin is Literal:
        return Optional[type(args[0])]
    if origin in (tuple, list):
        item = next((a for a in args if a is not Ellipsis), Any)
        return Optional[List[item]]
    return Optional[annotation]


def _recipe_schema() -> type:
    """``RecipeConfig``: ``preset`` plus every :class:`Recipe` field, each optional (unset = the
    preset's or the default value)."""
    hints = typing.get_type_hints(Recipe)
    fields = [("preset", Optional[str], None)]
    fields += [(f.name, _schema_type(hints[f.name]), None) for f in dataclasses.fields(Recipe)]
    return dataclasses.make_dataclass("RecipeConfig", fields)


RecipeConfig = _recipe_schema()


def _schema(section: type, name: str, drop: tuple[str, ...] = ()) -> type:
    """The omegaconf schema of a typed section of :mod:`values_seg.config.experiment` (or of the
    :class:`EvaluationSettings`): the same fields and defaults, nested sections derived too (one
    place for each field: the typed section)."""
    hints = typing.get_type_hints(section)
    fields = []
    for f in dataclasses.fields(section):
        if f.name in drop:
            continue
        kind = hints[f.name]
        if dataclasses.is_dataclass(kind):
            kind = _schema(kind, f"{kind.__name__}Config")
            fields.append((f.name, kind, field(default_factory=kind)))
        elif f.default is not dataclasses.MISSING:
            fields.append((f.name, kind, field(default=f.default)))
        else:
            fields.append((f.name, kind, field(default_factory=f.default_factory)))
    return dataclasses.make_dataclass(name, fields)


RulesConfig = _schema(Rules, "RulesConfig")
ActiveLearningConfig = _schema(ActiveLearning, "ActiveLearningConfig")
EvaluationConfig = _schema(EvaluationSettings, "EvaluationConfig", drop=("threads",))  # threads: the run's
StatisticsConfig = _schema(Statistics, "StatisticsConfig")
RayConfig = _schema(Ray, "RayConfig")
LearningCurvesConfig = _schema(LearningCurves, "LearningCurvesConfig")


@dataclass
class ExperimentConfig:
    name: str = "experiment"
    description: str = ""
    seeds: list[int] = field(default_factory=lambda: [0])
    device: str = "auto"
    executor: str = "local"  # local | processes | ray
    workers: int = 2  # jobs at a time on this machine (processes; a local Ray instance gets workers x threads CPUs)
    threads: int = 1  # CPU threads of every job; part of the cache keys (CPU results depend on it)
    loader_workers: Optional[int] = None  # data-loader processes per training (default: 0 on CPU, up to 4 with a GPU); the numbers do not depend on it
    fuse_training: bool = True  # trainings of one architecture as one job, vectorised on the CPU (part of the checkpoint keys); false: one by one
    cache_dir: Optional[str] = None  # default: <run dir>/cache; share it between runs to reuse
    plugins: list[str] = field(default_factory=list)
    datasets: list[_ComponentEntry] = field(default_factory=list)
    backbones: list[_ComponentEntry] = field(default_factory=list)
    recipe: RecipeConfig = field(default_factory=RecipeConfig)  # type: ignore[valid-type]
    prediction_models: list[_ComponentEntry] = field(default_factory=list)
    measures: list[_ComponentEntry] = field(default_factory=list)
    aggregations: list[_ComponentEntry] = field(default_factory=list)
    tasks: list[_ComponentEntry] = field(default_factory=list)
    rules: RulesConfig = field(default_factory=RulesConfig)  # type: ignore[valid-type]
    active_learning: ActiveLearningConfig = field(default_factory=ActiveLearningConfig)  # type: ignore[valid-type]
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)  # type: ignore[valid-type]
    statistics: StatisticsConfig = field(default_factory=StatisticsConfig)  # type: ignore[valid-type]
    ray: RayConfig = field(default_factory=RayConfig)  # type: ignore[valid-type]
    learning_curves: LearningCurvesConfig = field(default_factory=LearningCurvesConfig)  # type: ignore[valid-type]
    tracking: dict[str, dict[str, Any]] = field(default_factory=dict)  # tracker name -> its parameters (values_seg.runner.tracking)


def _normalise_components(raw: DictConfig) -> None:
    """Turn ``- name`` entries into ``- {name: name}`` so the schema can type-check them."""
    for key in COMPONENT_LISTS:
        entries = raw.get(key)
        if entries is None:
            continue
        if not isinstance(entries, ListConfig):
            raise ConfigError(f"config: {key} must be a list, got {type(entries).__name__}")
        raw[key] = [{"name": e} if isinstance(e, str) else e for e in entries]


def _check_keys(raw: Any, schema: type, where: str) -> None:
    """Unknown keys of ``raw`` (a mapping) against the dataclass ``schema``, recursively into
    nested sections and component entries: a :class:`ConfigError` naming the valid keys."""
    if not isinstance(raw, DictConfig):
        return
    fields = {f.name: f for f in dataclasses.fields(schema)}
    for key in raw.keys():
        if key not in fields:
            hint = closest(str(key), fields)
            raise ConfigError(f"config {where}{key}: unknown key; valid keys: {', '.join(fields)}"
                              + (f" (did you mean {hint!r}?)" if hint else ""))
        hints = typing.get_type_hints(schema)
        target = hints[key]
        if dataclasses.is_dataclass(target):
            _check_keys(raw[key], target, f"{where}{key}.")
        elif get_origin(target) is list and dataclasses.is_dataclass(get_args(target)[0]):
            value = raw[key]
            if isinstance(value, ListConfig):
                for i, item in enumerate(value):
                    _check_keys(item, get_args(target)[0], f"{where}{key}.{i}.")


def load_config(path: str | Path | None = None, overrides: Sequence[str] = (), base: dict | None = None) -> Experiment:
    """The typed :class:`Experiment` of a YAML file (or ``base``) and ``key=value`` overrides:
    resolved, schema-checked, validated (:func:`~values_seg.config.checks.validate`). What needs
    built objects is checked by :func:`~values_seg.config.checks.preflight`, before any work."""
    return typed(resolved_config(path, overrides, base))


def typed(cfg: DictConfig) -> Experiment:
    """The :class:`Experiment` of a :func:`resolved_config`: validated (:func:`~values_seg.config.checks.validate`), made
    read-only, typed. (The command line resolves first, to decide a no-op rerun without the registry.)"""
    components = validate(cfg)
    OmegaConf.set_readonly(cfg, True)
    return _experiment(cfg, components)


def resolved_config(path: str | Path | None = None, overrides: Sequence[str] = (), base: dict | None = None) -> DictConfig:
    """The config of a YAML file (or ``base``) and ``key=value`` overrides, schema-checked and
    resolved, before :func:`~values_seg.config.checks.validate` (which needs the registry): what the run is asked to do."""
    try:
        if path is not None:
            with open(path, encoding="utf-8") as stream:
                check_nesting(stream, str(path))
        raw = OmegaConf.load(path) if path is not None else OmegaConf.create(base or {})
        if not isinstance(raw, DictConfig):
            raise ConfigError(f"config {path}: the top level must be a mapping")
        if overrides:
            bad = [o for o in overrides if "=" not in o]
            if bad:
                raise ConfigError(f"override {bad[0]!r} is not of the form key=value")
            for override in overrides:  # OmegaConf.update understands list indices (a.0.b=1)
                key, value = override.split("=", 1)
                check_nesting(value, f"override {key.strip()}", outer=len(key.split(".")))
                OmegaConf.update(raw, key.strip(), yaml.safe_load(value) if value.strip() else None, merge=True)
        _normalise_components(raw)
        _check_keys(raw, ExperimentConfig, "")
        check_environment_values(OmegaConf.to_container(raw, resolve=False))
        schema = OmegaConf.structured(ExperimentConfig)
        cfg = OmegaConf.merge(schema, raw)
        OmegaConf.resolve(cfg)
    except ConfigError:
        raise
    except OmegaConfBaseException as e:
        raise ConfigError(f"config {path}: {omegaconf_message(e)}" if path else f"config {omegaconf_message(e)}") from e
    except (yaml.YAMLError, TypeError) as e:
        raise ConfigError(f"config {path or ''}: {e}".replace("\n", "; ")) from e
    except FileNotFoundError as e:
        raise ConfigError(f"config file not found: {path}") from e
    return cfg


def _experiment(cfg: DictConfig, components: dict[str, list[ComponentRef]]) -> Experiment:
    """The :class:`Experiment` of a validated, resolved config: the references :func:`~values_seg.config.checks.validate`
    resolved, the recipe built, every section typed."""
    hints = typing.get_type_hints(Experiment)
    sections = {key: _typed(hints[key], OmegaConf.to_container(cfg[key], resolve=True))  # the plain-data sections
                for key in ExperimentConfig.__dataclass_fields__ if hints.get(key) in _SECTIONS}
    return Experiment(
        config=cfg, name=str(cfg.name), description=str(cfg.description), seeds=tuple(int(s) for s in cfg.seeds),
        device=str(cfg.device), executor=str(cfg.executor), workers=int(cfg.workers), threads=int(cfg.threads),
        loader_workers=None if cfg.loader_workers is None else int(cfg.loader_workers),
        fuse_training=bool(cfg.fuse_training), cache_dir=None if cfg.cache_dir is None else str(cfg.cache_dir),
        plugins=tuple(cfg.plugins), **{key: tuple(components[key]) for key in COMPONENT_LISTS}, recipe=recipe(cfg),
        evaluation=EvaluationSettings.of({**OmegaConf.to_container(cfg.evaluation), "threads": cfg.threads}),
        tracking=OmegaConf.to_container(cfg.tracking, resolve=True), **sections)


_SECTIONS = (Rules, ActiveLearning, Statistics, Ray, LearningCurves)


def _typed(kind: type, values: dict[str, Any]) -> Any:
    """A typed section from its (schema-checked) values, nested sections too."""
    hints = typing.get_type_hints(kind)
    return kind(**{k: _typed(hints[k], v) if dataclasses.is_dataclass(hints[k]) else v for k, v in values.items()})


def to_yaml(experiment: Experiment) -> str:
    """The resolved config of ``experiment`` as written to ``config.yaml``, credentials redacted
    (:mod:`values_seg.storage.redaction`: a tracker's URL with a password; no key of a result holds one)."""
    return OmegaConf.to_yaml(OmegaConf.create(redacted(OmegaConf.to_container(experiment.config, resolve=True))))
