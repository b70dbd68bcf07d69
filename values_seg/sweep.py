"""Sweep expansion: a config becomes the combinations to train, predict, evaluate and score.

One :class:`Combination` per (dataset entry, seed, backbone, prediction model), carrying the
training specs its model declares and the measures, aggregations and tasks that apply to it
under the config's rules (:class:`values_seg.config.RulesConfig`):

* a measure serves a prediction model only where it declares an uncertainty type for the
  model's family (DESIGN.md's table, e.g. ``max_softmax`` only for deterministic models);
* any combination of fields matching an ``exclude`` rule is skipped (e.g. threshold
  aggregation on GTA5/Cityscapes, paper section 4.2);
* tasks that declare suitable uncertainty types (e.g. active learning: PU and EU) use only
  measures of those types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig

from values_seg import registry
from values_seg.config import component_params, recipe
from values_seg.engine import ComponentRef, Recipe, TrainingSpec, backbone_ref, dataset_ref, unique_specs


@dataclass(frozen=True)
class Entry:
    """A configured component: its label in results, registry name and parameters."""

    label: str
    name: str
    params: tuple = ()  # sorted (key, value) pairs

    @property
    def kwargs(self) -> dict:
        return dict(self.params)

    def create(self, kind: str) -> Any:
        return registry.create(kind, self.name, **self.kwargs)


def _entry(e) -> Entry:
    params = component_params(e)
    return Entry(e.label or e.name, e.name, tuple(sorted(params.items(), key=lambda kv: kv[0])))


@dataclass(frozen=True)
class Combination:
    scenario: str  # the dataset entry's label
    dataset: ComponentRef
    seed: int
    backbone: str  # label
    model: Entry
    family: str
    specs: tuple[TrainingSpec, ...]
    measures: tuple[tuple[Entry, str | None], ...]  # (measure, uncertainty type under this family)
    aggregations: tuple[Entry, ...]
    base: TrainingSpec = field(compare=False)

    @property
    def context(self) -> dict:
        return {
            "dataset": self.dataset.name,
            "scenario": self.scenario,
            "seed": self.seed,
            "backbone": self.backbone,
            "prediction_model": self.model.label,
            "family": self.family,
        }

    @property
    def name(self) -> str:
        return f"{self.scenario}/{self.backbone}/{self.model.label}/seed{self.seed}"

    def measure_types(self) -> dict[str, str | None]:
        return {m.label: utype for m, utype in self.measures}


def uncertainty_type(measure_name: str, family: str) -> tuple[bool, str | None]:
    """(serves this family?, its uncertainty type) from the measure's declaration."""
    declared = registry.get("measure", measure_name).meta.get("uncertainty_types")
    if declared is None:  # a measure that declares nothing serves every family, type unknown
        return True, None
    return family in declared, declared.get(family)


def excluded(rules, **fields: Any) -> bool:
    """Whether some exclude rule matches on every one of its keys (all keys must be given)."""
    for rule in rules.exclude:
        rule = dict(rule)
        if rule and all(k in fields and str(fields[k]) == str(v) for k, v in rule.items()):
            return True
    return False


def expand(cfg: DictConfig) -> list[Combination]:
    """Every (dataset, seed, backbone, prediction model) combination with what applies to it."""
    base_recipe = recipe(cfg, Recipe)
    combos = []
    measures = [_entry(m) for m in cfg.measures]
    aggregations = [_entry(a) for a in cfg.aggregations]
    for d in cfg.datasets:
        data = dataset_ref(d.name, component_params(d))
        scenario = d.label or d.name
        for b in cfg.backbones:
            backbone = _entry(b)
            for m in cfg.prediction_models:
                model_entry = _entry(m)
                model = model_entry.create("prediction_model")
                family = model.family
                fields = {"dataset": d.name, "scenario": scenario, "backbone": backbone.label,
                          "prediction_model": model_entry.label, "family": family}
                if excluded(cfg.rules, **fields):
                    continue
                chosen = []
                for me in measures:
                    serves, utype = uncertainty_type(me.name, family)
                    if cfg.rules.measure_needs_type and not serves:
                        continue
                    if excluded(cfg.rules, **fields, measure=me.label, uncertainty_type=utype):
                        continue
                    chosen.append((me, utype))
                aggs = tuple(a for a in aggregations if not excluded(cfg.rules, **fields, aggregation=a.label))
                for seed in cfg.seeds:
                    base = TrainingSpec(dataset=data, backbone=backbone_ref(backbone.name, backbone.kwargs),
                                        recipe=base_recipe, seed=int(seed))
                    specs = tuple(model.training_specs(base))
                    combos.append(Combination(scenario, data, int(seed), backbone.label, model_entry, family,
                                              specs, tuple(chosen), aggs, base))
    return combos


def tasks(cfg: DictConfig) -> list[Entry]:
    return [_entry(t) for t in cfg.tasks]


def unique_training_specs(combos: list[Combination]) -> list[TrainingSpec]:
    """Distinct trainings across the sweep, in first-use order (the ensemble reuses the
    deterministic trainings of its seeds; test-time augmentation reuses one)."""
    return list(unique_specs(s for c in combos for s in c.specs).values())
