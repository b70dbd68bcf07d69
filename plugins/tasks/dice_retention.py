"""Image-level Dice retention curve after Shifts 1.0: the segmentation kept on the most certain cases and
replaced by the reference on the rest (:func:`values_seg.metrics.dice_retention_curve`). Rows ``rauc``,
``rauc_random``, ``rauc_oracle``; ``rauc`` equals the failure-detection AUGRC (risk 1 - Dice):
docs/design-rationale.md, "Dice-retention task".
"""

from __future__ import annotations

from functools import partial

import numpy as np

from values_seg import hookimpl
from values_seg.statistics import batched
from values_seg.components.task import CaseStatistic, CaseStatisticTask, EvaluationResult, Metric, Reading

from ._common import RANKING_SUPPORT, SELECTIVE_RISK, SUBSETS, case_ids, floats, score_subsets


def _random_rauc(indices, dice):
    return (1.0 - batched.mean(indices, dice)) / 2.0


class DiceRetentionTask(CaseStatisticTask):
    """Image-level Dice retention (Shifts): R-AUC of the uncertainty ranking, beside random and oracle rankings, i.i.d. and OoD."""

    name = "dice_retention"
    label = "Retention (image)"
    metrics = (
        # not primary: it equals AUGRC with risk 1 - Dice, whose task has its own panel
        Metric("rauc", "lower", "Dice R-AUC", support=RANKING_SUPPORT, reading=Reading(evidence=SELECTIVE_RISK)),
        Metric("rauc_random", "lower", "R-AUC random", per_measure=False, reading=Reading(table=False, baseline_of="rauc")),
        Metric("rauc_oracle", "lower", "R-AUC oracle", per_measure=False, reading=Reading(table=False, baseline_of="rauc")),
    )
    uncertainty_types = ("PU", "AU", "EU")
    consumes = ("dice",)

    def statistics(self, result: EvaluationResult):
        for measure, aggregation, subset, part in score_subsets(result):
            yield CaseStatistic("rauc", subset, case_ids(part),
                                partial(batched.dice_rauc, dice=_clipped(part), uncertainty=floats(part, "score")),
                                measure, aggregation)
        for subset in SUBSETS:
            cases = result.test_cases(subset)
            if not cases.empty:
                dice = _clipped(cases)
                yield CaseStatistic("rauc_random", subset, case_ids(cases), partial(_random_rauc, dice=dice))
                yield CaseStatistic("rauc_oracle", subset, case_ids(cases), partial(batched.dice_rauc_oracle, dice=dice))


def _clipped(rows) -> np.ndarray:
    """Per-case Dice, clipped to [0, 1] against rounding."""
    return np.clip(floats(rows, "dice"), 0.0, 1.0)


@hookimpl
def values_seg_tasks():
    return [DiceRetentionTask]
