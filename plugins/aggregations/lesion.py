"""Lesion-scale aggregations (:mod:`values_seg.components.lesion_scale`): the uncertainty of each predicted
lesion is the mean, maximum or sum of the map inside it, or the mean inside the lesion grown by a
margin (its border, where a boundary's uncertainty lives, counts too). As image aggregations they
score a case by the maximum (or, ``patient="sum"``, the sum) of its lesions' scores."""

from __future__ import annotations

import functools

import numpy as np

from values_seg import hookimpl
from values_seg.numerics import kernels
from values_seg.components.lesion_scale import LesionAggregation, LesionVoxels


class LesionMean(LesionAggregation):
    """Mean uncertainty inside each predicted lesion."""

    name = "lesion_mean"
    label = "Lesion mean"

    def lesion_scores(self, umap, labels, n):
        return self.lesion_scores_many(umap[None], labels, n)[0]

    def lesion_scores_many(self, maps, labels, n):
        return self.scores_of(LesionVoxels(maps, labels, n))

    def scores_of(self, lesions):
        return list(lesions.sums / np.maximum(lesions.sizes, 1).astype(np.float64))


class LesionMax(LesionAggregation):
    """Maximum uncertainty inside each predicted lesion."""

    name = "lesion_max"
    label = "Lesion max"

    def lesion_scores(self, umap, labels, n):
        return self.lesion_scores_many(umap[None], labels, n)[0]

    def lesion_scores_many(self, maps, labels, n):
        return self.scores_of(LesionVoxels(maps, labels, n))

    def scores_of(self, lesions):
        return list(lesions.maxima)


class LesionSum(LesionAggregation):
    """Summed uncertainty inside each predicted lesion (grows with its size)."""

    name = "lesion_sum"
    label = "Lesion sum"

    def lesion_scores(self, umap, labels, n):
        return self.lesion_scores_many(umap[None], labels, n)[0]

    def lesion_scores_many(self, maps, labels, n):
        return self.scores_of(LesionVoxels(maps, labels, n))

    def scores_of(self, lesions):
        return list(lesions.sums)


@functools.lru_cache(maxsize=16)
def _ball(ndim: int, margin: int) -> np.ndarray:
    """``[O, ndim]``: the offsets within ``margin`` face steps (the L1 ball; ``margin`` dilations by the cross)."""
    grid = np.indices((2 * margin + 1,) * ndim).reshape(ndim, -1).T - margin
    return grid[np.abs(grid).sum(axis=1) <= margin]


def grown_voxels(labels: np.ndarray, n: int, margin: int) -> list[np.ndarray]:
    """Per lesion ``1..n``, the flat indices (ascending) of the voxels within ``margin`` face steps of
    it (the lesion dilated ``margin`` times by the face cross, clipped to the image), all lesions at
    once: every lesion voxel moved by every offset of the ball, each reached voxel kept once per
    lesion (:func:`values_seg.numerics.kernels.grown_lesions`)."""
    ends, indices = _grown(labels, n, margin)
    return [indices[a:b] for a, b in zip(ends[:-1], ends[1:])]


def _grown(labels: np.ndarray, n: int, margin: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`values_seg.numerics.kernels.grown_lesions` of a 2D or 3D ``labels`` (a 2D image: one plane)."""
    labels = np.asarray(labels)
    volume = np.ascontiguousarray(labels, dtype=np.int64).reshape((1,) * (3 - labels.ndim) + labels.shape)
    return kernels.grown_lesions(volume, int(n), _ball_3d(labels.ndim, margin))


@functools.lru_cache(maxsize=16)
def _ball_3d(ndim: int, margin: int) -> np.ndarray:
    """:func:`_ball` as 3D offsets (a 2D image is one plane: no step across planes)."""
    ball = np.pad(_ball(ndim, margin), ((0, 0), (3 - ndim, 0)))
    ball.flags.writeable = False
    return ball


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
        """The grown lesions of all maps at once, then each map's mean inside each of them."""
        flat = maps.reshape(len(maps), -1)
        out = np.zeros((len(maps), n))
        ends, indices = _grown(labels, n, self.margin)
        for i in range(n):
            out[:, i] = flat[:, indices[ends[i]:ends[i + 1]]].mean(axis=1)
        return list(out)


@hookimpl
def values_seg_aggregations():
    return [LesionMean, LesionMax, LesionSum, LesionGrownMean]
