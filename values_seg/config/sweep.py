"""Sweep expansion: a config becomes the combinations to train, predict, evaluate and score.

One :class:`Combination` per (dataset entry, seed, backbone, prediction model), with the measures,
aggregations and tasks that apply to it under the config's rules (:class:`values_seg.config.experiment.Rules`);
the rules: docs/design-rationale.md, "Sweep expansion".
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from values_seg import registry
from values_seg.components.aggregation import reads_samples
from values_seg.components.dataset import pin_fingerprint
from values_seg.engine import TrainingSpec, unique_specs
from values_seg.config.experiment import Experiment
from values_seg.registry import ComponentRef

log = logging.getLogger("values_seg.config.sweep")


@dataclass(frozen=True)
class Combination:
    dataset: ComponentRef  # its label is the scenario
    seed: int
    backbone: ComponentRef | None  # None for a model trained outside values-seg
    model: ComponentRef
    family: str
    specs: tuple[TrainingSpec, ...]
    measures: tuple[tuple[ComponentRef, str | None], ...]  # (measure, uncertainty type under this family)
    aggregations: tuple[ComponentRef, ...]
    base: TrainingSpec | None = field(compare=False)  # the template of its trainings (None: none)

    @property
    def scenario(self) -> str:
        return self.dataset.label

    @property
    def context(self) -> dict:
        return {
            "dataset": self.dataset.name,
            "scenario": self.scenario,
            "seed": self.seed,
            "backbone": self.backbone.label if self.backbone is not None else "",
            "prediction_model": self.model.label,
            "family": self.family,
        }

    @property
    def name(self) -> str:
        backbone = self.backbone.label if self.backbone is not None else "-"
        return f"{self.scenario}/{backbone}/{self.model.label}/seed{self.seed}"

    def measure_types(self) -> dict[str, str | None]:
        return {m.label: utype for m, utype in self.measures}


def uncertainty_type(measure_name: str, family: str) -> tuple[bool, str | None]:
    """(serves this family?, its uncertainty type) from the measure's declaration."""
    declared = registry.get("measure", measure_name).meta.get("uncertainty_types")
    if declared is None:  # a measure that declares nothing serves every family, type unknown
        return True, None
    return family in declared, declared.get(family)


def untyped_measures(cfg: Experiment) -> list[str]:
    """Labels of the configured measures that declare no uncertainty type (they are scored, but
    stay out of type-filtered tasks such as active learning, the separation study and Figure 3's
    type averages)."""
    return [m.label for m in cfg.measures
            if registry.get("measure", m.name).meta.get("uncertainty_types") is None]


def family_gaps(cfg: Experiment) -> dict[str, dict[str, str]]:
    """Configured measure label -> {prediction model label: family} of the configured models it
    produces no rows for, because it declares no uncertainty type for their family
    (``rules.measure_needs_type``; e.g. ``max_softmax`` only under deterministic models).
    Measures without gaps are left out."""
    if not cfg.rules.measure_needs_type:
        return {}
    models = [(ref.label, ref.create().family) for ref in cfg.prediction_models]
    gaps = {m.label: {label: family for label, family in models if not uncertainty_type(m.name, family)[0]}
            for m in cfg.measures}
    return {m: missing for m, missing in gaps.items() if missing}


def describe_gap(measure: str, models: dict[str, str]) -> str:
    """One line saying which prediction models (label -> family) a measure does not run under, and why."""
    listed = ", ".join(f"{label} ({family})" for label, family in models.items())
    return (f"measure {measure!r} produces no rows under {listed}: it declares no uncertainty type for these families "
            f"(rules.measure_needs_type: false runs every measure under every model, its type unknown)")


