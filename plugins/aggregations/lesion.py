"""Lesion-scale aggregations (:mod:`values_seg.lesion_scale`): the uncertainty of each predicted
lesion is the mean, maximum or sum of the map inside it, or the mean inside the lesion grown by a
margin (its border, where a boundary's uncertainty lives, counts too). As image aggregations they
score a case by the maximum (or, ``patient="sum"``, the sum) of its lesions' scores."""

from __future__ import annotations

import functools

import numpy as np

from values_seg import hookimpl
from values_seg.lesion_scale import LesionAggregation


def _stacked(maps: np.ndarray, labels: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Bin ``m (n + 1) + label`` of every voxel of every map of ``maps [M, *spatial]`` and the maps'
    voxels in that order: one ``np.bincount`` / ``ufunc.at`` scores all lesions of all maps (each bin
    gets its voxels in the order a per-map call would, so the sums are the same to the bit)."""
    flat = labels.reshape(-1)
    keys = (np.arange(len(maps))[:, None] * (n + 1) + flat[None, :]).reshape(-1)
    return keys, maps.reshape(-1)


def _sums(maps: np.ndarray, labels: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per map ``[M, n]`` the summed map inside each lesion, and each lesion's size ``[n]``."""
    keys, values = _stacked(maps, labels, n)
    total = np.bincount(keys, weights=values, minlength=len(maps) * (n + 1)).reshape(len(maps), n + 1)[:, 1:]
    return total, np.bincount(labels.reshape(-1), minlength=n + 1)[1:].astype(np.float64)


class LesionMean(LesionAggregation):
    """Mean uncertainty inside each predicted lesion."""

    name = "lesion_mean"
    label = "Lesion mean"

    def lesion_scores(self, umap, labels, n):
        return self.lesion_scores_many(umap[None], labels, n)[0]

    def lesion_scores_many(self, maps, labels, n):
        total, size = _sums(maps, labels, n)
        return list(total / np.maximum(size, 1))


class LesionMax(LesionAggregation):
    """Maximum uncertainty inside each predicted lesion."""

    name = "lesion_max"
    label = "Lesion max"

    def lesion_scores(self, umap, labels, n):
        return self.lesion_scores_many(umap[None], labels, n)[0]

    def lesion_scores_many(self, maps, labels, n):
        """The lesion voxels grouped by lesion (a stable sort of their labels), then one
        ``np.maximum.reduceat`` per map stack (``np.maximum.at`` costs a call per voxel)."""
        if n == 0:
            return [np.zeros(0) for _ in maps]
        flat = labels.reshape(-1)
        voxels = np.flatnonzero(flat)
        order = np.argsort(flat[voxels], kind="stable")
        starts = np.searchsorted(flat[voxels][order], np.arange(1, n + 1))
        top = np.maximum.reduceat(maps.reshape(len(maps), -1)[:, voxels[order]], starts, axis=1)
        return list(top.astype(np.float64))


class LesionSum(LesionAggregation):
    """Summed uncertainty inside each predicted lesion (grows with its size)."""

    name = "lesion_sum"
    label = "Lesion sum"

    def lesion_scores(self, umap, labels, n):
        return self.lesion_scores_many(umap[None], labels, n)[0]

    def lesion_scores_many(self, maps, labels, n):
        return list(_sums(maps, labels, n)[0])


@functools.lru_cache(maxsize=16)
def _ball(ndim: int, margin: int) -> np.ndarray:
    """``[O, ndim]``: the offsets within ``margin`` face steps (the L1 ball; ``margin`` dilations by the cross)."""
    grid = np.indices((2 * margin + 1,) * ndim).reshape(ndim, -1).T - margin
    return grid[np.abs(grid).sum(axis=1) <= margin]


def grown_voxels(labels: np.ndarray, n: int, margin: int) -> list[np.ndarray]:
    """Per lesion ``1..n``, the flat indices (ascending) of the voxels within ``margin`` face steps of
    it (the lesion dilated ``margin`` times by the face cross, clipped to the image), all lesions at
    once: every lesion voxel moved by every offset of the ball, the (lesion, voxel) pairs made unique."""
    shape, size = np.array(labels.shape), labels.size
    where = np.nonzero(labels)
    points = np.stack(where, axis=1)[None] + _ball(labels.ndim, margin)[:, None]  # [O, k, ndim]
    lesion = np.broadcast_to(labels[where], points.shape[:2])
    inside = ((points >= 0) & (points < shape)).all(axis=2)
    flat = np.ravel_multi_index(tuple(points[inside].T), labels.shape)
    keys = np.unique(lesion[inside].astype(np.int64) * size + flat)
    bounds = np.searchsorted(keys, np.arange(1, n + 2) * size)
    return [keys[a:b] - (i + 1) * size for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]


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
        for i, voxels in enumerate(grown_voxels(labels, n, self.margin)):
            out[:, i] = flat[:, voxels].mean(axis=1)
        return list(out)


@hookimpl
def values_seg_aggregations():
    return [LesionMean, LesionMax, LesionSum, LesionGrownMean]
