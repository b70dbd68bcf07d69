"""Failure detection (paper appendix A.3, eq. 4-8): rank cases by confidence to defer failures.

Rows per (measure, aggregation) and per subset (``split`` in ``"iid"``/``"ood"``, computed on
each separately): ``aurc`` and ``eaurc`` (lower is better) with the per-case risk
``1 - Dice`` (eq. 4, Dice of eq. 3) and the confidence ``-score`` (the negative aggregated
uncertainty). Any non-empty subset is scored (one case gives a defined AURC); an empty subset
yields no row.
"""

from __future__ import annotations

from values_seg import hookimpl, metrics
from values_seg.task import EvaluationResult, Metric, Task, row

from ._common import SUBSETS, score_groups, subset_rows


class FailureDetectionTask(Task):
    """Failure detection: AURC and E-AURC with risk 1 - Dice and confidence -uncertainty, i.i.d. and OoD."""

    name = "failure_detection"
    label = "Failure Detection"
    metrics = (Metric("aurc", "lower", "AURC", primary=True), Metric("eaurc", "lower", "E-AURC"))
    uncertainty_types = ("PU", "AU", "EU")
    requires = ("test",)

    def score(self, result: EvaluationResult) -> list[dict]:
        out = []
        for (measure, aggregation), rows in score_groups(result):
            for subset in SUBSETS:
                part = subset_rows(rows, subset)
                if part.empty:
                    continue
                risks = 1.0 - part["dice"].to_numpy(dtype=float)
                confidences = -part["score"].to_numpy(dtype=float)
                out.append(row(self.name, "aurc", subset, metrics.aurc(risks, confidences), measure, aggregation))
                out.append(row(self.name, "eaurc", subset, metrics.eaurc(risks, confidences), measure, aggregation))
        return out


@hookimpl
def values_seg_tasks():
    return [FailureDetectionTask]
