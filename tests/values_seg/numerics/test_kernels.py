"""The compiled lesion passes of :mod:`values_seg.numerics.kernels` against independent references: the grown
lesions against SciPy's binary dilation, the best overlaps against a per-pair IoU in float64, and
the lesions' sums, maxima and sizes against ``np.bincount`` (to the bit) and a per-lesion maximum;
the binary overlaps (Dice's counts) against NumPy's boolean counts."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from values_seg.numerics import kernels
from values_seg.metrics.lesion import components

CROSS_3D = np.stack(np.meshgrid(*[np.arange(-1, 2)] * 3, indexing="ij"), axis=-1).reshape(-1, 3)
CROSS_3D = CROSS_3D[np.abs(CROSS_3D).sum(axis=1) <= 1]


def _random_labels(rng, shape, connectivity="face"):
    return components(rng.random(shape) < rng.uniform(0.05, 0.6), connectivity)


@pytest.mark.parametrize("seed", range(40))
def test_grown_lesions_are_each_lesion_dilated_by_the_cross(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 9, size=3))
    labels, n = _random_labels(rng, shape)
    margin = int(rng.integers(0, 3))
    ball = np.array([o for o in np.ndindex(*(2 * margin + 1,) * 3)]) - margin
    ball = ball[np.abs(ball).sum(axis=1) <= margin]
    ends, indices = kernels.grown_lesions(labels, n, ball)
    assert ends[0] == 0 and len(ends) == n + 1
    cross = ndimage.generate_binary_structure(3, 1)
    for i in range(1, n + 1):
        grown = labels == i
        if margin:
            grown = ndimage.binary_dilation(grown, cross, iterations=margin)
        np.testing.assert_array_equal(indices[ends[i - 1]:ends[i]], np.flatnonzero(grown))


def test_grown_lesions_without_lesions_are_empty():
    ends, indices = kernels.grown_lesions(np.zeros((1, 3, 3), np.int64), 0, CROSS_3D)
    assert ends.tolist() == [0] and indices.size == 0


def _best_iou_reference(a, n_a, b, n_b, valid):
    keep = np.ones(a.shape, bool) if valid is None else valid
    iou = np.zeros((n_a, n_b))
    for i in range(n_a):
        for j in range(n_b):
            x, y = (a == i + 1) & keep, (b == j + 1) & keep
            union = float((x | y).sum())
            iou[i, j] = (x & y).sum() / union if union else 0.0
    sizes = np.array([((a == i + 1) & keep).sum() for i in range(n_a)], np.int64)
    return (iou.max(axis=1) if n_b else np.zeros(n_a)), (iou.max(axis=0) if n_a else np.zeros(n_b)), sizes


@pytest.mark.parametrize("seed", range(40))
def test_best_overlaps_are_the_largest_iou_per_component(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 10, size=2))
    (a, n_a), (b, n_b) = _random_labels(rng, shape, "edge"), _random_labels(rng, shape)
    valid = None if seed % 2 else rng.random(shape) < 0.8
    got = kernels.best_overlaps(a.reshape(-1), n_a, b.reshape(-1), n_b,
                                np.zeros(0, bool) if valid is None else valid.reshape(-1))
    for g, want in zip(got, _best_iou_reference(a, n_a, b, n_b, valid)):
        np.testing.assert_array_equal(g, want)


def test_best_overlaps_of_a_component_wholly_ignored_is_zero_with_size_zero():
    a = np.array([1, 1, 0, 2], np.int64)
    b = np.array([1, 1, 0, 0], np.int64)
    best_a, best_b, size_a = kernels.best_overlaps(a, 2, b, 1, np.array([False, False, True, True]))
    assert best_a.tolist() == [0.0, 0.0] and best_b.tolist() == [0.0] and size_a.tolist() == [0, 1]


@pytest.mark.parametrize("seed", range(40))
def test_lesion_sums_are_bincount_sums_maxima_and_sizes(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 9, size=2 + seed % 2))
    labels, n = _random_labels(rng, shape, "vertex")
    maps = rng.random((int(rng.integers(1, 4)), labels.size)) * 10.0 ** rng.uniform(-3, 3, size=(1, labels.size))
    if seed % 5 == 0:
        maps[rng.random(maps.shape) < 0.05] = np.nan
    flat = labels.reshape(-1)
    sums, maxima, sizes = kernels.lesion_sums(flat, n, maps)
    for m, row in enumerate(maps):
        np.testing.assert_array_equal(sums[m], np.bincount(flat, weights=row, minlength=n + 1)[1:])  # to the bit
        np.testing.assert_array_equal(maxima[m], [np.max(row[flat == i]) for i in range(1, n + 1)])  # NaN propagates
    np.testing.assert_array_equal(sizes, np.bincount(flat, minlength=n + 1)[1:])


@pytest.mark.parametrize("dtype", [np.uint8, np.int64])
def test_binary_overlaps_count_ones_in_both_and_in_each(dtype):
    """One row of ``a`` serves every row of ``b`` (a prediction against the raters) or rows pair up."""
    rng = np.random.default_rng(4)
    b = (rng.random((3, 1001)) < [[0.0], [0.3], [1.0]]).astype(dtype)  # empty, some, full
    for a in ((rng.random((1, 1001)) < 0.4).astype(dtype), (rng.random((3, 1001)) < 0.6).astype(dtype)):
        both, in_a, in_b = kernels.binary_overlaps(a, b)
        rows = np.broadcast_to(a, b.shape).astype(bool)
        np.testing.assert_array_equal(both, (rows & b.astype(bool)).sum(axis=1))
        np.testing.assert_array_equal(in_a, rows.sum(axis=1))
        np.testing.assert_array_equal(in_b, b.astype(bool).sum(axis=1))


@pytest.mark.parametrize("S", [1, 2, 5])
@pytest.mark.parametrize("C", [2, 3])
def test_sample_pass_sets_at_the_first_sample_and_divides_at_the_last(S, C):
    """The statistics start from whatever the buffers hold (here NaN: the first sample must set,
    not add) and end as the mean and the expected entropy (float64 references), with p = 0 counted
    as 0 log 0 = 0; the labels of two classes: class 1 strictly more likely."""
    rng = np.random.default_rng(S * 10 + C)
    p = rng.dirichlet(np.ones(C), size=(S, 257)).transpose(0, 2, 1).astype(np.float32).copy()  # [S, C, N]
    p[0, :, 0] = 0.0
    p[0, 0, 0] = 1.0  # a certain pixel: p log p = 0 for both classes
    p[-1, :2, 1] = 0.5 if C == 2 else p[-1, :2, 1]  # a tie
    mean, plogp = np.full((C, 257), np.nan, np.float32), np.full(257, np.nan, np.float32)
    labels = np.empty((S, 257 if C == 2 else 0), np.bool_)
    with np.errstate(divide="ignore"):
        for k in range(S):
            kernels.sample_pass(p[k], np.log(p[k]), mean, plogp, labels[k], k, S)
    p64 = p.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.where(p64 > 0, p64 * np.log(p64), 0.0).sum(axis=1)  # [S, N]
    np.testing.assert_allclose(mean, p64.mean(axis=0), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(plogp, entropy.mean(axis=0), rtol=1e-5, atol=1e-6)
    if C == 2:
        np.testing.assert_array_equal(labels, p[:, 1] > p[:, 0])


def test_logf_is_within_one_ulp_of_the_float64_log_for_every_value_the_stored_pass_takes():
    """The stored pass's log (Cephes' logf, compiled): every positive float16 value (normal and
    subnormal, widened to float32), 10^6 float32 values in (1e-30, 1] and every power of two down to
    the smallest normal float32; against NumPy's float64 log, in float32 ulps."""
    import numba

    kernels._scalar_helpers()
    logf = kernels.logf

    @numba.njit
    def logs(x, out):
        for i in range(x.size):
            out[i] = logf(x[i])

    halves = np.arange(1, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float32)  # 6e-8 .. 65504
    rng = np.random.default_rng(0)
    x = np.concatenate([halves, np.exp(rng.uniform(np.log(1e-30), 0, 10**6)).astype(np.float32),
                        np.float32(2.0) ** -np.arange(127, dtype=np.float32)])
    out = np.empty_like(x)
    logs(x, out)
    exact = np.log(x.astype(np.float64))
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    error = np.abs(out - exact) / np.where(exact == 0, np.float64(np.spacing(np.float32(0))), ulp)
    assert error.max() <= 1.0
    assert out[x == 1.0][0] == 0.0


