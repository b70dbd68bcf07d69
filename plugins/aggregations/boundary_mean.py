"""Boundary-mean aggregation: the mean uncertainty in a band around the predicted boundary.

Segmentation failures and rater disagreement concentrate at object borders; this reads the
uncertainty only there. Boundary voxels have a face neighbour with another label; the band
adds every voxel within Chebyshev distance `width` of one.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from values_seg import hookimpl
from values_seg.components.aggregation import Aggregation, as_map, as_prediction, region_mean

_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}


def boundary_band(labels: torch.Tensor, width: int) -> torch.Tensor:
    """Boolean band of half-width ``width`` around label changes (any number of classes)."""
    edge = torch.zeros(labels.shape, dtype=torch.bool)
    for axis in range(labels.ndim):
        n = labels.shape[axis]
        change = labels.narrow(axis, 1, n - 1) != labels.narrow(axis, 0, n - 1)
        edge.narrow(axis, 1, n - 1).logical_or_(change)
        edge.narrow(axis, 0, n - 1).logical_or_(change)
    if width == 0 or labels.ndim not in _POOL:
        return edge
    pooled = _POOL[labels.ndim](edge[None, None].float(), kernel_size=2 * width + 1, stride=1, padding=width)
    return pooled[0, 0] > 0


class BoundaryMeanAggregation(Aggregation):
    """Mean uncertainty in a band of half-width `width` around the predicted object boundary."""

    name = "boundary_mean"
    label = "Bnd mean"
    needs_prediction = True

    def __init__(self, width: int = 2, empty_value: float | None = None):
        if width < 0:
            raise ValueError(f"boundary_mean aggregation: width must be >= 0, got {width}")
        self.width = width
        self.empty_value = empty_value

    def __call__(self, umap, prediction=None) -> float:
        u = as_map(umap, "boundary_mean aggregation").double()
        labels = as_prediction(prediction, u.shape, "boundary_mean aggregation")
        band = boundary_band(labels, self.width)
        return region_mean(u, band, self.empty_value)


@hookimpl
def values_seg_aggregations():
    return [BoundaryMeanAggregation]
