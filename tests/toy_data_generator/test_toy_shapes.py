"""Analytic sphere/cube masks against brute-force and exact counts."""

import math

import numpy as np
import pytest

from toy_data_generator import shapes


@pytest.mark.parametrize("dims", [2, 3])
def test_sphere_distance_matches_brute_force(dims):
    grid = (11,) * dims
    center = np.array([4.3, 6.1, 5.55][:dims])
    idx = np.indices(grid).astype(float) + 0.5
    expected = np.sqrt(sum((idx[a] - center[a]) ** 2 for a in range(dims)))
    np.testing.assert_allclose(shapes.distance_map(grid, center, "sphere"), expected, atol=1e-12)


@pytest.mark.parametrize("dims", [2, 3])
def test_cube_mask_count_is_the_product_of_per_axis_counts(dims):
    rng = np.random.default_rng(1)
    for _ in range(20):
        size = 20
        r = rng.uniform(1.5, 5)
        c = rng.uniform(r, size - r, dims)
        got = shapes.mask((size,) * dims, c, r, "cube").sum()
        per_axis = [sum(1 for i in range(size) if abs(i + 0.5 - c[a]) <= r) for a in range(dims)]
        assert got == math.prod(per_axis)


@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("shape", ["sphere", "cube"])
def test_voxel_count_is_unbiased_for_random_subvoxel_centres(dims, shape):
    rng = np.random.default_rng(2)
    r = 3.7
    ratios = []
    for _ in range(60):
        c = 12 + rng.random(dims)
        ratios.append(shapes.mask((24,) * dims, c, r, shape).sum() / shapes.volume(r, dims, shape))
    assert abs(np.mean(ratios) - 1) < 0.02


def test_analytic_volumes():
    assert shapes.volume(2.0, 2, "sphere") == pytest.approx(math.pi * 4)
    assert shapes.volume(2.0, 3, "sphere") == pytest.approx(4 / 3 * math.pi * 8)
    assert shapes.volume(2.0, 3, "cube") == pytest.approx(64)


@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("q", [0.1, 0.55, 1.0])
def test_radius_for_volume_fraction(dims, q):
    r = shapes.radius_for_volume_fraction(9.0, q, dims)
    for shape in shapes.SHAPES:
        assert shapes.volume(r, dims, shape) / shapes.volume(9.0, dims, shape) == pytest.approx(q)


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown shape 'torus'.*sphere, cube"):
        shapes.mask((8, 8), (4, 4), 2, "torus")
    with pytest.raises(ValueError, match="coordinates"):
        shapes.mask((8, 8), (4, 4, 4), 2)
    with pytest.raises(ValueError, match="fraction"):
        shapes.radius_for_volume_fraction(3, 0, 2)
