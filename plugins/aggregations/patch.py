"""Patch-level aggregation: the maximum over sliding windows of the summed uncertainty.

Paper section 4.2: windows of side 10 per dimension (10^D pixels). Window sums come from a
summed-area table (one cumulative sum per axis), so the cost does not depend on the window size.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from values_seg import hookimpl
from values_seg.aggregation import Aggregation, as_map


class PatchLocation(NamedTuple):
    score: float
    start: tuple[int, ...]  # corner of the window with the highest sum
    size: tuple[int, ...]  # window side per dimension (clipped to the image)


def window_sums(umap: torch.Tensor, size: tuple[int, ...], batched: bool = False) -> torch.Tensor:
    """Sums over every fully contained window of ``size`` (valid positions only), in float64.

    With ``batched``, axis 0 indexes independent maps and ``size`` covers the other axes.
    """
    table = umap
    for axis, side in enumerate(size, start=int(batched)):
        table = table.cumsum(dim=axis, dtype=torch.float64)
        n = table.shape[axis]
        windows = table.narrow(axis, side - 1, n - side + 1).clone()  # sum of [k - side + 1, k]
        windows.narrow(axis, 1, n - side).sub_(table.narrow(axis, 0, n - side))
        table = windows
    return table


class PatchAggregation(Aggregation):
    """Maximum over all windows of side `size` (per dimension) of the summed uncertainty."""

    name = "patch"
    label = "Patch"

    def __init__(self, size: int = 10):
        if size < 1:
            raise ValueError(f"patch aggregation: size must be >= 1, got {size}")
        self.size = size

    def locate(self, umap) -> PatchLocation:
        """The highest window sum and where its window starts (first one on ties)."""
        u = as_map(umap, "patch aggregation")
        size = tuple(min(self.size, n) for n in u.shape)
        sums = window_sums(u, size)
        flat = int(torch.argmax(sums))
        start = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), sums.shape))
        return PatchLocation(float(sums.reshape(-1)[flat]), start, size)

    def __call__(self, umap, prediction=None) -> float:
        return self.locate(umap).score

    @classmethod
    def score_many(cls, instances, maps, prediction=None):
        sizes = {inst.size for inst in instances}
        if len(sizes) != 1:
            return super().score_many(instances, maps, prediction)
        side = sizes.pop()
        size = tuple(min(side, n) for n in maps.shape[1:])
        return window_sums(maps, size, batched=True).reshape(len(maps), -1).amax(dim=1).tolist()


@hookimpl
def values_seg_aggregations():
    return [PatchAggregation]
