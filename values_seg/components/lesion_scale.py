"""Lesion-scale aggregations: an uncertainty map -> one score per predicted lesion, and by reduction
one per image (the patient scale).

The contract, with an outside package's example: docs/design-rationale.md,
"Lesion-scale aggregations".
"""

from __future__ import annotations

import functools

import numpy as np

from values_seg.components.aggregation import Aggregation, as_map, as_prediction

PATIENT = ("max", "sum")


class LesionAggregation(Aggregation):
    """Base class: score each predicted lesion (:meth:`lesion_scores`); as an image aggregation, the
    maximum or sum of the lesion scores (``patient``)."""

    needs_prediction = True
    needs_background = True
    lesion_scale = True

    def __init__(self, patient: str = "max"):
        if patient not in PATIENT:
            raise ValueError(f"lesion aggregation: patient must be one of {', '.join(PATIENT)}, got {patient!r}")
        self.patient = patient

    def lesion_scores(self, umap: np.ndarray, labels: np.ndarray, n: int) -> np.ndarray:
        raise NotImplementedError

    def lesion_scores_many(self, maps: np.ndarray, labels: np.ndarray, n: int) -> list[np.ndarray]:
        """:meth:`lesion_scores` of each map of the stack ``maps [M, *spatial]`` (override to share work)."""
        return [np.asarray(self.lesion_scores(u, labels, n), dtype=np.float64) for u in maps]

    def scores_of(self, lesions: "LesionVoxels") -> list[np.ndarray]:
        """:meth:`lesion_scores_many` of a :class:`LesionVoxels` (override to read what it derives once
        for every aggregation: the lesions' sums, maxima, sizes)."""
        return self.lesion_scores_many(lesions.maps, lesions.labels, lesions.n)

    def __call__(self, umap, prediction=None) -> float:
        from values_seg.metrics.lesion import components

        where = f"{getattr(self, 'name', type(self).__name__)} aggregation"
        u = as_map(umap, where).double().numpy()
        labels = as_prediction(prediction, u.shape, where).numpy()
        scores = [self.lesion_scores(u, *components(labels == c)) for c in np.unique(labels) if c > 0]
        flat = np.concatenate(scores) if scores else np.zeros(0)
        if flat.size == 0:
            return 0.0
        return float(flat.max() if self.patient == "max" else flat.sum())


class LesionVoxels:
    """A map stack ``maps [M, *spatial]`` and its predicted lesions (``labels``, ``n``), with what
    several lesion-scale aggregations read, each derived on first use and then shared: per map and
    lesion the summed map, the largest value and the lesion's size (one compiled pass,
    :func:`values_seg.numerics.kernels.lesion_sums`, the sums added in voxel order as ``np.bincount``)."""

    def __init__(self, maps: np.ndarray, labels: np.ndarray, n: int):
        self.maps, self.labels, self.n = maps, labels, int(n)

    @functools.cached_property
    def _sums(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        from values_seg.numerics import kernels

        flat = np.ascontiguousarray(self.maps, dtype=np.float64).reshape(len(self.maps), -1)
        return kernels.lesion_sums(np.ascontiguousarray(self.labels, dtype=np.int64).reshape(-1), self.n, flat)

    @property
    def sums(self) -> np.ndarray:
        """``[M, n]`` the summed map inside each lesion (float64)."""
        return self._sums[0]

    @property
    def maxima(self) -> np.ndarray:
        """``[M, n]`` the largest value of the map inside each lesion (float64)."""
        return self._sums[1]

    @property
    def sizes(self) -> np.ndarray:
        """``[n]`` each lesion's voxels (int64)."""
        return self._sums[2]


def is_lesion_scale(agg) -> bool:
    """Whether an aggregation (class or instance) scores lesions."""
    return bool(getattr(agg, "lesion_scale", False))
