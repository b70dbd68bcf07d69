"""Lesion-scale segmentation and false-positive lesion detection (Shifts 2.0, appendix C.2.2).

From the quantity ``lesions``: the lesion F1 per prediction model and the FP-lesion AUROC / AUPRC per
measure and lesion-scale aggregation (docs/design-rationale.md, "Lesion tasks").
"""

from __future__ import annotations

from functools import partial

import pandas as pd

from values_seg import hookimpl
from values_seg.components.task import CaseStatistic, CaseStatisticTask, EvaluationResult, Metric

from ._lesion import SCORE_COLUMNS, Pooled, case_f1, pooled_statistic, records, score_rows, scored, subsets


class LesionDetectionTask(CaseStatisticTask):
    """Lesion F1 per model; AUROC / AUPRC of the lesion scores detecting false-positive lesions, per measure and lesion aggregation."""

    name = "lesion_detection"
    label = "Lesion FP-D"
    metrics = (
        Metric("lesion_f1", "higher", "Lesion F1", per_measure=False),
        Metric("lesion_fp_auroc", "higher", "FP-lesion AUROC", primary=True),
        Metric("lesion_fp_auprc", "higher", "FP-lesion AUPRC",
               note="random ranking: the share of FP lesions among the predicted lesions."),
    )
    consumes = ("lesions",)

    def statistics(self, result: EvaluationResult):
        lesions = records(result)
        if lesions is None:
            return
        pairs = lesions.scores[["measure", "aggregation"]].drop_duplicates().sort_values(["measure", "aggregation"])
        for subset, ids in subsets(result):
            yield CaseStatistic("lesion_f1", subset, ids, partial(case_f1, lesions.per_case(ids)))
            for measure, aggregation in pairs.itertuples(index=False):
                cases = lesions.per_case(ids, measure, aggregation)
                pooled = Pooled(cases)
                for metric, statistic in (("lesion_fp_auroc", "fp_auroc"), ("lesion_fp_auprc", "fp_auprc")):
                    yield CaseStatistic(metric, subset, ids, partial(pooled_statistic, pooled, statistic=statistic),
                                        str(measure), str(aggregation))

    def curves(self, result: EvaluationResult) -> pd.DataFrame:
        """Per predicted lesion (``curve`` "lesion_scores"), its score and TP share over the raters, per
        measure, lesion aggregation and subset: what the FP-lesion AUROC ranks. Columns: :data:`SCORE_COLUMNS`."""
        lesions = records(result)
        groups = scored(result, lesions) if lesions is not None else ()
        rows = [row for subset, _, measure, aggregation, cases in groups
                for row in score_rows(cases, measure, aggregation, subset)]
        return pd.DataFrame(rows, columns=SCORE_COLUMNS)


@hookimpl
def values_seg_tasks():
    return [LesionDetectionTask]
