"""Image-level Dice retention curve after Shifts 1.0 (``reference/001_43f3f45a733f402c.txt``,
retention curves with "random" and "optimal" rankings): the model's segmentation is kept on the
most certain cases (lowest aggregated uncertainty) and replaced by the reference (Dice 1) on the
rest (:func:`values_seg.metrics.dice_retention_curve`).

Rows, ``split`` in ``"iid"``/``"ood"``, all areas under the error (1 - Dice) retention curve
(lower is better):

* ``rauc`` per (measure, aggregation): the model's ranking;
* ``rauc_random`` and ``rauc_oracle`` per prediction model (``measure=None``): the expectation
  over random rankings, ``(1 - mean Dice) / 2``, and the best cases retained first.

The error at retained fraction k/N is the summed risk of the k retained cases over N, i.e. the
generalized risk at coverage k/N, so ``rauc`` equals the failure-detection task's AUGRC (risk
1 - Dice), and the curve is the generalized-risk-coverage curve of the report.
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
