"""The shared sample statistics (values_seg.components.measure.SampleStatistics) against float64 references."""

import numpy as np
import pytest
import torch

from values_seg.components.measure import SampleStatistics


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(6, 2, 5, 7), (3, 4, 3, 4, 5), (1, 2, 8, 8)])
def test_one_pass_statistics_match_float64_references(shape, dtype):
    rng = np.random.default_rng(len(shape))
    p = rng.random(shape) ** 4  # many values near 0
    p[0, :, 0, 0] = 0.0  # exact zeros: 0 log 0 = 0
    p[0, 0, 0, 0] = 1.0
    p[-1, :, 0, 1] = 1.0  # a tie between all classes: labels go to the lower class
    p /= p.sum(axis=1, keepdims=True)
    stats = SampleStatistics(torch.tensor(p, dtype=dtype))
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(p > 0, p * np.log(p), 0.0)
    tol = 1e-6 if dtype == torch.float32 else 1e-12
    np.testing.assert_allclose(stats.mean.numpy(), p.mean(axis=0), rtol=tol, atol=tol)
    np.testing.assert_allclose(stats.mean_entropy.numpy(), -plogp.sum(axis=1).mean(axis=0), rtol=tol, atol=tol)
    np.testing.assert_array_equal(stats.labels.numpy(), p.astype(np.dtype(str(dtype).split(".")[1])).argmax(axis=1))
    assert stats.mean.dtype == dtype and stats.labels.dtype == torch.uint8
    mean = p.mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.where(mean > 0, mean * np.log(mean), 0.0).sum(axis=0)
    np.testing.assert_allclose(stats.entropy_of_mean.numpy(), entropy, rtol=tol, atol=tol)
    assert stats.entropy_of_mean.dtype == dtype


@pytest.mark.parametrize("C", [1, 2, 3])
def test_entropy_of_mean_edge_cases(C):
    """Certain pixels (one class 1, the others exactly 0: entropy exactly 0), the uniform mean (log
    C), a constant map; and the same values as the vectorised torch path (values_seg.components.measure.entropy)."""
    from values_seg.components.measure import entropy

    p = np.zeros((3, C, 4, 5), np.float32)
    p[:, 0] = 1.0  # certain everywhere: 0 log 0 = 0, 1 log 1 = 0
    p[:, :, 1] = 1.0 / C  # uniform
    got = SampleStatistics(torch.from_numpy(p)).entropy_of_mean.numpy()
    np.testing.assert_array_equal(got[0], 0.0)
    np.testing.assert_allclose(got[1], np.log(C), rtol=1e-6, atol=1e-7)
    rng = np.random.default_rng(C)
    q = rng.dirichlet(np.ones(C), size=(4, 6, 7)).astype(np.float32).transpose(0, 3, 1, 2).copy()
    stats = SampleStatistics(torch.from_numpy(q))
    torch.testing.assert_close(stats.entropy_of_mean, entropy(stats.mean, dim=0), rtol=2e-7, atol=2e-7)
