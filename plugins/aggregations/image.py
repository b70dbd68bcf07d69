"""Image-level aggregation: sum or mean of the whole map (paper section 4.2, appendix F.1)."""

from __future__ import annotations

from typing import Literal

from values_seg import hookimpl
from values_seg.aggregation import Aggregation, as_map


class ImageAggregation(Aggregation):
    """Sum (or mean) of the uncertainty over all pixels of the image."""

    name = "image"

    def __init__(self, reduction: Literal["sum", "mean"] = "sum"):
        self.reduction = reduction

    def __call__(self, umap, prediction=None) -> float:
        u = as_map(umap, "image aggregation").double()
        return float(u.sum() if self.reduction == "sum" else u.mean())


@hookimpl
def values_seg_aggregations():
    return [ImageAggregation]
