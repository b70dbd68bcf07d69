"""Analytic objects on a voxel grid, in any number of dimensions.

Coordinates: voxel ``i`` along an axis covers ``[i, i + 1)`` and has its centre at ``i + 0.5``,
so an image of ``size`` voxels spans ``[0, size]``. Object centres are continuous (sub-voxel), which
makes voxel counts unbiased estimates of the analytic volume.

A shape is described by a *distance* from its centre whose unit ball is the shape:

* ``sphere`` (circle in 2D): Euclidean distance, ``||x - c||_2``;
* ``cube`` (square in 2D, axis-aligned): Chebyshev distance, ``max_i |x_i - c_i|``.

The object of "radius" ``r`` is ``{distance <= r}``: a ball of radius ``r`` or a cube of half-side
``r``. Its volume grows as ``r ** dims`` for both shapes, which is what lets the generator derive
rater radii from size ratios analytically (:func:`radius_for_volume_fraction`).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

SHAPES = ("sphere", "cube")


def check_shape(shape: str) -> str:
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; valid shapes: {', '.join(SHAPES)}")
    return shape


def axes(shape: Sequence[int]) -> list[np.ndarray]:
    """Open (broadcastable) voxel-centre coordinates, one array per axis, in float64."""
    dims = len(shape)
    out = []
    for axis, n in enumerate(shape):
        view = [1] * dims
        view[axis] = n
        out.append((np.arange(n, dtype=np.float64) + 0.5).reshape(view))
    return out


def distance_map(grid_shape: Sequence[int], center: Sequence[float], shape: str = "sphere") -> np.ndarray:
    """Distance of every voxel centre from ``center`` in the metric of ``shape`` (float64)."""
    check_shape(shape)
    if len(center) != len(grid_shape):
        raise ValueError(f"center has {len(center)} coordinates for a {len(grid_shape)}D grid")
    coords = axes(grid_shape)
    if shape == "sphere":
        squared = None
        for x, c in zip(coords, center):
            term = (x - float(c)) ** 2
            squared = term if squared is None else squared + term
        return np.sqrt(squared)
    dist = None
    for x, c in zip(coords, center):
        term = np.abs(x - float(c))
        dist = term if dist is None else np.maximum(dist, term)
    return np.broadcast_to(dist, tuple(grid_shape)).copy() if dist.shape != tuple(grid_shape) else dist


def mask(grid_shape: Sequence[int], center: Sequence[float], radius: float, shape: str = "sphere") -> np.ndarray:
    """Boolean mask of the object ``{distance <= radius}``."""
    return distance_map(grid_shape, center, shape) <= radius


def volume(radius: float, dims: int, shape: str = "sphere") -> float:
    """Analytic volume (area in 2D) of the object of ``radius`` in voxels."""
    check_shape(shape)
    if shape == "cube":
        return (2.0 * radius) ** dims
    return math.pi ** (dims / 2) / math.gamma(dims / 2 + 1) * radius**dims


def radius_for_volume_fraction(radius: float, fraction: float, dims: int) -> float:
    """Radius of the concentric object whose volume is ``fraction`` of the one of ``radius``.

    Exact for both shapes, since the volume of either grows as ``radius ** dims``.
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must lie in (0, 1], got {fraction}")
    return float(radius) * fraction ** (1.0 / dims)
