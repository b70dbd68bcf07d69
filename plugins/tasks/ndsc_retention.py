"""Voxel-level retention after Shifts 2.0 (appendix C.2.1 and Table 11): normalised Dice and the area
under its error-retention curve, per case from the quantities ``ndsc`` and ``ndsc_rauc``. How they are
computed (raters, ignored pixels, data without a background class) and the rows:
docs/design-rationale.md, "nDSC-retention task".
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
