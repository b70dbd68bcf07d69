"""Out-of-distribution detection (paper appendix A.2): image-level ranking of OoD vs i.i.d. cases.

Rows per (measure, aggregation), ``split="all"`` (OoD = positive class, ranked by the aggregated uncertainty):
``auroc``, ``auprc`` (higher is better), ``fpr_at_95_tpr`` (lower); no row without both i.i.d. and OoD test
cases. The bootstrap resamples the two classes separately (stratified), so every resample has both.
"""

from __future__ import annotations

from functools import partial

from values_seg import hookimpl
from values_seg.statistics import batched
from values_seg.components.task import CaseStatistic, CaseStatisticTask, EvaluationResult, Metric, Reading, Support

from ._common import case_ids, floats, has_both_classes, is_ood, score_groups

#: metric name -> batched metric ``(indices, is_ood, uncertainty) -> [B]`` (= values_seg.metrics' one per row)
#: What a ranking of OoD against i.i.d. cases needs to mean anything (values_seg.runner.support): 3 cases of each
#: class (a perfect separation by chance: 1/C(6, 3) = 0.05) and scores that are not all tied.
SUPPORT = Support(min_per_class=3, varies=("score",))
RANKING = {"auroc": batched.auroc, "auprc": batched.auprc, "fpr_at_95_tpr": batched.fpr_at_95_tpr}


class OodDetectionTask(CaseStatisticTask):
    """OoD detection: AUROC, AUPRC and FPR@95%TPR of the aggregated uncertainty over all test cases."""

    name = "ood_detection"
    label = "OoD-D"
    metrics = (
        Metric("auroc", "higher", "AUROC", splits=("all",), primary=True, support=SUPPORT,
               reading=Reading(separation_role="EU")),
        Metric("auprc", "higher", "AUPRC", splits=("all",), support=SUPPORT, reading=Reading(table=False)),
        Metric("fpr_at_95_tpr", "lower", "FPR@95%TPR", splits=("all",), support=SUPPORT, reading=Reading(table=False)),
    )
    # AU measures are not suited to detect a distribution shift; their rows are still computed
    # (the report decides what to exclude), this only documents suitability.
    uncertainty_types = ("PU", "EU")

    def statistics(self, result: EvaluationResult):
        for (measure, aggregation), rows in score_groups(result):
            labels = is_ood(rows)
            if not has_both_classes(labels):
                continue
            ids, scores = case_ids(rows), floats(rows, "score")
            for metric, fn in RANKING.items():
                yield CaseStatistic(metric, "all", ids, partial(fn, is_ood=labels, uncertainty=scores),
                                    measure, aggregation)


@hookimpl
def values_seg_tasks():
    return [OodDetectionTask]
