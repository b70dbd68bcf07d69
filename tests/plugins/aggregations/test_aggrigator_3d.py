"""The 3D forms of the Aggrigator-named aggregations against float64 brute-force references
(explicit loops over voxels and neighbours, written here from the definitions), and their
documented values on bad input."""

import itertools

import numpy as np
import pytest
import torch
from scipy import ndimage

from values_seg import registry

SHAPE = (5, 6, 4)
FACES = [d for d in itertools.product((-1, 0, 1), repeat=3) if sum(map(abs, d)) == 1]


def ours(name, u, mask=None, **params):
    mask = np.zeros(u.shape, np.int64) if mask is None else mask
    return registry.create("aggregation", name, **params)(torch.from_numpy(u), prediction=torch.from_numpy(mask))


def neighbour_pairs(shape):
    for p in itertools.product(*map(range, shape)):
        for d in FACES:
            q = tuple(a + b for a, b in zip(p, d))
            if all(0 <= c < n for c, n in zip(q, shape)):
                yield p, q


def brute_moran_geary(u):
    z, n = u - u.mean(), u.size
    pairs = list(neighbour_pairs(u.shape))
    s0 = float(len(pairs))  # both orders, weight 1
    moran = n / s0 * sum(z[p] * z[q] for p, q in pairs) / (z**2).sum()
    geary = (n - 1) * sum((u[p] - u[q]) ** 2 for p, q in pairs) / (2 * s0 * (z**2).sum())
    return moran, geary


def brute_interior(mask, nbhood, thickness):
    offsets = list(itertools.product((-1, 0, 1), repeat=3))
    if nbhood == "star":
        offsets = [d for d in offsets if sum(map(abs, d)) <= 1]
    current = mask.copy()
    for _ in range(thickness):
        nxt = np.zeros_like(current)
        for p in itertools.product(*map(range, mask.shape)):
            nxt[p] = all(
                all(0 <= c < n for c, n in zip(q, mask.shape)) and current[q]
                for q in (tuple(a + b for a, b in zip(p, d)) for d in offsets))
        current = nxt
    return current


@pytest.fixture
def case():
    rng = np.random.default_rng(7)
    u = rng.random(SHAPE)
    mask = np.zeros(SHAPE, np.int64)
    mask[1:5, 1:6, 0:4] = 1
    mask[0:3, 0:3, 0:2] = 2
    return u, mask


def test_statistics_3d(case):
    u, mask = case
    assert ours("max", u) == pytest.approx(max(u.ravel()), abs=1e-12)
    assert ours("std", u) == pytest.approx(np.sqrt(sum((v - u.mean()) ** 2 for v in u.ravel()) / u.size), abs=1e-12)
    assert ours("geometric_mean", u) == pytest.approx(np.exp(np.mean(np.log(u))), rel=1e-12)
    assert ours("harmonic_mean", u) == pytest.approx(u.size / sum(1 / v for v in u.ravel()), rel=1e-12)
    values = sorted(u.ravel())
    for q in (0.0, 0.3, 0.9, 1.0):
        pos = q * (len(values) - 1)
        lo, frac = int(np.floor(pos)), pos - np.floor(pos)
        t = values[lo] + (values[min(lo + 1, len(values) - 1)] - values[lo]) * frac
        assert ours("above_quantile_mean", u, q=q) == pytest.approx(np.mean([v for v in values if v >= t]), abs=1e-12)
    ratio = (mask != 0).sum() / mask.size
    pos = (1 - ratio) * (len(values) - 1)
    lo, frac = int(np.floor(pos)), pos - np.floor(pos)
    t = values[lo] + (values[min(lo + 1, len(values) - 1)] - values[lo]) * frac
    assert ours("above_quantile_mean_fg_ratio", u, mask) == pytest.approx(np.mean([v for v in values if v >= t]))
    assert ours("above_threshold_mean", u, t=0.6) == pytest.approx(np.mean([v for v in values if v >= 0.6]))


def test_autocorrelation_3d(case):
    u, _ = case
    moran, geary = brute_moran_geary(u)
    assert ours("morans_i", u) == pytest.approx(moran, abs=1e-12)
    assert ours("gearys_c", u) == pytest.approx(geary, abs=1e-12)
    smooth = np.add.outer(np.add.outer(np.arange(5.0), np.arange(6.0)), np.arange(4.0))
    moran, geary = brute_moran_geary(smooth)
    assert ours("morans_i", smooth) == pytest.approx(moran, abs=1e-12) and moran > 0.5
    assert ours("gearys_c", smooth) == pytest.approx(geary, abs=1e-12) and geary < 0.5


