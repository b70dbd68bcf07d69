"""Threshold-level aggregation: mean of the values at or above a fitted threshold (appendix F.2).

``fit`` sets alpha = mean predicted foreground ratio over the validation cases (eq. 21) and the
threshold = the (1 - alpha) quantile of all validation uncertainty values (eq. 22).
"""

from __future__ import annotations

import numpy as np
import torch

from values_seg import hookimpl
from values_seg.numerics import kernels
from values_seg.components.aggregation import Aggregation, as_map


class ThresholdAggregation(Aggregation):
    """Mean of the uncertainties at or above a threshold fitted on validation maps (appendix F.2)."""

    name = "threshold"
    label = "Thresh"
    #: the threshold follows the predicted foreground ratio: not for data whose every class is an
    #: object (paper section 4.2: not on GTA5/Cityscapes)
    needs_background = True

    def __init__(self):
        self.threshold_: float | None = None
        self.foreground_ratio_: float | None = None

    def fit(self, maps, predictions) -> "ThresholdAggregation":
        maps, predictions = list(maps), list(predictions)
        if not maps or len(maps) != len(predictions):
            raise ValueError(
                f"threshold aggregation: fit needs one prediction per validation map, "
                f"got {len(maps)} maps and {len(predictions)} predictions"
            )
        ratios = []
        for i, (u, p) in enumerate(zip(maps, predictions)):
            u, p = as_map(u, "threshold aggregation fit"), torch.as_tensor(p)
            if tuple(u.shape) != tuple(p.shape):
                raise ValueError(f"threshold aggregation: map {i} has shape {tuple(u.shape)}, prediction {tuple(p.shape)}")
            ratios.append(float((p > 0).double().mean()))
        self.foreground_ratio_ = float(np.mean(ratios))
        values = np.concatenate([as_map(u).double().reshape(-1).numpy() for u in maps])
        self.threshold_ = float(np.quantile(values, 1.0 - self.foreground_ratio_))
        return self

    def _check_fitted(self) -> float:
        if self.threshold_ is None:
            raise ValueError("threshold aggregation is not fitted: call fit(val_maps, val_predictions) first")
        return self.threshold_

    def __call__(self, umap, prediction=None) -> float:
        threshold = self._check_fitted()
        u = as_map(umap, "threshold aggregation")
        return at_or_above_mean(u.reshape(1, -1), [threshold])[0]

    @classmethod
    def score_many(cls, instances, maps, prediction=None):
        return at_or_above_mean(maps.reshape(len(maps), -1), [inst._check_fitted() for inst in instances])


def at_or_above_mean(u: torch.Tensor, thresholds) -> list[float]:
    """Per row of ``u [M, N]``: the mean of the values ``>= thresholds[m]`` (0.0 where none), summed
    in float64 without a float64 copy. A float32 map is compared with the smallest float32 at or
    above the float64 threshold, which selects exactly the values at or above the threshold."""
    t = torch.tensor(thresholds, dtype=torch.float64)
    if u.dtype not in (torch.float32, torch.float64):
        u = u.double()
    if u.dtype == torch.float32:
        low = t.to(u.dtype)
        t = torch.where(low.double() < t, torch.nextafter(low, torch.tensor(float("inf"), dtype=u.dtype)), low)
    u, t = np.ascontiguousarray(u.detach().cpu().numpy()), t.to(u.dtype).numpy()
    total, count = kernels.sums_at_or_above(u, t)  # one compiled pass per row
    return np.where(count > 0, total / np.maximum(count, 1), 0.0).tolist()


@hookimpl
def values_seg_aggregations():
    return [ThresholdAggregation]
