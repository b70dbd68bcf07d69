"""Per-case quantities of voxel-level retention after Shifts 2.0 (appendix C.2.1, Table 11): the
nDSC of the prediction and, per measure, the area under its nDSC retention curve, at the reference
lesion load ``evaluation.ndsc_r`` (default 0.001)."""

from __future__ import annotations

from values_seg import hookimpl
from values_seg.evaluation.per_case import case_ndsc, case_ndsc_rauc
from values_seg.components.quantity import Quantity


def _r(case) -> float:
    return case.settings.ndsc_r


class NDSC(Quantity):
    """nDSC of the predicted foreground against each rater, averaged over the raters."""

    name = "ndsc"
    label = "nDSC"
    needs = ("prediction", "references")

    def compute(self, case, fitted=None):
        return case_ndsc(case.prediction.numpy(), case.raters.numpy(), _r(case), case.ignore_index, case.background)


class NDSCRetentionArea(Quantity):
    """Per measure, the R-AUC of the voxel-level nDSC retention curve of its map, averaged over the raters."""

    name = "ndsc_rauc"
    label = "nDSC R-AUC"
    needs = ("maps", "prediction", "references")
    per_measure = True

    def compute(self, case, fitted=None):
        return case_ndsc_rauc(case.prediction.numpy(), case.raters.numpy(), case.maps.numpy(), _r(case),
                              case.ignore_index, case.background)


@hookimpl
def values_seg_quantities():
    return [NDSC, NDSCRetentionArea]
