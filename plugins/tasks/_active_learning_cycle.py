"""Active learning's second training cycle (paper appendix A.4): the stage the ``active_learning``
task declares (``stages = (ActiveLearningCycle,)``): the pool scored, the most uncertain cases queried
beside a seeded random query, the trainings repeated with their labels, the OoD Dice measured. The steps
and its result, :class:`ActiveLearningResult`: docs/design-rationale.md, "Active-learning task".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from values_seg import metrics
from values_seg.engine import Checkpoints, PredictionCache, TrainingSpec, predict_split, unique_specs
from values_seg.numerics.labels import class_argmax
from values_seg.components.run_context import RunContext
from values_seg.components.stage import Stage, StageContext
from values_seg.config.sweep import Combination, excluded

RANDOM = "random"


@dataclass
class ActiveLearningResult:
    """Mean OoD-test Dice of the first cycle, of random querying, and per (measure, aggregation)
    of the second cycle after querying with that score (paper eq. 9-10); where known, the second
    cycles' Dice per OoD test case (``{case_id: Dice}``, for the bootstrap over cases)."""

    first_dice: float
    random_dice: float
    method_dice: dict[tuple[str, str], float] = field(default_factory=dict)
    random_case_dice: dict[str, float] = field(default_factory=dict)
    method_case_dice: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)


def queries(combo: Combination, result, fraction: float, pool_split: str, suits, rules, task_names) -> dict:
    """``{query label: sorted case ids}``: ``"random"`` and one per suited (measure, aggregation)."""
    pool = result.scores[result.scores["split"] == pool_split]
    pool_ids = sorted(result.cases.loc[result.cases["split"] == pool_split, "case_id"])
    n_query = max(1, math.ceil(fraction * len(pool_ids)))
    rng = np.random.default_rng([combo.seed, 2024])
    out = {RANDOM: sorted(rng.choice(pool_ids, size=n_query, replace=False).tolist())}
    types = combo.measure_types()
    for (measure, aggregation), group in pool.groupby(["measure", "aggregation"]):
        if not suits(types.get(measure)):
            continue
        if all(excluded(rules, task=t, measure=measure, aggregation=aggregation, **combo.context) for t in task_names):
            continue
        ranked = group.sort_values(["score", "case_id"], ascending=[False, True])
        out[(measure, aggregation)] = sorted(ranked["case_id"].head(n_query).tolist())
    return out


class ActiveLearningCycle(Stage):
    """Queries the pool with each suited score and at random, retrains, and measures the OoD Dice."""

    name = "second_cycle"
    consumes = ("dice",)

    def splits(self, config):
        return (str(config.active_learning.pool_split),)

    def run(self, context: StageContext, tasks) -> dict[str, ActiveLearningResult]:
        """The second cycle for every evaluated combination; a query's measure must be of a type one
        of the declaring ``tasks`` suits (when the config's ``rules.task_types`` is on)."""
        plans, first = self._plan(context, tasks)
        all_specs = list(unique_specs(s for group in plans.values() for s in group).values())
        context.count_trainings(len(all_specs))
        available = context.train(all_specs, stage="al_train")
        by_name = {c.name: c for c in context.combinations}
        dtype = context.config.evaluation.prediction_dtype
        jobs = {}
        for (name, query), specs in plans.items():
            job_id = f"{name} {_query_label(query)}"
            if not all(s.key() in available for s in specs):
                context.fail(job_id, "skipped: a training it needs failed")
                continue
            jobs[job_id] = (second_cycle_dice_job, (by_name[name], specs, first[name][1], context.run, dtype))
        dice = context.map("al_predict", jobs)
        return {name: result for name, (first_dice, _) in first.items()
                if (result := _result(name, first_dice, plans, dice)) is not None}

    def _plan(self, context: StageContext, tasks) -> tuple[dict, dict]:
        """(combination name, query) -> second-cycle specs; combination name -> (first Dice, OoD ids)."""
        cfg = context.config
        fraction, pool_split = float(cfg.active_learning.query_fraction), str(cfg.active_learning.pool_split)
        suited = {t for task in tasks.values() for t in task.uncertainty_types}
        suits = (lambda utype: utype in suited) if cfg.rules.task_types else (lambda utype: True)
        plans, first = {}, {}
        for c in context.combinations:
            result = context.load(c)
            pool_ids = result.cases.loc[result.cases["split"] == pool_split, "case_id"]
            ood = result.test_cases("ood")
            if pool_ids.empty or ood.empty:
                context.fail(c.name, f"needs a '{pool_split}' split and OoD test cases")
                continue
            if c.base is None:
                context.fail(c.name, "its prediction model is trained outside values-seg: "
                                     "it cannot be retrained on the queried cases")
                continue
            first[c.name] = (float(ood["dice"].mean()), sorted(ood["case_id"]))
            model = c.model.create()
            for query, chosen in queries(c, result, fraction, pool_split, suits, cfg.rules, list(tasks)).items():
                base = c.base.replace(extra_cases=tuple((pool_split, cid) for cid in chosen))
                plans[(c.name, query)] = tuple(model.training_specs(base))
        return plans, first


def _result(name: str, first_dice: float, plans: dict, dice: dict) -> ActiveLearningResult | None:
    random_dice = dice.get(f"{name} {RANDOM}")  # per OoD test case
    if random_dice is None:
        return None
    method = {query: dice[f"{name} {_query_label(query)}"] for (combo_name, query) in plans
              if combo_name == name and query != RANDOM and f"{name} {_query_label(query)}" in dice}
    return ActiveLearningResult(first_dice, _mean(random_dice), {q: _mean(d) for q, d in method.items()},
                                random_case_dice=dict(random_dice), method_case_dice=method)


def second_cycle_dice_job(combo: Combination, specs: Sequence[TrainingSpec], ood_case_ids: Sequence[str],
                          run: RunContext, prediction_dtype: str) -> dict[str, float]:
    """Per OoD test case, the Dice of the prediction model retrained on the queried cases (eq. 9),
    predicted with the run's cache, device and threads."""
    model = combo.model.create()
    dataset = combo.dataset.create()
    store = Checkpoints.of(run.store)
    cache = PredictionCache.of(run.store, prediction_dtype)
    handles = predict_split(model, list(specs), store, combo.dataset, "test", cache, device=run.device,
                            progress=run.progress, threads=run.threads)
    return case_dice(handles, dataset, set(ood_case_ids))


def case_dice(handles, dataset, case_ids: set[str]) -> dict[str, float]:
    """Per case of ``case_ids``, the eq. 3 Dice of the mean prediction against every rater."""
    values = {}
    for handle in handles:
        if handle.case_id not in case_ids:
            continue
        prediction = class_argmax(handle.load().mean(dim=0), dim=0).numpy()
        case = dataset.load(handle.case_id)
        values[handle.case_id] = float(metrics.mean_dice_over_raters(
            prediction, case.raters, num_classes=dataset.num_classes, ignore_index=dataset.ignore_index,
            background=dataset.background))
    if not values:
        raise ValueError("active learning: the test split has no OoD cases to measure the improvement on")
    return values


def _mean(case_dice: dict[str, float]) -> float:
    return float(np.mean(list(case_dice.values())))


def _query_label(query) -> str:
    return query if query == RANDOM else f"{query[0]} × {query[1]}"