@pytest.mark.parametrize("S", [1, 2, 5])
def test_sample_pass_of_stored_float16_gives_the_statistics_of_the_renormalised_float32(S):
    """Two classes as the cache stores them (float16 bits): widened, divided by their sum and
    logged in the pass, the mean and labels are those of the float32 samples :func:`renormalise`
    gives, bit for bit, and the expected entropy and the entropy of the mean (set by the last sample)
    theirs to float32 rounding (float64 references); zeros (0 log 0 = 0), a certain pixel, a tie,
    float16 subnormals and sums off 1 included."""
    rng = np.random.default_rng(S)
    p = rng.dirichlet(np.ones(2), size=(S, 515)).transpose(0, 2, 1).copy()
    p[0, :, 0] = (1.0, 0.0)  # certain
    p[-1, :, 1] = (0.5, 0.5)  # a tie: class 0
    p[0, :, 2] = (1.0, 6e-8)  # a float16 subnormal
    p[:, :, 3] = (0.7, 0.3)
    stored = (p * rng.uniform(0.999, 1.001, size=(S, 1, 515))).astype(np.float16)  # sums off 1
    bits = stored.view(np.uint16)
    as_float = stored.astype(np.float32)
    kernels.renormalise(as_float)
    outputs = {}
    for name, source in (("stored", bits), ("float", as_float)):
        mean, plogp = np.full((2, 515), np.nan, np.float32), np.full(515, np.nan, np.float32)
        labels = np.empty((S, 515), np.bool_)
        entropy_of_mean = np.full(515, np.nan, np.float32) if name == "stored" else None
        with np.errstate(divide="ignore"):
            for k in range(S):
                logs = None if name == "stored" else np.log(source[k])
                kernels.sample_pass(source[k], logs, mean, plogp, labels[k], k, S, entropy_of_mean)
        outputs[name] = mean, plogp, labels, entropy_of_mean
    (mean, plogp, labels, entropy_of_mean), (mean_f, plogp_f, labels_f, _) = outputs["stored"], outputs["float"]
    np.testing.assert_array_equal(mean, mean_f)
    np.testing.assert_array_equal(labels, labels_f)
    assert not labels[-1, 1] and not labels[0, 0]
    q = as_float.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.where(q > 0, q * np.log(q), 0.0).sum(axis=1).mean(axis=0)
    np.testing.assert_allclose(plogp, entropy, rtol=1e-6, atol=1e-7)
    assert np.isfinite(plogp).all() and (S > 1 or plogp[0] == 0.0)
    m = mean.astype(np.float64)  # the entropy of the mean the pass gave, in float64
    with np.errstate(divide="ignore", invalid="ignore"):
        reference = -np.where(m > 0, m * np.log(m), 0.0).sum(axis=0)
    np.testing.assert_allclose(entropy_of_mean, reference, rtol=1e-6, atol=1e-7)
    assert S > 1 or entropy_of_mean[0] == 0.0  # the certain pixel
    with pytest.raises(ValueError, match="two classes"):
        kernels.sample_pass(np.zeros((3, 4), np.uint16), None, mean[:, :4], plogp[:4], labels[0, :4], 0, S)
    with pytest.raises(ValueError, match="entropy of the mean"):
        kernels.sample_pass(bits[0], None, mean, plogp, labels[0], S - 1, S)


