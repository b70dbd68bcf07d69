"""The 64^3 crop at 1 mm around a nodule, as pylidc's ``Annotation.uniform_cubic_resample(63)`` (the
paper's ``save_cropped_nodules.py``) makes it, re-implemented on plain arrays.

Coordinates and interpolation: docs/design-rationale.md, "LIDC-IDRI", the crop.
"""

from __future__ import annotations

import numpy as np
from scipy.interpolate import RegularGridInterpolator

SIZE = 64


def crop_axes(first_bbox: np.ndarray, zvals: np.ndarray, spacing: float) -> tuple[np.ndarray, ...]:
    """Sample positions (mm) along i, j and z of the crop around ``first_bbox`` ([3, 2] inclusive
    voxel indices of the first annotation).

    Computed with pylidc's very formula (``linspace`` over the box widened to 63 mm), so that
    sample points that fall on a scan voxel do so bit for bit as in pylidc: the mask rule "> 0"
    is sensitive to the last bit of the interpolation weights there.
    """
    side = float(SIZE - 1)
    lows = (first_bbox[0, 0] * spacing, first_bbox[1, 0] * spacing, zvals[first_bbox[2, 0]])
    highs = (first_bbox[0, 1] * spacing, first_bbox[1, 1] * spacing, zvals[first_bbox[2, 1]])
    axes = []
    for lo, hi in zip(lows, highs):
        d = 0.5 * (side - (hi - lo))
        axes.append(np.linspace(lo - d, hi + d, SIZE))
    return tuple(axes)


def _index_range(positions: np.ndarray, lo: float, hi: float) -> tuple[int, int]:
    """Indices of the grid points whose cells contain [lo, hi] (at least two where possible)."""
    n = positions.size
    a = int(np.clip(np.searchsorted(positions, lo, side="right") - 1, 0, n - 1))
    b = int(np.clip(np.searchsorted(positions, hi, side="left"), 0, n - 1))
    if b == a:
        a, b = (a, a + 1) if a + 1 < n else (max(a - 1, 0), a)
    return a, b


def needed_slices(axes: tuple[np.ndarray, ...], zvals: np.ndarray) -> range:
    a, b = _index_range(zvals, axes[2][0], axes[2][-1])
    return range(a, b + 1)


def _sample(grid: tuple[np.ndarray, ...], values: np.ndarray, axes, fill: float) -> np.ndarray:
    rgi = RegularGridInterpolator(grid, values, bounds_error=False, fill_value=fill)
    points = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    return rgi(points).reshape(SIZE, SIZE, SIZE).transpose(2, 0, 1)


def sample_image(slices: dict[int, np.ndarray], zvals: np.ndarray, spacing: float, axes, fill: float) -> np.ndarray:
    """The crop of the scan (HU, float32 [z, y, x]); ``slices`` holds at least :func:`needed_slices`."""
    ks = needed_slices(axes, zvals)
    rows, cols = next(iter(slices.values())).shape
    i0, i1 = _index_range(np.arange(rows) * spacing, axes[0][0], axes[0][-1])
    j0, j1 = _index_range(np.arange(cols) * spacing, axes[1][0], axes[1][-1])
    volume = np.stack([slices[k][i0:i1 + 1, j0:j1 + 1] for k in ks], axis=-1)
    grid = (np.arange(i0, i1 + 1) * spacing, np.arange(j0, j1 + 1) * spacing, zvals[ks.start:ks.stop])
    return _sample(grid, volume, axes, fill).astype(np.float32)


def sample_mask(mask: np.ndarray, bbox: np.ndarray, zvals: np.ndarray, spacing: float, axes) -> np.ndarray:
    """A rater's mask on the crop (uint8 [z, y, x]); ``mask`` is pylidc's boolean mask on the
    voxel box ``bbox`` ([3, 2] inclusive), which should extend one voxel beyond the annotation."""
    grid = (np.arange(bbox[0, 0], bbox[0, 1] + 1) * spacing, np.arange(bbox[1, 0], bbox[1, 1] + 1) * spacing,
            zvals[bbox[2, 0]:bbox[2, 1] + 1])
    return (_sample(grid, mask.astype(np.float32), axes, 0.0) > 0).astype(np.uint8)


def zscore(image: np.ndarray) -> np.ndarray:
    """(x - mean) / (std + 1e-8), the paper's normalisation (ValUES ``preprocess_datasets_3d.py``)."""
    x = image.astype(np.float64)
    return ((x - x.mean()) / (x.std() + 1e-8)).astype(np.float32)
