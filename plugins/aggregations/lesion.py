"""Lesion-scale aggregations (:mod:`values_seg.lesion_scale`): the uncertainty of each predicted
lesion is the mean, maximum or sum of the map inside it, or the mean inside the lesion grown by a
margin (its border, where a boundary's uncertainty lives, counts too). As image aggregations they
score a case by the maximum (or, ``patient="sum"``, the sum) of its lesions' scores."""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from values_seg import hookimpl
from values_seg.lesion_scale import LesionAggregation


def _sums(umap: np.ndarray, labels: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    flat = labels.reshape(-1)
    total = np.bincount(flat, weights=umap.reshape(-1), minlength=n + 1)[1:]
    return total, np.bincount(flat, minlength=n + 1)[1:].astype(np.float64)


class LesionMean(LesionAggregation):
    """Mean uncertainty inside each predicted lesion."""

    name = "lesion_mean"
    label = "Lesion mean"

    def lesion_scores(self, umap, labels, n):
        total, size = _sums(umap, labels, n)
        return total / np.maximum(size, 1)


class LesionMax(LesionAggregation):
    """Maximum uncertainty inside each predicted lesion."""

    name = "lesion_max"
    label = "Lesion max"

    def lesion_scores(self, umap, labels, n):
        top = np.full(n + 1, -np.inf)
        np.maximum.at(top, labels.reshape(-1), umap.reshape(-1))
        return top[1:].astype(np.float64)


class LesionSum(LesionAggregation):
    """Summed uncertainty inside each predicted lesion (grows with its size)."""

    name = "lesion_sum"
    label = "Lesion sum"

    def lesion_scores(self, umap, labels, n):
        return _sums(umap, labels, n)[0]


class LesionGrownMean(LesionAggregation):
    """Mean uncertainty inside each predicted lesion grown by ``margin`` voxels (face steps)."""

    name = "lesion_grown_mean"
    label = "Lesion+margin mean"

    def __init__(self, margin: int = 2, patient: str = "max"):
        if margin < 0:
            raise ValueError(f"lesion_grown_mean: margin must be >= 0 voxels, got {margin!r}")
        super().__init__(patient)
        self.margin = margin

    def lesion_scores(self, umap, labels, n):
        return self.lesion_scores_many(umap[None], labels, n)[0]

    def lesion_scores_many(self, maps, labels, n):
        """The grown lesions once, then each map's mean inside them."""
        out = np.zeros((len(maps), n))
        m = self.margin
        for i, box in enumerate(ndimage.find_objects(labels, max_label=n)):
            grown = (slice(None),) + tuple(slice(max(s.start - m, 0), s.stop + m) for s in box)
            inside = labels[grown[1:]] == i + 1
            if m:
                inside = ndimage.binary_dilation(inside, iterations=m)
            out[:, i] = maps[grown][:, inside].mean(axis=1)
        return list(out)


@hookimpl
def values_seg_aggregations():
    return [LesionMean, LesionMax, LesionSum, LesionGrownMean]
