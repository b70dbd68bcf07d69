"""Out-of-distribution detection (paper appendix A.2): image-level ranking of OoD vs i.i.d. cases.

Rows per (measure, aggregation), ``split="all"`` (all test cases, OoD = positive class, the
aggregated uncertainty = the ranking score): ``auroc`` and ``auprc`` (higher is better) and
``fpr_at_95_tpr`` (lower is better). Without both i.i.d. and OoD test cases the metrics are
undefined and no row is emitted (e.g. a data set without a shift).
"""

from __future__ import annotations

from values_seg import hookimpl, metrics
from values_seg.task import EvaluationResult, Metric, Task, row

from ._common import has_both_classes, is_ood, score_groups

#: metric name -> metric function ``(is_ood, uncertainty) -> float``
RANKING = {"auroc": metrics.auroc, "auprc": metrics.auprc, "fpr_at_95_tpr": metrics.fpr_at_95_tpr}


class OodDetectionTask(Task):
    """OoD detection: AUROC, AUPRC and FPR@95%TPR of the aggregated uncertainty over all test cases."""

    name = "ood_detection"
    label = "OoD-D"
    metrics = (
        Metric("auroc", "higher", "AUROC", splits=("all",), primary=True),
        Metric("auprc", "higher", "AUPRC", splits=("all",), table=False),
        Metric("fpr_at_95_tpr", "lower", "FPR@95%TPR", splits=("all",), table=False),
    )
    # AU measures are not suited to detect a distribution shift; their rows are still computed
    # (the report decides what to exclude), this only documents suitability.
    uncertainty_types = ("PU", "EU")
    requires = ("test",)

    def score(self, result: EvaluationResult) -> list[dict]:
        out = []
        for (measure, aggregation), rows in score_groups(result):
            labels = is_ood(rows)
            if not has_both_classes(labels):
                continue
            scores = rows["score"].to_numpy(dtype=float)
            for metric, fn in RANKING.items():
                out.append(row(self.name, metric, "all", fn(labels, scores), measure, aggregation))
        return out


@hookimpl
def values_seg_tasks():
    return [OodDetectionTask]
