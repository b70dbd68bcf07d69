"""Image-level aggregation: sum or mean of the whole map (paper section 4.2, appendix F.1)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch

from values_seg import hookimpl
from values_seg.numerics import kernels
from values_seg.components.aggregation import Aggregation, as_map


class ImageAggregation(Aggregation):
    """Sum (or mean) of the uncertainty over all pixels of the image."""

    name = "image"
    label = "Image"

    def __init__(self, reduction: Literal["sum", "mean"] = "sum"):
        self.reduction = reduction

    def __call__(self, umap, prediction=None) -> float:
        u = as_map(umap, "image aggregation")
        total = float(u.double().sum())  # accumulated in float64 (as score_many)
        return total if self.reduction == "sum" else total / u.numel()

    @classmethod
    def score_many(cls, instances, maps, prediction=None):
        u = maps.reshape(len(maps), -1)
        if u.device.type == "cpu" and u.dtype in (torch.float32, torch.float64):  # one compiled pass per map
            sums = kernels.row_sums(np.ascontiguousarray(u.detach().numpy())).tolist()
        else:
            sums = u.double().sum(dim=1).tolist()
        return [s if inst.reduction == "sum" else s / u.shape[1] for inst, s in zip(instances, sums)]


@hookimpl
def values_seg_aggregations():
    return [ImageAggregation]
