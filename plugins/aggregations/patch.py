"""Patch-level aggregation: the maximum over sliding windows of the summed uncertainty (paper
section 4.2; docs/design-rationale.md, "The patch aggregation").
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from values_seg import hookimpl
from values_seg.numerics import kernels
from values_seg.components.aggregation import Aggregation, as_map


SLICE_RECURRENCE_MIN = 4096  # elements per slice from which prefix_sums loops over slices


class PatchLocation(NamedTuple):
    score: float
    start: tuple[int, ...]  # corner of the window with the highest sum
    size: tuple[int, ...]  # window side per dimension (clipped to the image)


def window_sums(umap: torch.Tensor, size: tuple[int, ...], batched: bool = False) -> torch.Tensor:
    """Sums over every fully contained window of ``size`` (valid positions only), in float64.

    With ``batched``, axis 0 indexes independent maps and ``size`` covers the other axes. Per
    axis, the prefix sums (with a leading zero) differenced at the window's side; the last
    (contiguous) axis first, where a cumulative sum is cheapest on the full-size map.
    """
    table = umap
    for axis, side in reversed(list(enumerate(size, start=int(batched)))):
        n = table.shape[axis]
        prefix = prefix_sums(table, axis)
        table = prefix.narrow(axis, side, n - side + 1) - prefix.narrow(axis, 0, n - side + 1)
    return table


def prefix_sums(x: torch.Tensor, axis: int) -> torch.Tensor:
    """Float64 cumulative sums of ``x`` along ``axis`` behind a leading zero (length ``n + 1``).

    Along an outer axis with large slices, a recurrence over the slices (each one contiguous-ish
    add) beats torch's cumulative sum along a strided axis ~3x on CPU; otherwise ``cumsum``.
    """
    n = x.shape[axis]
    shape = list(x.shape)
    shape[axis] = n + 1
    prefix = torch.empty(shape, dtype=torch.float64, device=x.device)
    prefix.select(axis, 0).zero_()
    if axis == x.ndim - 1 or x.numel() < SLICE_RECURRENCE_MIN * n or x.device.type != "cpu":
        torch.cumsum(x, dim=axis, dtype=torch.float64, out=prefix.narrow(axis, 1, n))
    else:
        for k in range(n):
            torch.add(prefix.select(axis, k), x.select(axis, k), out=prefix.select(axis, k + 1))
    return prefix


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
        if maps.ndim in (3, 4) and maps.device.type == "cpu" and maps.dtype in (torch.float32, torch.float64):
            volumes = maps.detach().reshape(len(maps), *([1] * (4 - maps.ndim)), *maps.shape[1:])  # 2D: depth 1
            return kernels.window_max(np.ascontiguousarray(volumes.numpy()), *([1] * (4 - maps.ndim)), *size).tolist()
        return window_sums(maps, size, batched=True).reshape(len(maps), -1).amax(dim=1).tolist()


@hookimpl
def values_seg_aggregations():
    return [PatchAggregation]
