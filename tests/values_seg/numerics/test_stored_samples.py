"""Samples as the prediction cache stores them (values_seg.numerics.stored_samples): renormalised over C in one
compiled pass (values_seg.numerics.kernels.renormalise); their statistics computed from the stored float16
values themselves (values_seg.numerics.kernels.sample_pass), as from the float32 samples."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from values_seg.numerics import kernels
from values_seg.components.measure import SampleStatistics
from values_seg.numerics.stored_samples import StoredSamples, renormalised


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
    from values_seg.components.measure import SampleStatistics

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
    from values_seg.components.measure import SampleStatistics

    stored = _stored((3, C, 6, 5), seed=C, dtype=dtype)
    assert StoredSamples(stored).bits is None
    lazy, tensor = SampleStatistics(StoredSamples(stored)), SampleStatistics(renormalised(stored.copy()))
    assert torch.equal(lazy.mean, tensor.mean) and torch.equal(lazy.mean_entropy, tensor.mean_entropy)
    assert torch.equal(lazy.samples, tensor.samples)


def _statistics_of_every_float16() -> dict[str, np.ndarray]:
    """The stored pass's statistics of two samples in which every non-negative finite float16
    value occurs in each class."""
    finite = np.arange(0x7C00, dtype=np.uint16).view(np.float16)
    other = np.random.default_rng(0).random((2, finite.size)).astype(np.float16) + np.float16(1e-3)
    stored = np.ascontiguousarray(np.stack([np.stack([finite, other[0]]), np.stack([other[1], finite[::-1]])]))
    statistics = SampleStatistics(StoredSamples(stored))
    return {name: getattr(statistics, name).numpy() for name in ("mean", "mean_entropy", "entropy_of_mean", "labels")}


@pytest.mark.slow
def test_stored_statistics_on_a_target_without_the_cpus_float16_conversion_are_the_same(tmp_path):
    """Compiled for numba's portable target (``NUMBA_CPU_NAME=generic``: x86-64 without F16C, where
    LLVM widens float16 by a runtime helper the JIT does not link), the pass over stored samples
    widens them by integer arithmetic: its statistics of every non-negative finite float16 value
    are those of this machine's conversion, bit for bit (in a fresh process, since numba reads the
    setting at import, and a fresh numba cache, so that the pass is compiled for that target)."""
    out = tmp_path / "generic.npz"
    env = {**os.environ, "NUMBA_CPU_NAME": "generic", "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    env.pop("NUMBA_CPU_FEATURES", None)
    script = ("import sys, numpy as np; sys.path.insert(0, sys.argv[2]);"
              " from test_stored_samples import _statistics_of_every_float16;"
              " np.savez(sys.argv[1], **_statistics_of_every_float16())")
    done = subprocess.run([sys.executable, "-c", script, str(out), os.path.dirname(__file__)], env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    expected = _statistics_of_every_float16()
    with np.load(out) as got:
        for name, value in expected.items():
            np.testing.assert_array_equal(got[name], value, err_msg=name)
    assert np.isfinite(expected["mean_entropy"]).all()
