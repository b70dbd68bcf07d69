"""Lesion-F1 retention (Shifts 1.0, section 2 and appendix A, with the TP lesions as the acceptable
predictions): reject the most uncertain predicted lesions step by step and track the lesion F1 of
those kept (:func:`values_seg.metrics.lesion.lesion_f1_retention`; a rejected TP is a missed lesion).

Rows per measure and lesion-scale aggregation, ``split`` in ``"iid"`` / ``"ood"``, lesions pooled over
the subset's cases, per rater and then the mean over the raters (higher is better):

* ``lesion_f1_auc``: the area under the F1-retention curve (F1-AUC);
* ``lesion_f1_at_95``: the F1 at 95 % of the lesions kept (F1@95 %);
* ``case_f1_auc`` / ``case_f1_at_95``: the same over whole cases, rejected by their patient-scale
  score (the maximum of their lesions' scores; :func:`values_seg.metrics.lesion.case_f1_retention`:
  a rejected case's lesions are rejected, the pooled lesion F1 of the kept cases' lesions tracked).

The random and ideal curves are in the report's lesion section. No row without a predicted lesion.
"""

from __future__ import annotations

from functools import partial

import pandas as pd

from values_seg import hookimpl
from values_seg.components.task import CaseStatistic, CaseStatisticTask, EvaluationResult, Metric

from ._lesion import (RETENTION_COLUMNS, CasePooled, Pooled, case_retention_rows, pooled_statistic, records,
                      retention_rows, scored)


class LesionRetentionTask(CaseStatisticTask):
    """F1-AUC and F1@95 % of the lesion-F1 retention curve, per measure and lesion aggregation."""

    name = "lesion_retention"
    label = "Retention (lesion)"
    metrics = (
        Metric("lesion_f1_auc", "higher", "Lesion F1-AUC", primary=True),
        Metric("lesion_f1_at_95", "higher", "Lesion F1@95%"),
        Metric("case_f1_auc", "higher", "Case F1-AUC",
               note="whole cases rejected by the maximum of their lesions' scores; pooled lesion F1 tracked."),
        Metric("case_f1_at_95", "higher", "Case F1@95%"),
    )
    consumes = ("lesions",)

    def statistics(self, result: EvaluationResult):
        lesions = records(result)
        if lesions is None:
            return
        for subset, ids, measure, aggregation, cases in scored(result, lesions):
            if not sum(c.scores.size for c in cases):
                continue
            pooled, by_case = Pooled(cases), CasePooled(cases)
            for metric, statistic in (("lesion_f1_auc", "f1_auc"), ("lesion_f1_at_95", "f1_at_95")):
                yield CaseStatistic(metric, subset, ids, partial(pooled_statistic, pooled, statistic=statistic),
                                    measure, aggregation)
            for metric, statistic in (("case_f1_auc", "f1_auc"), ("case_f1_at_95", "f1_at_95")):
                yield CaseStatistic(metric, subset, ids, partial(by_case.per_rater, statistic=statistic),
                                    measure, aggregation)

    def curves(self, result: EvaluationResult) -> pd.DataFrame:
        """The lesion-F1 retention curves (``curve`` "lesion_f1_retention" over the lesions,
        "case_f1_retention" over whole cases) of the model's ranking, a random and the ideal one, per
        measure, lesion aggregation and subset. Columns: :data:`RETENTION_COLUMNS`."""
        lesions = records(result)
        groups = scored(result, lesions) if lesions is not None else ()
        rows = [row for subset, _, measure, aggregation, cases in groups if sum(c.scores.size for c in cases)
                for rows_of in (retention_rows, case_retention_rows)
                for row in rows_of(cases, measure, aggregation, subset)]
        return pd.DataFrame(rows, columns=RETENTION_COLUMNS)


@hookimpl
def values_seg_tasks():
    return [LesionRetentionTask]
