"""Spatial mass ratio of Aggrigator (Karg et al., CVPR 2026; ``aggrigator.spatial_decomposition``).

The local measures and how they are computed: docs/design-rationale.md, "Aggrigator's aggregations".
"""

from __future__ import annotations

import itertools
from typing import Annotated, Literal

import numpy as np
import torch

from values_seg import hookimpl
from values_seg.components.aggregation import Aggregation, as_map
from values_seg.params import Range
from values_seg_plugins.aggregations.patch import window_sums


def _pad(u: np.ndarray, k: int, mode: str = "reflect") -> np.ndarray:
    """The stack of maps ``u [M, *spatial]`` padded by ``k // 2`` in the spatial axes."""
    return np.pad(u, [(0, 0)] + [(k // 2, k // 2)] * (u.ndim - 1), mode=mode)


def _view(padded: np.ndarray, start, shape) -> np.ndarray:
    """``padded[:, start + p]`` for every spatial position ``p`` of a map of ``shape`` (batch axis kept)."""
    return padded[(slice(None),) + tuple(slice(o, o + n) for o, n in zip(start, shape[1:]))]


def _mirror_views(u: np.ndarray, k: int):
    """``(offset, view)`` for every offset of a ``k``-window: ``view[p] = mirrored(u)[p + offset]``."""
    padded = _pad(u, k)
    for offset in itertools.product(range(k), repeat=u.ndim - 1):
        yield offset, _view(padded, offset, u.shape)


def entropy_map(u: np.ndarray, k: int, bins: int) -> np.ndarray:
    """Normalised histogram entropy of each pixel's mirrored window (float32); ``u [M, *spatial]``."""
    edges = np.linspace(0, 1, bins + 1)
    padded = _pad(u, k)
    index = np.searchsorted(edges, padded, side="right") - 1
    index[padded == edges[-1]] = bins - 1  # the last bin is closed
    valid = (index >= 0) & (index < bins)
    hist = np.stack([window_sums(torch.from_numpy(((index == b) & valid).astype(np.float32)), (k,) * (u.ndim - 1),
                                 batched=True).numpy() for b in range(bins)]).astype(np.float32)
    total = hist.sum(axis=0)
    probs = np.divide(hist, total, out=np.zeros_like(hist), where=total > 0)
    entropy = -(probs * np.log2(probs + np.float32(1e-12))).sum(axis=0)
    return entropy / np.log2(bins)


def _sobel_weights(k: int, position: int, derivative: bool) -> dict[int, float]:
    """1D Sobel taps at ``position`` of a ``k``-window extended by edge reflection (SciPy's "reflect"):
    window index -> weight."""
    taps = (-1.0, 0.0, 1.0) if derivative else (1.0, 2.0, 1.0)
    out: dict[int, float] = {}
    for shift, w in zip((-1, 0, 1), taps):
        i = position + shift
        i = -i - 1 if i < 0 else (2 * k - i - 1 if i >= k else i)
        if w:
            out[i] = out.get(i, 0.0) + w
    return out


def _filter_axis(x: np.ndarray, axis: int, taps: dict[int, float], n: int) -> np.ndarray:
    """``sum_i w_i * x[..., i:i + n, ...]`` along ``axis`` (the 1D taps of one window position)."""
    out = None
    for i, w in taps.items():
        term = x[(slice(None),) * axis + (slice(i, i + n),)]
        term = term if w == 1.0 else w * term
        out = term if out is None else out + term
    return out


def eds_map(u: np.ndarray, k: int, threshold: float) -> np.ndarray:
    """Share of each window's pixels with Sobel magnitude (within the window) above ``threshold``;
    ``u [M, *spatial]``. The Sobel operator is separable: per window position, each gradient is
    the 1D filters of that position applied axis after axis to the padded maps, partial results
    shared between positions with the same leading filters."""
    D, shape = u.ndim - 1, u.shape[1:]
    padded = _pad(u, k)
    done: dict[tuple, np.ndarray] = {}

    def filtered(spec: tuple) -> np.ndarray:  # spec: (window position, derivative?) of the first axes
        if spec not in done:
            previous = filtered(spec[:-1]) if len(spec) > 1 else padded
            position, derivative = spec[-1]
            done[spec] = _filter_axis(previous, len(spec), _sobel_weights(k, position, derivative), shape[len(spec) - 1])
        return done[spec]

    count = np.zeros(u.shape, dtype=np.int64)
    for position in itertools.product(range(k), repeat=D):  # pixel of the window whose gradient counts
        square = sum(np.square(filtered(tuple((p, a == g) for a, p in enumerate(position)))) for g in range(D))
        count += np.sqrt(square) > threshold
    return count / k**D


def moran_map(u: np.ndarray, k: int) -> np.ndarray:
    """Moran's I (rook weights) of each pixel's mirrored window, clipped at 0; 1 where constant
    (float32); ``u [M, *spatial]``."""
    views = dict(_mirror_views(u.astype(np.float64), k))
    n = k ** (u.ndim - 1)
    mean = sum(views.values()) / n
    z = {o: v - mean for o, v in views.items()}
    denominator = sum(v * v for v in z.values())
    numerator, pairs = np.zeros(u.shape), 0
    for o in views:
        for axis in range(u.ndim - 1):
            if o[axis] + 1 < k:
                neighbour = o[:axis] + (o[axis] + 1,) + o[axis + 1:]
                numerator += z[o] * z[neighbour]
                pairs += 1
    with np.errstate(divide="ignore", invalid="ignore"):
        value = n / (2.0 * pairs) * (2.0 * numerator) / denominator
    value = np.where(denominator == 0, 1.0, value)
    return np.maximum(value, 0.0).astype(np.float32)


class SpatialMassRatioAggregation(Aggregation):
    """Share of the uncertainty mass on pixels of high local entropy / edge density / local Moran's I."""

    name = "spatial_mass_ratio"
    label = "Mass ratio"

    def __init__(self, measure: Literal["entropy", "eds", "moran"] = "entropy",
                 window: Annotated[int, Range(3, 15)] = 3, bins: Annotated[int, Range(2, 256)] = 4,
                 threshold: float = 0.2):
        if window % 2 == 0:
            raise ValueError(f"spatial_mass_ratio aggregation: window must be odd, got {window}")
        self.measure, self.window, self.bins, self.threshold = measure, window, bins, threshold

    def weights(self, u: np.ndarray) -> np.ndarray:
        """The local spatial measure of every pixel of the float64 maps ``u [M, *spatial]``."""
        if min(u.shape[1:]) <= self.window // 2:
            raise ValueError(f"spatial_mass_ratio aggregation: window {self.window} needs every side of the map "
                             f"> {self.window // 2}, got shape {u.shape[1:]}")
        if self.measure == "entropy":
            return entropy_map(u, self.window, self.bins)
        if self.measure == "eds":
            return eds_map(u, self.window, self.threshold)
        return moran_map(u, self.window)

    def __call__(self, umap, prediction=None) -> float:
        return self.score_many([self], as_map(umap, "spatial_mass_ratio aggregation")[None])[0]

    @classmethod
    def score_many(cls, instances, maps, prediction=None):
        settings = {(i.measure, i.window, i.bins, i.threshold) for i in instances}
        if len(settings) > 1:
            return [inst.score_many([inst], m[None])[0] for inst, m in zip(instances, maps)]
        u = maps.double().numpy()
        M = len(u)
        total = u.reshape(M, -1).sum(axis=1)
        weighted = (u * instances[0].weights(u)).reshape(M, -1).sum(axis=1)
        return np.where(total > 0, weighted / np.where(total > 0, total, 1.0), 0.0).tolist()


@hookimpl
def values_seg_aggregations():
    return [SpatialMassRatioAggregation]
