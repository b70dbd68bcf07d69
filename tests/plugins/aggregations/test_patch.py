"""Patch aggregation against brute-force window sums (float64 loops)."""

import itertools

import numpy as np
import pytest
import torch

from values_seg import registry

rng = np.random.default_rng(1)


def brute_force(u, size):
    size = tuple(min(size, n) for n in u.shape)
    best, where = -np.inf, None
    for start in itertools.product(*(range(n - s + 1) for n, s in zip(u.shape, size))):
        window = u[tuple(slice(a, a + s) for a, s in zip(start, size))]
        total = window.astype(np.float64).sum()
        if total > best:
            best, where = total, start
    return best, where


@pytest.mark.parametrize("shape", [(12, 15), (30, 30), (7, 9, 11), (12, 12, 12)])
@pytest.mark.parametrize("size", [1, 3, 10, 40])
def test_matches_brute_force(shape, size):
    u = rng.random(shape).astype(np.float32)
    agg = registry.create("aggregation", "patch", size=size)
    best, where = brute_force(u, size)
    loc = agg.locate(torch.from_numpy(u))
    assert agg(torch.from_numpy(u)) == pytest.approx(best, rel=1e-9)
    assert loc.start == where
    assert loc.size == tuple(min(size, n) for n in shape)


def test_size_one_is_the_maximum_and_larger_than_image_is_the_sum():
    u = torch.rand(9, 9)
    assert registry.create("aggregation", "patch", size=1)(u) == pytest.approx(float(u.max()))
    assert registry.create("aggregation", "patch", size=100)(u) == pytest.approx(float(u.double().sum()))


def test_ties_and_constant_maps_pick_the_first_window():
    u = torch.zeros(20, 20)
    loc = registry.create("aggregation", "patch", size=10).locate(u)
    assert loc.score == 0.0 and loc.start == (0, 0)
    u[2:4, 2:4] = 1.0
    u[15:17, 15:17] = 1.0  # an equal second blob
    loc = registry.create("aggregation", "patch", size=5).locate(u)
    assert loc.score == pytest.approx(4.0) and loc.start == (0, 0)


def test_invalid_input():
    with pytest.raises(ValueError, match="size must be >= 1"):
        registry.create("aggregation", "patch", size=0)
    with pytest.raises(ValueError, match="NaN"):
        registry.create("aggregation", "patch")(torch.tensor([[float("nan"), 1.0]]))


@pytest.mark.parametrize("shape, dtype", [((3, 12, 15), np.float32), ((2, 7, 9, 11), np.float32),
                                          ((2, 12, 12, 12), np.float64), ((2, 5, 6), np.float64)])
@pytest.mark.parametrize("size", [1, 3, 10])
def test_a_stack_of_maps_scores_each_as_brute_force(shape, dtype, size):
    """The compiled pass over a stack of 2D or 3D maps (values_seg.numerics.kernels.window_max)."""
    maps = rng.random(shape).astype(dtype)
    instances = [registry.create("aggregation", "patch", size=size) for _ in maps]
    scores = type(instances[0]).score_many(instances, torch.from_numpy(maps))
    assert scores == pytest.approx([brute_force(u, size)[0] for u in maps], rel=1e-12)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("where", [(0, 0, 0), (2, 3, 4), (5, 6, 7)])
def test_a_stack_with_a_nan_scores_nan_for_that_map_only(bad, where):
    """Wherever the non-finite voxel lies (in the first window, inside, in the last one), its map
    scores NaN (the running sums carry it to the end) and the others are untouched."""
    maps = torch.rand(3, 6, 7, 8, dtype=torch.float64)
    maps[(1, *where)] = bad
    instances = [registry.create("aggregation", "patch", size=3) for _ in maps]
    scores = type(instances[0]).score_many(instances, maps)
    assert np.isnan(scores[1]) and scores[0] == pytest.approx(brute_force(maps[0].numpy(), 3)[0], rel=1e-12)
    assert scores[2] == pytest.approx(brute_force(maps[2].numpy(), 3)[0], rel=1e-12)
