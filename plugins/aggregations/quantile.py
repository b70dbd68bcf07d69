"""Quantile aggregation: a high percentile of the map, robust to a few extreme pixels."""

from __future__ import annotations

import numpy as np

from values_seg import hookimpl
from values_seg.components.aggregation import Aggregation, as_map


class QuantileAggregation(Aggregation):
    """The q-quantile of the uncertainty map (linear interpolation; q = 0.95 by default)."""

    name = "quantile"
    label = "Quantile"

    def __init__(self, q: float = 0.95):
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile aggregation: q must lie in [0, 1], got {q}")
        self.q = q

    def __call__(self, umap, prediction=None) -> float:
        return float(np.quantile(as_map(umap, "quantile aggregation").double().reshape(-1).numpy(), self.q))


@hookimpl
def values_seg_aggregations():
    return [QuantileAggregation]
