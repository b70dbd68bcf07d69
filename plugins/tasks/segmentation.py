"""Segmentation performance (paper appendix A.1): mean Dice of the test cases, i.i.d. and OoD.

Rows: ``metric="dice"``, ``split`` in ``"iid"``/``"ood"``, ``measure=None``,
``aggregation=None``; the value is the mean over the subset's cases of the per-case Dice (eq. 3:
mean over raters of Dice(mean prediction, rater)). An empty subset yields no row.
"""

from __future__ import annotations

from values_seg import hookimpl
from values_seg.task import EvaluationResult, Metric, Task, row

from ._common import SUBSETS, finite_mean


class SegmentationTask(Task):
    """Segmentation performance: mean Dice (eq. 3) on the i.i.d. and the OoD test cases."""

    name = "segmentation"
    label = "Seg. Performance"
    metrics = (Metric("dice", "higher", "Dice", per_measure=False, per_aggregation=False, primary=True),)
    uncertainty_types = ("PU", "AU", "EU")  # independent of the measure
    requires = ("test",)

    def score(self, result: EvaluationResult) -> list[dict]:
        rows = []
        for subset in SUBSETS:
            value = finite_mean(result.test_cases(subset)["dice"].to_numpy(dtype=float))
            if value is not None:
                rows.append(row(self.name, "dice", subset, value))
        return rows


@hookimpl
def values_seg_tasks():
    return [SegmentationTask]
