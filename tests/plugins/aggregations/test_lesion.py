"""The lesion-scale aggregations against a per-lesion float64 reference written here: every lesion
of every map on its own (a boolean mask, a full-image ``scipy.ndimage`` dilation by the face cross
for the grown lesion), in 2D and 3D, with lesions on the image border and grown regions that overlap."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from values_seg.components.lesion_scale import LesionVoxels
from values_seg.metrics.lesion import components
from values_seg_plugins.aggregations.lesion import LesionGrownMean, LesionMax, LesionMean, LesionSum, grown_voxels


def _case(dims: int, seed: int):
    rng = np.random.default_rng(seed)
    shape = (12, 13) if dims == 2 else (6, 7, 8)
    mask = rng.random(shape) < 0.3
    mask[(0,) * dims] = True  # a lesion at the corner: its grown region is clipped by the border
    labels, n = components(mask)
    return rng.random((3, *shape)), labels, n


def _reference(maps, labels, n, kind, margin=0):
    out = np.zeros((len(maps), n))
    cross = ndimage.generate_binary_structure(labels.ndim, 1)
    for i in range(1, n + 1):
        inside = labels == i
        if kind == "grown" and margin:
            inside = ndimage.binary_dilation(inside, structure=cross, iterations=margin)
        for m, u in enumerate(maps):
            values = u[inside]
            out[m, i - 1] = {"mean": np.mean, "max": np.max, "sum": np.sum, "grown": np.mean}[kind](values)
    return out


@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("seed", [0, 1])
def test_inside_scores_match_per_lesion_reference(dims, seed):
    maps, labels, n = _case(dims, seed)
    assert n > 3
    for agg, kind in ((LesionMean(), "mean"), (LesionMax(), "max"), (LesionSum(), "sum")):
        many = np.stack(agg.lesion_scores_many(maps, labels, n))
        np.testing.assert_allclose(many, _reference(maps, labels, n, kind), rtol=1e-12)
        np.testing.assert_array_equal(agg.lesion_scores(maps[1], labels, n), many[1])  # one map = its row


@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("margin", [0, 1, 2])
def test_grown_mean_matches_dilated_reference(dims, margin):
    maps, labels, n = _case(dims, 2)
    many = np.stack(LesionGrownMean(margin=margin).lesion_scores_many(maps, labels, n))
    np.testing.assert_allclose(many, _reference(maps, labels, n, "grown", margin), rtol=1e-12)


def test_grown_voxels_are_the_dilated_lesions_and_may_overlap():
    labels = np.zeros((5, 9), np.int64)
    labels[0, 0], labels[2, 3], labels[2, 5] = 1, 2, 3  # 2 and 3 two steps apart: margin 1 overlaps them
    voxels = grown_voxels(labels, 3, 1)
    for i, v in enumerate(voxels, start=1):
        expected = np.flatnonzero(ndimage.binary_dilation(labels == i, iterations=1))
        np.testing.assert_array_equal(v, expected)
    assert np.intersect1d(voxels[1], voxels[2]).tolist() == [2 * 9 + 4]
    assert grown_voxels(np.zeros((4, 4), np.int64), 0, 2) == []


def test_no_lesion_gives_no_scores():
    maps = np.ones((2, 4, 4))
    labels = np.zeros((4, 4), np.int64)
    for agg in (LesionMean(), LesionMax(), LesionSum(), LesionGrownMean()):
        assert [s.shape for s in agg.lesion_scores_many(maps, labels, 0)] == [(0,), (0,)]


@pytest.mark.parametrize("dims", [2, 3])
def test_one_shared_lesion_voxels_scores_as_each_aggregation_alone(dims):
    """The lesions quantity hands every aggregation one :class:`LesionVoxels` (derived once): the
    scores are those of each aggregation's own call, and the grown mean (which reads the map) too."""
    maps, labels, n = _case(dims, 3)
    shared = LesionVoxels(maps, labels, n)
    for agg, kind in ((LesionMean(), "mean"), (LesionMax(), "max"), (LesionSum(), "sum"), (LesionGrownMean(), "grown")):
        got = np.stack(agg.scores_of(shared))
        np.testing.assert_array_equal(got, np.stack(agg.lesion_scores_many(maps, labels, n)))
        np.testing.assert_allclose(got, _reference(maps, labels, n, kind, margin=2), rtol=1e-12)
