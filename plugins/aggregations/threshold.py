"""Threshold-level aggregation: mean of the values at or above a fitted threshold (appendix F.2).

``fit`` sets alpha = mean predicted foreground ratio over the validation cases (eq. 21) and the
threshold = the (1 - alpha) quantile of all validation uncertainty values (eq. 22).
"""

from __future__ import annotations

import numpy as np
import torch

from values_seg import hookimpl
from values_seg.aggregation import Aggregation, as_map


class ThresholdAggregation(Aggregation):
    """Mean of the uncertainties at or above a threshold fitted on validation maps (appendix F.2)."""

    name = "threshold"
    label = "Thresh"

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
        u = as_map(umap, "threshold aggregation").double()
        selected = u[u >= threshold]
        return float(selected.mean()) if selected.numel() else 0.0

    @classmethod
    def score_many(cls, instances, maps, prediction=None):
        thresholds = torch.tensor([inst._check_fitted() for inst in instances], dtype=torch.float64)
        u = maps.double().reshape(len(maps), -1)
        selected = u >= thresholds[:, None]
        count = selected.sum(dim=1)
        total = torch.where(selected, u, torch.zeros((), dtype=u.dtype)).sum(dim=1)
        return torch.where(count > 0, total / count.clamp_min(1), torch.zeros_like(total)).tolist()


@hookimpl
def values_seg_aggregations():
    return [ThresholdAggregation]
