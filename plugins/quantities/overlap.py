"""Per-case quantities of the mean prediction against the raters: Dice (eq. 2-3) and the predicted fraction."""

from __future__ import annotations

import numpy as np

from values_seg import hookimpl, metrics
from values_seg.components.quantity import Quantity


class Dice(Quantity):
    """Mean over the raters of Dice(mean prediction, rater) (eq. 3), the background class left out."""

    name = "dice"
    needs = ("prediction", "references")

    def compute(self, case, fitted=None):
        per_rater = metrics.dice_over_raters(case.prediction.numpy(), case.raters.numpy(), num_classes=case.num_classes,
                                             ignore_index=case.ignore_index, background=case.background)
        return float(np.mean(per_rater))


class PredictedFraction(Quantity):
    """Share of the pixels the mean prediction labels as foreground (any class but 0)."""

    name = "predicted_fraction"
    needs = ("prediction",)

    def compute(self, case, fitted=None):
        prediction = case.prediction.numpy()
        return np.count_nonzero(prediction) / prediction.size


@hookimpl
def values_seg_quantities():
    return [Dice, PredictedFraction]
