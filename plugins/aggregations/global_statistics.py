"""Whole-map statistics of Aggrigator (Karg et al., CVPR 2026): max, std, geometric and harmonic
mean.

Where they depart from Aggrigator (negative values): docs/design-rationale.md,
"Aggrigator's aggregations".
"""

from __future__ import annotations

import torch

from values_seg import hookimpl
from values_seg.components.aggregation import Aggregation, as_map


def _flat(maps: torch.Tensor) -> torch.Tensor:
    return maps.reshape(len(maps), -1).double()


def _non_negative(u: torch.Tensor, name: str) -> None:
    if bool((u < 0).any()):
        raise ValueError(f"{name} aggregation: the map has negative values (min {float(u.min()):g}); "
                         f"the {name.replace('_', ' ')} is defined for non-negative uncertainty only")


class _Stack(Aggregation):
    """A parameterless statistic of the whole map, computed for a stack ``[M, N]`` in float64."""

    @staticmethod
    def statistic(u: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def __call__(self, umap, prediction=None) -> float:
        return self.score_many([self], as_map(umap, f"{self.name} aggregation")[None])[0]

    @classmethod
    def score_many(cls, instances, maps, prediction=None):
        return cls.statistic(_flat(maps)).tolist()


class MaxAggregation(_Stack):
    """The largest uncertainty of the map."""

    name = "max"
    label = "Max"

    @staticmethod
    def statistic(u):
        return u.amax(dim=1)


class StdAggregation(_Stack):
    """The (population, ddof 0) standard deviation of the map's values."""

    name = "std"
    label = "Std"

    @staticmethod
    def statistic(u):
        return torch.std(u, dim=1, correction=0)


class GeometricMeanAggregation(_Stack):
    """exp(mean(log u)) over all pixels (0 where any pixel is 0)."""

    name = "geometric_mean"
    label = "Geo mean"

    @staticmethod
    def statistic(u):
        _non_negative(u, "geometric_mean")
        return torch.exp(torch.log(u).mean(dim=1))  # log 0 = -inf -> exp(-inf) = 0


class HarmonicMeanAggregation(_Stack):
    """N / sum(1/u) over all pixels (0 where any pixel is 0)."""

    name = "harmonic_mean"
    label = "Harm mean"

    @staticmethod
    def statistic(u):
        _non_negative(u, "harmonic_mean")
        zero = (u == 0).any(dim=1)
        out = u.shape[1] / (1.0 / u.masked_fill(u == 0, 1.0)).sum(dim=1)
        return out.masked_fill(zero, 0.0)


@hookimpl
def values_seg_aggregations():
    return [MaxAggregation, StdAggregation, GeometricMeanAggregation, HarmonicMeanAggregation]
