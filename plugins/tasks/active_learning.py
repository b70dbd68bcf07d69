"""Active learning (paper appendix A.4, eq. 9-10): Dice gain of querying with a score over random.

Rows per (measure, aggregation) of ``result.active_learning.method_dice``, ``split="ood"`` (the
gain is measured on the OoD test set): ``improvement`` (higher is better) =
``(Dice_method - Dice_first) / Dice_first - (Dice_random - Dice_first) / Dice_first``. Without an
active-learning result (not run for this model) no row; where the relative change is undefined
(first-cycle Dice 0, or a non-finite Dice) no row for it.
"""

from __future__ import annotations

import math

from values_seg import hookimpl, metrics
from values_seg.task import EvaluationResult, Metric, Task, row


def _defined(*values) -> bool:
    return all(v is not None and math.isfinite(float(v)) for v in values)


class ActiveLearningTask(Task):
    """Active learning: relative OoD Dice improvement of querying by uncertainty over random querying."""

    name = "active_learning"
    label = "AL"
    metrics = (Metric("improvement", "higher", "Improvement", splits=("ood",), primary=True),)
    uncertainty_types = ("PU", "EU")
    requires = ("active_learning",)

    def score(self, result: EvaluationResult) -> list[dict]:
        al = result.active_learning
        if al is None or not _defined(al.first_dice, al.random_dice) or float(al.first_dice) == 0:
            return []
        out = []
        for (measure, aggregation), dice in sorted(al.method_dice.items()):
            if not _defined(dice):
                continue
            value = metrics.al_improvement(al.first_dice, dice, al.random_dice)
            out.append(row(self.name, "improvement", "ood", value, measure, aggregation))
        return out


@hookimpl
def values_seg_tasks():
    return [ActiveLearningTask]
