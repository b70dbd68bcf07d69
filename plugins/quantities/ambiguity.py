"""Per-case quantities of ambiguity modeling (appendix A.6): GED (eq. 14) and NCC (eq. 12-13)."""

from __future__ import annotations

import numpy as np

from values_seg import hookimpl, metrics
from values_seg.components.quantity import Quantity


class GED(Quantity):
    """Generalised energy distance (d = 1 - Dice) between the argmax of each sample and the raters."""

    name = "ged"
    label = "GED"
    needs = ("samples", "references")

    def compute(self, case, fitted=None):
        return float(metrics.ged(case.sample_labels, case.raters.numpy(), num_classes=case.num_classes,
                                 ignore_index=case.ignore_index, background=case.background))


class NCC(Quantity):
    """Per measure, the NCC of its map with the raters' per-pixel variance (the exact reference
    variance where the data set knows it), over the pixels no rater ignores; NaN when either is constant."""

    name = "ncc"
    label = "NCC"
    needs = ("maps", "prediction", "references")
    per_measure = True

    def compute(self, case, fitted=None):
        if case.reference_variance is None:
            variance = metrics.rater_variance(case.raters.numpy(), num_classes=case.num_classes,
                                              ignore_index=case.ignore_index)
        else:
            variance = np.asarray(case.reference_variance, dtype=np.float64)
        _, n_valid = case.agreement()
        scored = None if n_valid is None else (n_valid == len(case.raters)).numpy()
        return metrics.ncc_many(variance, case.maps.numpy(), mask=scored)


@hookimpl
def values_seg_quantities():
    return [GED, NCC]
