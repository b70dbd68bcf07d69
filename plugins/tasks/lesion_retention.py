"""Lesion-F1 retention (Shifts 1.0, section 2 and appendix A): reject the most uncertain predicted lesions
step by step and track the lesion F1 of those kept (:func:`values_seg.metrics.lesion.lesion_f1_retention`).
F1-AUC and F1@95 % over lesions and over whole cases: docs/design-rationale.md, "Lesion tasks".
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
