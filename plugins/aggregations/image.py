"""Image-level aggregation: sum or mean of the whole map (paper section 4.2, appendix F.1)."""

from __future__ import annotations

from typing import Literal

from values_seg import hookimpl
from values_seg.aggregation import Aggregation, as_map


class ImageAggregation(Aggregation):
    """Sum (or mean) of the uncertainty over all pixels of the image."""

    name = "image"
    label = "Image"

    def __init__(self, reduction: Literal["sum", "mean"] = "sum"):
        self.reduction = reduction

    def __call__(self, umap, prediction=None) -> float:
        u = as_map(umap, "image aggregation").double()
        return float(u.sum() if self.reduction == "sum" else u.mean())


    @classmethod
    def score_many(cls, instances, maps, prediction=None):
        u = maps.double().reshape(len(maps), -1)
        sums, means = u.sum(dim=1).tolist(), u.mean(dim=1).tolist()
        return [s if inst.reduction == "sum" else m for inst, s, m in zip(instances, sums, means)]


@hookimpl
def values_seg_aggregations():
    return [ImageAggregation]
