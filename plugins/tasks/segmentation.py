"""Segmentation performance (paper appendix A.1): mean Dice of the test cases, i.i.d. and OoD.

Rows ``dice`` per split ``"iid"``/``"ood"`` (``measure``, ``aggregation`` None): the mean over the subset's
cases of the per-case Dice (eq. 3: mean over raters of Dice(mean prediction, rater)), non-finite values
left out; an empty subset yields no row.
"""

from __future__ import annotations

from functools import partial

from values_seg import hookimpl
from values_seg.statistics import batched
from values_seg.components.task import CaseStatistic, CaseStatisticTask, EvaluationResult, Metric

from ._common import SUBSETS, case_ids, floats


class SegmentationTask(CaseStatisticTask):
    """Segmentation performance: mean Dice (eq. 3) on the i.i.d. and the OoD test cases."""

    name = "segmentation"
    label = "Seg. Performance"
    metrics = (Metric("dice", "higher", "Dice", per_measure=False, primary=True),)
    uncertainty_types = ("PU", "AU", "EU")  # independent of the measure
    consumes = ("dice",)

    def statistics(self, result: EvaluationResult):
        for subset in SUBSETS:
            cases = result.test_cases(subset)
            if not cases.empty:
                yield CaseStatistic("dice", subset, case_ids(cases),
                                    partial(batched.mean, values=floats(cases, "dice"), ignore_nan=True))


@hookimpl
def values_seg_tasks():
    return [SegmentationTask]