def without_measures(combos: list[Combination], quantities: dict) -> tuple[list[Combination], list[str]]:
    """The combinations that can compute ``quantities`` (name -> quantity), and one line per
    prediction model left out: under it no configured measure runs, and a per-measure quantity
    (e.g. ``ncc`` for ambiguity, ``calibration_bins`` for calibration) has no measure to be
    computed for, so the task could only fail after every training."""
    needs = sorted(name for name, q in quantities.items() if q.per_measure)
    if not needs:
        return combos, []
    kept = [c for c in combos if c.measures]
    out = {c.model.label: c.family for c in combos if not c.measures}
    lines = [f"prediction model {label!r} ({family}) left out: no configured measure runs under it, and the tasks "
             f"need per-measure quantities {needs}; add a measure that declares a type for {family!r} to run it"
             for label, family in out.items()]
    return kept, lines


def excluded(rules, **fields: Any) -> bool:
    """Whether some exclude rule matches on every one of its keys (all keys must be given)."""
    for rule in rules.exclude:
        rule = dict(rule)
        if rule and all(k in fields and str(fields[k]) == str(v) for k, v in rule.items()):
            return True
    return False


def fits(rules, aggregation: ComponentRef, dataset: ComponentRef) -> bool:
    """Whether an aggregation applies to a dataset: one that declares ``needs_background`` only
    where the dataset has a background class (unless ``rules.aggregation_needs_background`` is off)."""
    needs = getattr(aggregation.component().obj, "needs_background", False)
    return not (rules.aggregation_needs_background and needs) or dataset.component().obj.background is not None


def samples_suffice(aggregation: ComponentRef, model) -> bool:
    """Whether a model predicts enough samples for an aggregation: one that reads the samples
    (:attr:`values_seg.components.aggregation.Aggregation.reads_samples`) needs two or more, so it is left
    out for a model that declares a single sample (deterministic)."""
    if not reads_samples(aggregation.component().obj):
        return True
    declared = model.num_samples_predicted
    return declared is None or declared >= 2


def _model_backbones(models, backbones) -> list[tuple]:
    """(backbone, model ref, model) pairs: every backbone for models values-seg trains, none for
    models trained elsewhere (``uses_backbone = False``)."""
    trained = [(b, ref, m) for b in backbones for ref, m in models if m.uses_backbone]
    return trained + [(None, ref, m) for ref, m in models if not m.uses_backbone]


def expand(cfg: Experiment) -> list[Combination]:
    """Every (dataset, seed, backbone, prediction model) combination with what applies to it."""
    base_recipe = cfg.recipe
    combos = []
    measures, aggregations = cfg.measures, cfg.aggregations
    models = [(ref, ref.create()) for ref in cfg.prediction_models]
    for data in map(pin_fingerprint, cfg.datasets):  # every cache key holds the data's fingerprint
        for backbone, model_ref, model in _model_backbones(models, cfg.backbones):
            family = model.family
            fields = {"dataset": data.name, "scenario": data.label,
                      "backbone": backbone.label if backbone is not None else "",
                      "prediction_model": model_ref.label, "family": family}
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
            aggs = tuple(a for a in aggregations if fits(cfg.rules, a, data) and samples_suffice(a, model)
                         and not excluded(cfg.rules, **fields, aggregation=a.label))
            for seed in cfg.seeds:
                base = None if backbone is None else TrainingSpec(dataset=data, backbone=backbone, recipe=base_recipe,
                                                                  seed=int(seed), threads=int(cfg.threads),
                                                                  fused=bool(cfg.fuse_training))
                specs = tuple(model.training_specs(base)) if base is not None else ()
                combos.append(Combination(data, int(seed), backbone, model_ref, family, specs, tuple(chosen),
                                          aggs, base))
    return combos


def unique_training_specs(combos: list[Combination]) -> list[TrainingSpec]:
    """Distinct trainings across the sweep, in first-use order (an ensemble's member that is
    some model's plain training of that seed is trained once; test-time augmentation reuses the
    deterministic training)."""
    return list(unique_specs(s for c in combos for s in c.specs).values())
