"""Reading cached samples: the .npy bytes viewed without a copy; loaded as float32, renormalised over C."""

import numpy as np
import pytest
import torch

from values_seg.engine.predictions import PredictionCache
from values_seg.numerics.stored_samples import renormalised
from values_seg.numerics.validation import _values_verified


def _stored(shape, seed, dtype=np.float16):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(shape[1]), size=(shape[0], *shape[2:]))  # [S, *spatial, C]
    return np.ascontiguousarray(np.moveaxis(p, -1, 1)).astype(dtype)


def test_cache_load_is_renormalised_and_verified(tmp_path):
    cache = PredictionCache(tmp_path)
    stored = _stored((3, 2, 8, 8), seed=5).astype(np.float32) * 1.01  # sums a little off 1, as after float16
    handle = cache.save("p", "d", "test", "case-1", stored)
    loaded = handle.load()
    as_half = stored.astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(loaded.numpy(), as_half / as_half.sum(axis=1, keepdims=True), rtol=3e-7)
    assert _values_verified(loaded)  # checked when predicted: not again


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("version", [(1, 0), (2, 0)])
def test_stored_array_reads_npy_bytes_as_np_load_does_without_a_copy(dtype, order, version):
    import io

    from values_seg.engine.predictions import stored_array

    stored = np.asarray(_stored((2, 3, 5, 4), seed=2, dtype=dtype), order=order)
    buf = io.BytesIO()
    np.lib.format.write_array(buf, stored, version=version)
    data = buf.getvalue()
    got = stored_array(data)
    expected = np.load(io.BytesIO(data), allow_pickle=False)
    assert got.dtype == expected.dtype and got.shape == expected.shape and np.array_equal(got, expected)
    assert np.shares_memory(got, np.frombuffer(data, np.uint8)) and not got.flags.writeable
    loaded = renormalised(got)  # a read-only view: renormalised into new memory, the bytes untouched
    assert np.array_equal(stored_array(data), expected)
    np.testing.assert_allclose(loaded.numpy().sum(axis=1), 1.0, atol=1e-6)


def test_stored_array_refuses_objects_short_files_and_other_bytes():
    import io

    from values_seg.engine.predictions import stored_array

    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="Python objects"):
        stored_array(buf.getvalue())
    buf = io.BytesIO()
    np.save(buf, np.ones((4, 4), np.float16))
    with pytest.raises(ValueError, match="cut short"):
        stored_array(buf.getvalue()[:-3])
    with pytest.raises(ValueError, match="not a .npy file"):
        stored_array(b"PK\x03\x04 a zip file")


@pytest.mark.parametrize("shape", [(10, 2, 6, 7, 8), (5,), (), (3, 0)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.uint8, np.int64, np.bool_])
@pytest.mark.parametrize("order", ["C", "F"])
def test_stored_array_reads_what_np_save_writes(shape, dtype, order):
    """The header np.save writes is read without NumPy's parser: the same array as np.load's."""
    import io

    from values_seg.engine.predictions import _NPY_HEADER, stored_array

    array = np.asarray(np.random.default_rng(0).random(shape) * 3, order=order).astype(dtype, order=order)
    buf = io.BytesIO()
    np.save(buf, array)
    data = buf.getvalue()
    assert _NPY_HEADER.match(data)  # the fast path, not the fallback
    got, expected = stored_array(data), np.load(io.BytesIO(data))
    assert got.dtype == expected.dtype and got.shape == expected.shape and np.array_equal(got, expected)
    assert got.flags.f_contiguous == expected.flags.f_contiguous
