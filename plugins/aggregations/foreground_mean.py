"""Foreground-mean aggregation: the mean uncertainty over the predicted foreground.

Normalising by the predicted object size removes the size bias of the image sum (appendix F.1).
"""

from __future__ import annotations

from values_seg import hookimpl
from values_seg.components.aggregation import Aggregation, as_map, as_prediction, region_mean


class ForegroundMeanAggregation(Aggregation):
    """Mean uncertainty over the predicted foreground (image mean, or `empty_value`, if none)."""

    name = "foreground_mean"
    label = "FG mean"
    needs_prediction = True

    def __init__(self, empty_value: float | None = None):
        self.empty_value = empty_value

    def __call__(self, umap, prediction=None) -> float:
        u = as_map(umap, "foreground_mean aggregation").double()
        foreground = as_prediction(prediction, u.shape, "foreground_mean aggregation") > 0
        return region_mean(u, foreground, self.empty_value)


@hookimpl
def values_seg_aggregations():
    return [ForegroundMeanAggregation]
