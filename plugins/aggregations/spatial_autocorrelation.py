"""Global spatial autocorrelation of the map: Moran's I and Geary's C (Aggrigator, Karg et al., CVPR
2026).

The formulas, and the value of a constant map: docs/design-rationale.md,
"Aggrigator's aggregations".
"""

from __future__ import annotations

import torch

from values_seg import hookimpl
from values_seg.components.aggregation import Aggregation, as_map
from values_seg.orientation import LOWER_IS_UNCERTAIN


def _pairs(maps: torch.Tensor):
    """Per spatial axis of the stack ``[M, *spatial]``: the two views of its neighbouring pairs."""
    for axis in range(1, maps.ndim):
        n = maps.shape[axis]
        if n > 1:
            yield maps.narrow(axis, 0, n - 1), maps.narrow(axis, 1, n - 1)


def autocorrelation(maps: torch.Tensor, statistic: str) -> list[float]:
    """Moran's I (``"moran"``) or Geary's C (``"geary"``) of each map of the stack ``[M, *spatial]``."""
    u = maps.double()
    M, N = u.shape[0], u[0].numel()
    flat = u.reshape(M, -1)
    z = u - flat.mean(dim=1).reshape(M, *([1] * (u.ndim - 1)))
    denominator = z.reshape(M, -1).square().sum(dim=1)
    s0 = 2.0 * sum(a[0].numel() for a, _ in _pairs(u))
    numerator = torch.zeros(M, dtype=torch.float64)
    source = z if statistic == "moran" else u
    for a, b in _pairs(source):
        term = a * b if statistic == "moran" else (a - b).square()
        numerator += 2.0 * term.reshape(M, -1).sum(dim=1)
    if statistic == "moran":
        value = N / max(s0, 1.0) * numerator / denominator
    else:
        value = (N - 1) * numerator / (2.0 * max(s0, 1.0) * denominator)
    constant = flat.amax(dim=1) == flat.amin(dim=1)
    return value.masked_fill(constant, 1.0).tolist()


class MoransIAggregation(Aggregation):
    """Moran's I of the map (rook neighbours; 1 = clustered, 0 = random, -1 = checkerboard)."""

    name = "morans_i"
    label = "Moran's I"
    statistic = "moran"

    def __call__(self, umap, prediction=None) -> float:
        return autocorrelation(as_map(umap, f"{self.name} aggregation")[None], self.statistic)[0]

    @classmethod
    def score_many(cls, instances, maps, prediction=None):
        return autocorrelation(maps, cls.statistic)


class GearysCAggregation(MoransIAggregation):
    """Geary's C of the map (rook neighbours; 0 = clustered, 1 = random): inverted against Moran's I."""

    name = "gearys_c"
    label = "Geary's C"
    statistic = "geary"
    orientation = LOWER_IS_UNCERTAIN  # low where Moran's I is high


@hookimpl
def values_seg_aggregations():
    return [MoransIAggregation, GearysCAggregation]