@pytest.mark.parametrize("nbhood", ["full", "star"])
@pytest.mark.parametrize("thickness", [1, 2])
def test_class_regions_3d(case, nbhood, thickness):
    u, mask = case
    for label in (0, 1, 2):
        region = mask == label
        inner = brute_interior(region, nbhood, thickness)
        boundary = region & ~inner
        assert ours("class_mean", u, mask, label=label) == pytest.approx(u[region].mean(), abs=1e-12)
        params = {"label": label, "thickness": thickness, "nbhood": nbhood}
        assert ours("class_boundary_mean", u, mask, **params) == pytest.approx(u[boundary].mean(), abs=1e-12)
        expected = u[inner].mean() if inner.any() else u.mean()  # empty interior: the image mean
        assert ours("class_interior_mean", u, mask, **params) == pytest.approx(expected, abs=1e-12)


def test_weighted_class_means_3d(case):
    u, mask = case
    means = [u[mask == c].mean() for c in (1, 2)]
    counts = [(mask == c).sum() for c in (1, 2)]
    assert ours("class_mean_equal", u, mask) == pytest.approx(np.mean(means), abs=1e-12)
    assert ours("class_mean_occurrence", u, mask) == pytest.approx(np.dot(means, counts) / sum(counts), abs=1e-12)
    means0 = [u[mask == c].mean() for c in (0, 1, 2)]
    assert ours("class_mean_equal", u, mask, include_background=True) == pytest.approx(np.mean(means0), abs=1e-12)


def brute_window(u, p, k, mode):
    """The ``k``-window around voxel ``p`` of ``u`` extended by np.pad's ``mode``."""
    padded = np.pad(u, k // 2, mode=mode)
    return padded[tuple(slice(c, c + k) for c in p)]


def brute_ratio(u, k, measure):
    weights = np.zeros(u.shape)
    for p in itertools.product(*map(range, u.shape)):
        w = brute_window(u, p, k, "reflect")
        if measure == "entropy":
            hist = np.histogram(w, bins=np.linspace(0, 1, 5))[0].astype(float)
            probs = hist / hist.sum()
            weights[p] = -sum(x * np.log2(x) for x in probs if x > 0) / 2.0
        elif measure == "eds":
            grads = [ndimage.sobel(w, axis=a, mode="reflect") for a in range(3)]
            weights[p] = (np.sqrt(sum(g**2 for g in grads)) > 0.2).mean()
        else:
            if w.max() == w.min():
                weights[p] = 1.0
            else:
                weights[p] = max(0.0, brute_moran_geary(w)[0])
    return (u * weights).sum() / u.sum()


@pytest.mark.parametrize("measure", ["entropy", "eds", "moran"])
def test_spatial_mass_ratio_3d(case, measure):
    u, _ = case
    u = u.copy()
    u[0:2, 0:3, 0:2] = 0.5  # constant windows
    # float32 local weights (as Aggrigator's 2D maps): agreement to 1e-6
    assert ours("spatial_mass_ratio", u, measure=measure) == pytest.approx(brute_ratio(u, 3, measure), abs=1e-6)


# --- bad input: documented values or a clear error ------------------------------------------

def test_constant_and_single_voxel_maps():
    for shape in [(4, 5, 3), (1, 1), (3, 1)]:
        u = np.full(shape, 0.25)
        assert ours("morans_i", u) == 1.0 and ours("gearys_c", u) == 1.0
    assert ours("std", np.full((3, 3, 3), 0.25)) == 0.0


def test_absent_class_and_empty_regions(case):
    u, mask = case
    assert ours("class_mean", u, mask, label=7) == pytest.approx(u.mean())
    assert ours("class_mean", u, mask, label=7, empty_value=-1.0) == -1.0
    assert ours("class_boundary_mean", u, mask, label=7) == pytest.approx(u.mean())
    assert ours("class_interior_mean", u, mask, label=2, thickness=3, empty_value=0.0) == 0.0
    background = np.zeros(SHAPE, np.int64)
    assert ours("class_mean_equal", u, background) == pytest.approx(u.mean())
    assert ours("class_mean_occurrence", u, background, empty_value=0.0) == 0.0
    assert ours("above_quantile_mean_fg_ratio", u, background) == pytest.approx(u.max())
    assert ours("spatial_mass_ratio", np.zeros(SHAPE)) == 0.0


def test_clear_errors():
    u = np.random.default_rng(0).random((4, 4, 4))
    with pytest.raises(ValueError, match="negative values"):
        ours("geometric_mean", u - 0.5)
    with pytest.raises(ValueError, match="negative values"):
        ours("harmonic_mean", u - 0.5)
    assert ours("geometric_mean", np.where(u > 0.5, u, 0.0)) == 0.0
    with pytest.raises(ValueError, match="window must be odd"):
        registry.create("aggregation", "spatial_mass_ratio", window=4)
    with pytest.raises(ValueError, match="needs every side"):
        ours("spatial_mass_ratio", np.random.default_rng(0).random((8, 1)), window=3)
    with pytest.raises(ValueError, match="thickness must be >= 0"):
        registry.create("aggregation", "class_interior_mean", thickness=-1)
    with pytest.raises(ValueError):
        registry.create("aggregation", "class_boundary_mean", nbhood="diamond")
    with pytest.raises(ValueError, match="needs the predicted segmentation"):
        registry.create("aggregation", "class_mean_equal")(torch.from_numpy(u))
