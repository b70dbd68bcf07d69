"""Samples as the prediction cache stores them (values_seg.stored_samples): renormalised over C in one
compiled pass (values_seg.kernels.renormalise); their statistics computed from the stored float16
values themselves (values_seg.kernels.sample_pass), as from the float32 samples."""

import numpy as np
import pytest
import torch

from values_seg import kernels
from values_seg.stored_samples import StoredSamples, renormalised


def _stored(shape, seed, dtype=np.float16):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(shape[1]), size=(shape[0], *shape[2:]))  # [S, *spatial, C]
    return np.ascontiguousarray(np.moveaxis(p, -1, 1)).astype(dtype)


@pytest.mark.parametrize("shape", [(3, 2, 17, 9), (2, 3, 5, 4, 6), (4, 5, 33), (1, 1, 7)])
def test_renormalise_matches_a_float64_reference_and_torch(shape):
    stored = _stored(shape, seed=len(shape))
    stored[0, :, 0] = np.float16(0.25)  # ties between the classes
    as_float = stored.astype(np.float64)
    reference = as_float / as_float.sum(axis=1, keepdims=True)
    got = renormalised(stored.copy())
    assert got.dtype == torch.float32 and tuple(got.shape) == shape and got.is_contiguous()
    np.testing.assert_allclose(got.numpy(), reference, rtol=2e-7 * shape[1], atol=0)
    np.testing.assert_allclose(got.numpy().sum(axis=1, dtype=np.float64), 1.0, rtol=0, atol=1e-6)
    # what it replaces, bit for bit: torch's sum over C and division
    torch_way = torch.from_numpy(stored).float()
    assert torch.equal(got, torch_way.div_(torch_way.sum(dim=1, keepdim=True)))


@pytest.mark.parametrize("C", [2, 3])
def test_renormalise_of_zero_pixels_gives_nan_as_the_division_does(C):
    p = np.zeros((2, C, 4), np.float32)
    p[:, :, 1:] = 1.0
    kernels.renormalise(p)
    assert np.isnan(p[:, :, 0]).all()
    np.testing.assert_array_equal(p[:, :, 1:], np.float32(1) / np.float32(C))


def test_float32_fortran_order_file_is_read_renormalised(tmp_path):
    stored = np.asfortranarray(_stored((2, 3, 6, 5), seed=1, dtype=np.float32) * 2)
    got = renormalised(stored)
    expected = stored.astype(np.float64) / stored.astype(np.float64).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6)
    assert got.is_contiguous()


class _NeverMade(StoredSamples):
    def tensor(self):
        raise AssertionError("the float32 samples were made")


@pytest.mark.parametrize("shape", [(4, 2, 9, 11), (3, 2, 5, 6, 7)])
def test_statistics_of_stored_float16_are_those_of_their_float32_samples_which_are_never_made(shape):
    """The built-in statistics of two-class float16 samples come from the stored values (the
    float32 tensor is not made); the mean and labels equal those of the tensor bit for bit, the
    entropies equal to float32 rounding."""
    from values_seg.measure import SampleStatistics

    stored = _stored(shape, seed=len(shape))
    lazy, tensor = SampleStatistics(_NeverMade(stored)), SampleStatistics(StoredSamples(stored).tensor())
    assert lazy.shape == shape and lazy.dtype == torch.float32
    assert torch.equal(lazy.mean, tensor.mean) and torch.equal(lazy.labels, tensor.labels)
    for name in ("mean_entropy", "entropy_of_mean"):
        torch.testing.assert_close(getattr(lazy, name), getattr(tensor, name), rtol=1e-6, atol=1e-7)
    with pytest.raises(AssertionError, match="were made"):
        lazy.samples  # what a measure that reads the samples gets: made on the first call


@pytest.mark.parametrize("dtype, C", [(np.float16, 3), (np.float32, 2)])
def test_stored_samples_the_pass_cannot_read_are_made_into_float32_first(dtype, C):
    from values_seg.measure import SampleStatistics

    stored = _stored((3, C, 6, 5), seed=C, dtype=dtype)
    assert StoredSamples(stored).bits is None
    lazy, tensor = SampleStatistics(StoredSamples(stored)), SampleStatistics(renormalised(stored.copy()))
    assert torch.equal(lazy.mean, tensor.mean) and torch.equal(lazy.mean_entropy, tensor.mean_entropy)
    assert torch.equal(lazy.samples, tensor.samples)
