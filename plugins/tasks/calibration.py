"""Calibration (paper appendix A.5, eq. 11): pixel-level ACE of Platt-scaled confidences.

Rows per measure (``aggregation=None``: calibration is pixel level), ``split`` in
``"iid"``/``"ood"``: ``ace`` (lower is better) from the accumulated calibration bins
``result.calibration[(measure, subset)]``, whose confidences come from Platt scaling fitted on the
validation split. A missing key or bins without any pixel yield no row.
"""

from __future__ import annotations

from values_seg import hookimpl, metrics
from values_seg.task import EvaluationResult, Metric, Task, row

from ._common import SUBSETS


class CalibrationTask(Task):
    """Calibration: ACE (20 equal-width bins, each non-empty bin weighted equally) per measure, i.i.d. and OoD."""

    name = "calibration"
    label = "Calibration"
    metrics = (Metric("ace", "lower", "ACE", per_aggregation=False, primary=True),)
    uncertainty_types = ("PU", "AU", "EU")
    requires = ("test", "calibration")

    def score(self, result: EvaluationResult) -> list[dict]:
        out = []
        calibration = result.calibration or {}
        for measure in sorted({m for m, _ in calibration}):
            for subset in SUBSETS:
                bins = calibration.get((measure, subset))
                if bins is None or not (bins.count > 0).any():
                    continue
                out.append(row(self.name, "ace", subset, metrics.ace_from_bins(bins), measure))
        return out


@hookimpl
def values_seg_tasks():
    return [CalibrationTask]
