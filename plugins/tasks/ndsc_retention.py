"""Voxel-level retention after Shifts 2.0 (``reference/000_f03f13e6f88adbdb.txt``, appendix C.2.1
and Table 11): normalised Dice and the area under its error-retention curve.

Per test case, the fused evaluation (quantities ``"ndsc"`` and ``"ndsc_rauc"``) computes the nDSC
(:func:`values_seg.metrics.ndsc`, reference lesion load ``evaluation.ndsc_r``, default 0.001) of
the predicted foreground (every class but background) against each rater, and per measure the
R-AUC of the voxel-level nDSC retention curve (:func:`values_seg.metrics.ndsc_rauc`: the voxels
of lowest uncertainty keep the prediction, the others take the rater's label, retained fractions
log-spaced), each averaged over the raters; a rater's ignored pixels (the data set's
``ignore_index``) are left out for that rater. A data set without a background class
(``background=None``, GTA5/Cityscapes) is scored over all its classes: the nDSC is the mean over
the classes present in either map of each class's nDSC against the rest, at the same ``r``
(:func:`values_seg.metrics.class_ndsc`; Shifts defines it for binary lesion masks), and the
R-AUC that mean's. Rows, ``split`` in ``"iid"``/``"ood"``, the means over
the subset's cases ("R-AUC is calculated over all voxels in each image" and averaged, as Shifts):

* ``ndsc`` per prediction model (``measure=None``; higher is better);
* ``ndsc_rauc`` per measure (``aggregation=None``: voxel level; lower is better).

Without the per-case values (an evaluation without the quantities) or an empty subset, no row.
"""

from __future__ import annotations

from functools import partial

from values_seg import hookimpl
from values_seg.statistics import batched
from values_seg.components.task import CaseStatistic, CaseStatisticTask, EvaluationResult, Metric

from ._common import SUBSETS, case_ids, floats


class NdscRetentionTask(CaseStatisticTask):
    """Voxel-level retention (Shifts): mean nDSC per model and mean R-AUC of the nDSC retention curve per measure, i.i.d. and OoD."""

    name = "ndsc_retention"
    label = "Retention (voxel)"
    metrics = (
        Metric("ndsc", "higher", "nDSC", per_measure=False),
        Metric("ndsc_rauc", "lower", "nDSC R-AUC", per_aggregation=False, primary=True),
    )
    uncertainty_types = ("PU", "AU", "EU")
    consumes = ("ndsc", "ndsc_rauc")

    def statistics(self, result: EvaluationResult):
        for subset in SUBSETS:
            cases = result.test_cases(subset)
            if cases.empty or "ndsc" not in cases:
                continue
            table = result.measure_values("ndsc_rauc", subset)
            if not table.empty:
                for measure, rows in table.groupby("measure", sort=True):
                    rows = rows.sort_values("case_id")
                    yield CaseStatistic("ndsc_rauc", subset, case_ids(rows),
                                        partial(batched.mean, values=floats(rows, "ndsc_rauc"), ignore_nan=True),
                                        str(measure))
            yield CaseStatistic("ndsc", subset, case_ids(cases),
                                partial(batched.mean, values=floats(cases, "ndsc"), ignore_nan=True))


@hookimpl
def values_seg_tasks():
    return [NdscRetentionTask]
