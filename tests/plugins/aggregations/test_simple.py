"""Image, quantile, foreground-mean and boundary-mean aggregations against NumPy/SciPy references."""

import numpy as np
import pytest
import torch
from scipy import ndimage

from values_seg import registry

rng = np.random.default_rng(3)


@pytest.mark.parametrize("shape", [(8, 9), (4, 5, 6)])
def test_image_sum_and_mean(shape):
    u = rng.random(shape)
    assert registry.create("aggregation", "image")(torch.tensor(u)) == pytest.approx(u.sum())
    assert registry.create("aggregation", "image", reduction="mean")(torch.tensor(u)) == pytest.approx(u.mean())


def test_quantile_by_hand_and_against_torch():
    u = torch.tensor([[0.0, 1.0], [2.0, 3.0]])
    # sorted 0,1,2,3; q = 0.5 -> position 1.5 -> 1.5; q = 0.95 -> position 2.85 -> 2.85
    assert registry.create("aggregation", "quantile", q=0.5)(u) == pytest.approx(1.5)
    assert registry.create("aggregation", "quantile")(u) == pytest.approx(2.85)
    v = torch.rand(5, 6, 7, dtype=torch.float64)
    assert registry.create("aggregation", "quantile", q=0.9)(v) == pytest.approx(float(torch.quantile(v, 0.9)))
    with pytest.raises(ValueError, match=r"q must lie in \[0, 1\]"):
        registry.create("aggregation", "quantile", q=1.5)


@pytest.mark.parametrize("shape", [(10, 12), (6, 7, 8)])
def test_foreground_mean(shape):
    u, pred = rng.random(shape), (rng.random(shape) < 0.3).astype(np.int64)
    agg = registry.create("aggregation", "foreground_mean")
    assert agg(torch.tensor(u), prediction=torch.tensor(pred)) == pytest.approx(u[pred > 0].mean())
    # empty prediction: the image mean, or the configured value
    assert agg(torch.tensor(u), prediction=torch.zeros(shape)) == pytest.approx(u.mean())
    fixed = registry.create("aggregation", "foreground_mean", empty_value=0.0)
    assert fixed(torch.tensor(u), prediction=torch.zeros(shape)) == 0.0


def reference_band(labels, width):
    edge = np.zeros(labels.shape, bool)
    for axis in range(labels.ndim):
        for shift in (1, -1):
            neighbour = np.roll(labels, shift, axis=axis)
            valid = np.ones(labels.shape, bool)
            idx = [slice(None)] * labels.ndim
            idx[axis] = 0 if shift == 1 else -1  # np.roll wraps around: ignore the wrapped slice
            valid[tuple(idx)] = False
            edge |= valid & (neighbour != labels)
    if width == 0:
        return edge
    return ndimage.binary_dilation(edge, structure=np.ones((3,) * labels.ndim), iterations=width)


@pytest.mark.parametrize("shape", [(16, 16), (8, 9, 10)])
@pytest.mark.parametrize("width", [0, 1, 3])
def test_boundary_mean_matches_scipy_band(shape, width):
    labels = np.zeros(shape, np.int64)
    labels[tuple(slice(2, n // 2 + 1) for n in shape)] = 1
    labels[tuple(slice(n // 2 + 1, n - 1) for n in shape)] = 2  # a second class touching the first
    u = rng.random(shape)
    band = reference_band(labels, width)
    agg = registry.create("aggregation", "boundary_mean", width=width)
    assert agg(torch.tensor(u), prediction=torch.tensor(labels)) == pytest.approx(u[band].mean())


def test_boundary_mean_without_boundary_and_without_prediction():
    u = torch.rand(6, 6)
    agg = registry.create("aggregation", "boundary_mean")
    assert agg(u, prediction=torch.ones(6, 6)) == pytest.approx(float(u.double().mean()))
    with pytest.raises(ValueError, match="needs the predicted segmentation"):
        agg(u)
    with pytest.raises(ValueError, match="does not match map shape"):
        agg(u, prediction=torch.ones(5, 6))
