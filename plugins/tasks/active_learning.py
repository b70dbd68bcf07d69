"""Active learning (paper appendix A.4, eq. 9-10): Dice gain of querying with a score over random.

``improvement`` per (measure, aggregation) on the OoD test set, from its stage's result
(:class:`~._active_learning_cycle.ActiveLearningCycle`); the formula, when no row is emitted and what the
bootstrap resamples: docs/design-rationale.md, "Active-learning task".
"""

from __future__ import annotations

import math

from values_seg import hookimpl, metrics
from values_seg.statistics import batched
from values_seg.components.task import EvaluationResult, Metric, Task, row, samples_row

from ._active_learning_cycle import ActiveLearningCycle


def _defined(*values) -> bool:
    return all(v is not None and math.isfinite(float(v)) for v in values)


class ActiveLearningTask(Task):
    """Active learning: relative OoD Dice improvement of querying by uncertainty over random querying."""

    name = "active_learning"
    label = "AL"
    metrics = (Metric("improvement", "higher", "Improvement", splits=("ood",), primary=True),)
    uncertainty_types = ("PU", "EU")
    consumes = ("dice",)
    stages = (ActiveLearningCycle,)

    def score(self, result: EvaluationResult) -> list[dict]:
        al = result.stages.get(ActiveLearningCycle.name)
        if al is None or not _defined(al.first_dice, al.random_dice) or float(al.first_dice) == 0:
            return []
        out = []
        for (measure, aggregation), dice in sorted(al.method_dice.items()):
            if not _defined(dice):
                continue
            value = metrics.al_improvement(al.first_dice, dice, al.random_dice)
            out.append(row(self.name, "improvement", "ood", value, measure, aggregation))
        return out

    def bootstrap(self, result: EvaluationResult, resamples) -> list[dict]:
        al = result.stages.get(ActiveLearningCycle.name)
        ood = result.test_cases("ood")
        if al is None or ood.empty or not al.random_case_dice:
            return []
        ids = sorted(ood["case_id"].astype(str))
        first = dict(zip(ood["case_id"].astype(str), ood["dice"].astype(float)))
        if any(c not in al.random_case_dice for c in ids):
            return []
        indices = resamples.of(ids)
        out = []
        for (measure, aggregation), per_case in sorted(al.method_case_dice.items()):
            if any(c not in per_case for c in ids):
                continue
            samples = batched.al_improvement(indices, [first[c] for c in ids], [per_case[c] for c in ids],
                                             [al.random_case_dice[c] for c in ids])
            out.append(samples_row(self.name, "improvement", "ood", samples, measure, aggregation))
        return out


@hookimpl
def values_seg_tasks():
    return [ActiveLearningTask]
