"""The active-learning stage (paper appendix A.4): a second training cycle, run when a task requires it.

A task that lists ``"active_learning"`` in its ``requires`` gets, in its
:class:`~values_seg.task.EvaluationResult`, an :class:`~values_seg.task.ActiveLearningResult`:

1. the evaluation stage has scored the unlabeled pool (split ``active_learning.pool_split``);
2. per combination, every (measure, aggregation) whose uncertainty type suits a requesting task
   queries the ``query_fraction`` most uncertain pool cases, and a seeded random query of the
   same size is the baseline;
3. the prediction model's trainings are repeated with the queried cases' labels added (through
   the same deduplicating checkpoint cache: identical queries train once);
4. the second cycle's Dice on the OoD test cases is measured for each query (kept per case, for
   the bootstrap over cases).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from values_seg.engine import unique_specs
from values_seg.runner.evaluate import load_evaluation
from values_seg.runner.executors import Job
from values_seg.runner.jobs import second_cycle_dice_job
from values_seg.sweep import Combination, excluded
from values_seg.task import ActiveLearningResult

if TYPE_CHECKING:
    from values_seg.runner.run import Runner

RANDOM = "random"


def queries(combo: Combination, result, fraction: float, pool_split: str, suits, rules, task_names) -> dict:
    """``{query label: sorted case ids}``: ``"random"`` and one per suited (measure, aggregation)."""
    pool = result.scores[result.scores["split"] == "pool"]
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


def run_active_learning(runner: "Runner", combos: list[Combination], folders: dict, tasks: dict) -> dict[str, ActiveLearningResult]:
    """The second cycle for every evaluated combination; ``{combination name: result}``.

    ``tasks``: the requesting tasks by label; a query's measure must be of a type one of them
    suits (when the config's ``rules.task_types`` is on)."""
    cfg = runner.cfg
    fraction, pool_split = float(cfg.active_learning.query_fraction), cfg.active_learning.pool_split
    suited = {t for task in tasks.values() for t in task.uncertainty_types}
    suits = (lambda utype: utype in suited) if cfg.rules.task_types else (lambda utype: True)
    plans, first = {}, {}  # (combo name, query) -> second-cycle specs; combo name -> (first Dice, OoD ids)
    for c in combos:
        result = load_evaluation(folders[c.name], c)
        pool_ids = result.cases.loc[result.cases["split"] == pool_split, "case_id"]
        ood = result.test_cases("ood")
        if pool_ids.empty or ood.empty:
            runner.fail("active_learning", c.name, f"needs a '{pool_split}' split and OoD test cases")
            continue
        if c.base is None:
            runner.fail("active_learning", c.name, "its prediction model is trained outside values-seg: "
                                                   "it cannot be retrained on the queried cases")
            continue
        first[c.name] = (float(ood["dice"].mean()), sorted(ood["case_id"]))
        model = c.model.create()
        for query, chosen in queries(c, result, fraction, pool_split, suits, cfg.rules, list(tasks)).items():
            base = c.base.replace(extra_cases=tuple((pool_split, cid) for cid in chosen))
            plans[(c.name, query)] = tuple(model.training_specs(base))
    all_specs = list(unique_specs(s for group in plans.values() for s in group).values())
    runner.summary.trainings += len(all_specs)
    available = runner.train(all_specs, stage="al_train")

    by_name = {c.name: c for c in combos}
    jobs = []
    for (name, query), specs in plans.items():
        job_id = f"{name} {_query_label(query)}"
        if not all(s.key() in available for s in specs):
            runner.fail("al_predict", job_id, "skipped: a training it needs failed")
            continue
        jobs.append(Job(job_id, "al_predict", second_cycle_dice_job,
                        (by_name[name], specs, first[name][1], str(runner.cache_dir),
                         runner.eval_cfg, runner.device, runner.plugins,
                         runner.inner_progress)))
    dice = runner.stage("al_predict", jobs)

    results = {}
    for name, (first_dice, _) in first.items():
        random_dice = dice.get(f"{name} {RANDOM}")  # per OoD test case
        if random_dice is None:
            continue
        method = {query: dice[f"{name} {_query_label(query)}"] for (combo_name, query) in plans
                  if combo_name == name and query != RANDOM and f"{name} {_query_label(query)}" in dice}
        results[name] = ActiveLearningResult(first_dice, _mean(random_dice), {q: _mean(d) for q, d in method.items()},
                                             random_case_dice=dict(random_dice), method_case_dice=method)
    return results


def _mean(case_dice: dict[str, float]) -> float:
    return float(np.mean(list(case_dice.values())))


def _query_label(query) -> str:
    return query if query == RANDOM else f"{query[0]} × {query[1]}"