def test_binary_plogp_is_within_two_ulp_of_float64_for_every_pair_the_pass_takes():
    """``a log a + b log b`` with one log (``logf`` of the smaller, the ``ylogy`` polynomial of the
    larger): each term within 2 float32 ulp of NumPy's float64 value over the larger's whole range
    [0.48, 1] (every float32 from 0.5 to 1, a million more down to 0.48), the sum within 2 ulp of its
    own float64 value plus float32 rounding, for every float16 pair renormalised as the pass does."""
    import numba

    kernels._scalar_helpers()
    ylogy, binary_plogp = kernels.ylogy, kernels.binary_plogp

    @numba.njit
    def apply(f, x, out):
        for i in range(x.size):
            out[i] = f(x[i])

    @numba.njit
    def apply2(a, b, out):
        for i in range(a.size):
            out[i] = binary_plogp(a[i], b[i])

    every = np.arange(np.float32(0.5).view(np.int32), np.float32(1.0).view(np.int32) + 1, dtype=np.int32)
    y = np.concatenate([every.view(np.float32), np.random.default_rng(1).uniform(0.48, 0.5, 10**6).astype(np.float32)])
    out = np.empty_like(y)
    apply(ylogy, y, out)
    exact = y.astype(np.float64) * np.log(y.astype(np.float64))
    nonzero = exact != 0
    ulp = np.spacing(np.abs(exact[nonzero]).astype(np.float32)).astype(np.float64)
    assert (np.abs(out[nonzero] - exact[nonzero]) / ulp).max() <= 2.0
    assert out[~nonzero].tolist() == [0.0]  # y = 1

    halves = np.arange(0, 0x3C01, dtype=np.uint16).view(np.float16).astype(np.float32)  # 0 .. 1
    a = np.repeat(halves, 7)
    b = (np.float32(1) - a).astype(np.float16).astype(np.float32)  # as softmax outputs round: sums off 1
    b = np.maximum(b + np.tile(np.float32([-2, -1, 0, 0, 0, 1, 2]) * np.float32(2.0 ** -11), halves.size), 0)
    pair = a + b
    keep = pair > 0
    a, b = a[keep] / pair[keep], b[keep] / pair[keep]
    got = np.empty_like(a)
    apply2(a, b, got)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = np.where(a64 > 0, a64 * np.log(a64), 0.0) + np.where(b64 > 0, b64 * np.log(b64), 0.0)
    ulp = np.spacing(np.maximum(np.abs(exact), 1e-30).astype(np.float32)).astype(np.float64)
    assert (np.abs(got - exact) / ulp).max() <= 3.0  # two terms of <= 2 ulp (the larger's) and <= 1 ulp, one rounding

