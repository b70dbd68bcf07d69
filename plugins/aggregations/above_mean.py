"""Above-threshold and above-quantile means of Aggrigator (Karg et al., CVPR 2026).

The definitions: docs/design-rationale.md, "Aggrigator's aggregations".
"""

from __future__ import annotations

from typing import Annotated

import torch

from values_seg import hookimpl
from values_seg.components.aggregation import Aggregation, as_map, as_prediction
from values_seg.params import Range
from values_seg_plugins.aggregations.threshold import at_or_above_mean


def quantile_mean(u: torch.Tensor, q: torch.Tensor) -> list[float]:
    """Per row of ``u [M, N]`` (float64), the mean of the values at or above its ``q[m]``-quantile."""
    threshold = torch.quantile(u, q, dim=1).diagonal() if len(q) > 1 else torch.quantile(u, q[0], dim=1)
    selected = u >= threshold[:, None]
    return ((u * selected).sum(dim=1) / selected.sum(dim=1)).tolist()


class AboveThresholdMeanAggregation(Aggregation):
    """Mean of the uncertainties at or above the fixed threshold `t` (0 where none)."""

    name = "above_threshold_mean"
    label = "Above t"

    def __init__(self, t: float = 0.5):
        self.t = t

    def __call__(self, umap, prediction=None) -> float:
        return self.score_many([self], as_map(umap, "above_threshold_mean aggregation")[None])[0]

    @classmethod
    def score_many(cls, instances, maps, prediction=None):
        return at_or_above_mean(maps.reshape(len(maps), -1), [inst.t for inst in instances])


class AboveQuantileMeanAggregation(Aggregation):
    """Mean of the uncertainties at or above the map's own q-quantile."""

    name = "above_quantile_mean"
    label = "Above q"

    def __init__(self, q: Annotated[float, Range(0.0, 1.0)] = 0.9):
        self.q = q

    def __call__(self, umap, prediction=None) -> float:
        return self.score_many([self], as_map(umap, "above_quantile_mean aggregation")[None])[0]

    @classmethod
    def score_many(cls, instances, maps, prediction=None):
        u = maps.reshape(len(maps), -1).double()
        qs = {inst.q for inst in instances}
        q = torch.tensor([instances[0].q] if len(qs) == 1 else [inst.q for inst in instances], dtype=torch.float64)
        return quantile_mean(u, q)


class AboveQuantileMeanFgRatioAggregation(Aggregation):
    """Mean of the uncertainties at or above the (1 - predicted foreground ratio)-quantile."""

    name = "above_quantile_mean_fg_ratio"
    label = "Above q(FG)"
    needs_prediction = True
    #: the quantile follows the predicted foreground (as ``threshold``): not for data whose every
    #: class is an object
    needs_background = True

    def __call__(self, umap, prediction=None) -> float:
        u = as_map(umap, "above_quantile_mean_fg_ratio aggregation")
        return self.score_many([self], u[None], prediction=prediction)[0]

    @classmethod
    def score_many(cls, instances, maps, prediction=None):
        labels = as_prediction(prediction, tuple(maps.shape[1:]), "above_quantile_mean_fg_ratio aggregation")
        ratio = torch.count_nonzero(labels).item() / labels.numel()
        return quantile_mean(maps.reshape(len(maps), -1).double(), torch.tensor([1.0 - ratio], dtype=torch.float64))


@hookimpl
def values_seg_aggregations():
    return [AboveThresholdMeanAggregation, AboveQuantileMeanAggregation, AboveQuantileMeanFgRatioAggregation]
