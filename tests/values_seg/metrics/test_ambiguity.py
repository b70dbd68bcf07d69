import numpy as np
import pytest
import torch

from values_seg import metrics
from values_seg.metrics import ged, ncc, rater_variance

from ._reference import ref_dice

# ----------------------------------------------------------------------------- rater variance


def test_rater_variance_hand_computed():
    raters = np.array([[[1, 1, 0, 0]], [[1, 0, 0, 1]], [[1, 0, 0, 0]]])  # 3 raters of a 1 x 4 image
    # per pixel p = 1, 1/3, 0, 1/3 -> p (1 - p) = 0, 2/9, 0, 2/9 (eq. 13, population variance)
    np.testing.assert_allclose(rater_variance(raters), [[0, 2 / 9, 0, 2 / 9]])


@pytest.mark.parametrize("shape", [(4, 6, 7), (3, 4, 5, 6)])
def test_rater_variance_binary_matches_eq13_loop(shape):
    rng = np.random.default_rng(len(shape))
    raters = rng.integers(0, 2, shape)
    n = shape[0]
    mean = sum(raters[j] for j in range(n)) / n
    expected = sum((raters[j] - mean) ** 2 for j in range(n)) / n
    np.testing.assert_allclose(rater_variance(raters), expected, atol=1e-12)
    np.testing.assert_allclose(rater_variance(torch.from_numpy(raters).bool()), expected, atol=1e-12)
    np.testing.assert_allclose(rater_variance(list(torch.from_numpy(raters))), expected, atol=1e-12)


def test_rater_variance_multiclass_sums_one_hot_variances():
    rng = np.random.default_rng(0)
    raters = rng.integers(0, 4, (5, 6, 6))
    expected = np.zeros((6, 6))
    for c in range(4):
        ind = (raters == c).astype(np.float64)
        expected += ((ind - ind.mean(axis=0)) ** 2).mean(axis=0)
    np.testing.assert_allclose(rater_variance(raters), expected, atol=1e-12)
    # a class that nobody uses adds nothing
    np.testing.assert_allclose(rater_variance(raters, num_classes=7), expected, atol=1e-12)
    # hand: raters say 0, 1, 2 at one pixel -> 3 * (1/3)(2/3) = 2/3
    assert rater_variance(np.array([0, 1, 2]).reshape(3, 1, 1))[0, 0] == pytest.approx(2 / 3)


def test_rater_variance_invalid():
    with pytest.raises(ValueError, match="stacked"):
        rater_variance(np.array([0, 1, 1]))
    with pytest.raises(ValueError, match="stacked on the first axis"):  # one 2D mask, not 3 raters of 1D masks
        rater_variance(np.array([[0, 1], [1, 1], [0, 0]]))
    with pytest.raises(ValueError, match="integer"):
        rater_variance(np.array([[[0.5, 1.0]], [[0.0, 1.0]]]))
    with pytest.raises(ValueError, match="same shape"):
        rater_variance([np.zeros((2, 2)), np.zeros((2, 3))])


# ----------------------------------------------------------------------------- NCC


def ref_ncc(a, b):
    """Eq. 12 by the formula, float64, population std."""
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    n = len(a)
    mu_a, mu_b = sum(a) / n, sum(b) / n
    sd_a = np.sqrt(sum((a - mu_a) ** 2) / n)
    sd_b = np.sqrt(sum((b - mu_b) ** 2) / n)
    return sum((a - mu_a) * (b - mu_b)) / (n * sd_a * sd_b)


def test_ncc_hand_computed():
    assert ncc([1.0, 2.0, 3.0], [2.0, 4.0, 6.0]) == pytest.approx(1.0)
    assert ncc([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == pytest.approx(-1.0)
    # a = [0, 0, 1, 1], b = [0, 1, 0, 1]: covariance 0 -> NCC 0
    assert ncc([0, 0, 1, 1], [0, 1, 0, 1]) == pytest.approx(0.0)


@pytest.mark.parametrize("shape", [(9, 8), (4, 5, 6)])
@pytest.mark.parametrize("seed", range(3))
def test_ncc_matches_formula(shape, seed):
    rng = np.random.default_rng(seed)
    a = rng.random(shape)
    b = 0.5 * a + rng.random(shape)
    assert ncc(a, b) == pytest.approx(ref_ncc(a, b), abs=1e-12)
    assert ncc(a, b) == pytest.approx(np.corrcoef(a.ravel(), b.ravel())[0, 1], abs=1e-12)
    # invariant to positive affine maps, torch input, float32
    assert ncc(3 * a + 1, b) == pytest.approx(ncc(a, b), abs=1e-12)
    assert ncc(torch.from_numpy(a).float(), torch.from_numpy(b).float()) == pytest.approx(ref_ncc(a, b), abs=1e-5)


def test_ncc_constant_map_is_nan():
    assert np.isnan(ncc(np.zeros((4, 4)), np.random.default_rng(0).random((4, 4))))
    assert np.isnan(ncc(np.arange(5.0), np.full(5, 0.1)))


def test_ncc_invalid():
    with pytest.raises(ValueError, match="same shape"):
        ncc(np.zeros((3, 3)), np.zeros((3, 4)))
    with pytest.raises(ValueError, match="NaN"):
        ncc([0.0, np.nan], [0.0, 1.0])
    with pytest.raises(ValueError, match="empty"):
        ncc([], [])


# ----------------------------------------------------------------------------- GED


def ref_ged(pred, refs, ignore_index=None):
    """Eq. 14 with explicit double loops over all ordered pairs (i = j included), d = 1 - Dice."""
    pred = [np.asarray(p) for p in pred]
    refs = [np.asarray(r) for r in refs]
    if ignore_index is not None:
        keep = np.all([r != ignore_index for r in refs], axis=0)
        pred = [p[keep] for p in pred]
        refs = [r[keep] for r in refs]

    def mean_d(xs, ys):
        return np.mean([1 - ref_dice(x, y) for x in xs for y in ys])

    return 2 * mean_d(refs, pred) - mean_d(refs, refs) - mean_d(pred, pred)


def test_ged_hand_computed():
    pred = np.array([[[0, 1, 1]]])  # one 1 x 3 mask
    refs = np.array([[[1, 1, 0]], [[0, 1, 1]]])
    # d(pred, r1) = 1 - 2*1/(2+2) = 0.5, d(pred, r2) = 0 -> cross mean 0.25
    # refs: ordered pairs (r1,r1)=0, (r1,r2)=0.5, (r2,r1)=0.5, (r2,r2)=0 -> 0.25; preds: 0
    # GED = 2 * 0.25 - 0.25 - 0 = 0.25
    assert ged(pred, refs) == pytest.approx(0.25)


def test_ged_identical_sets_is_zero_and_symmetric():
    rng = np.random.default_rng(1)
    masks = rng.integers(0, 2, (3, 10, 10))
    assert ged(masks, masks) == pytest.approx(0.0, abs=1e-12)
    other = rng.integers(0, 2, (4, 10, 10))
    assert ged(masks, other) == pytest.approx(ged(other, masks), abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("spatial, n_classes", [((9, 10), 2), ((5, 6, 7), 2), ((9, 10), 4)])
def test_ged_matches_double_loop(seed, spatial, n_classes):
    rng = np.random.default_rng(seed)
    pred = rng.integers(0, n_classes, (4,) + spatial)
    refs = rng.integers(0, n_classes, (3,) + spatial)
    pred[0] = 0  # an empty prediction
    refs[2] = 0  # an empty reference: Dice(empty, empty) = 1
    assert ged(pred, refs) == pytest.approx(ref_ged(pred, refs), abs=1e-10)
    tensors = [torch.from_numpy(p) for p in pred]
    assert ged(tensors, torch.from_numpy(refs)) == pytest.approx(ref_ged(pred, refs), abs=1e-10)


def test_ged_ignore_index():
    rng = np.random.default_rng(5)
    pred = rng.integers(0, 3, (3, 12, 12))
    refs = rng.integers(0, 3, (2, 12, 12))
    refs[0, :4] = 255
    refs[1, :, :2] = 255
    expected = ref_ged(pred, refs, ignore_index=255)
    assert ged(pred, refs, num_classes=3, ignore_index=255) == pytest.approx(expected, abs=1e-10)


def test_ged_invalid():
    with pytest.raises(ValueError, match="spatial shape"):
        ged(np.zeros((2, 4, 4)), np.zeros((2, 4, 5)))
    with pytest.raises(ValueError, match="stacked"):
        ged(np.zeros(4), np.zeros((2, 1, 4)))
    with pytest.raises(ValueError, match="stacked on the first axis"):  # unstacked 2D masks
        ged(np.zeros((4, 4)), np.zeros((4, 4)))
    with pytest.raises(ValueError, match="empty"):
        ged(np.zeros((0, 1, 4)), np.zeros((2, 1, 4)))
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        ged(np.full((1, 1, 4), 2), np.zeros((2, 1, 4)), num_classes=2)


def test_ncc_many_equals_ncc_per_map():
    rng = np.random.default_rng(11)
    reference = rng.random((6, 7))
    maps = rng.random((4, 6, 7))
    maps[2] = 0.5  # a constant map: undefined
    got = metrics.ncc_many(reference, maps)
    for m, value in zip(maps, got):
        assert np.isclose(value, metrics.ncc(reference, m), equal_nan=True)
    assert np.isnan(got[2])
    assert np.isnan(metrics.ncc_many(np.zeros((6, 7)), maps)).all()  # constant reference
    assert np.isnan(metrics.ncc_many(np.full((6, 7), 0.1), maps)).all()  # constant, not exactly representable
    almost = np.zeros((6, 7))
    almost[5, 6] = 1.0  # one pixel differs: defined, the Pearson correlation (float64 reference)
    got = metrics.ncc_many(almost, maps)
    expected = [np.corrcoef(almost.ravel(), m.ravel())[0, 1] if m.std() > 0 else np.nan for m in maps]
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


def test_ignored_pixels_carry_no_rater_variance():
    raters = np.array([[[1, 0, 255]], [[0, 0, 1]], [[1, 0, 1]]])
    got = rater_variance(raters, num_classes=2, ignore_index=255)
    np.testing.assert_allclose(got, [[2 / 9, 0.0, 0.0]])


def test_ncc_many_of_a_large_stack_far_from_zero_matches_corrcoef():
    rng = np.random.default_rng(5)
    shape = (37, 41, 29)  # an odd size: the compiled sums' SIMD lanes end in a partial one
    reference = rng.random(shape)
    maps = (0.3 * reference + rng.random((3, *shape)) + 100.0).astype(np.float32)  # far from 0: centring matters
    got = metrics.ncc_many(reference, maps)
    expected = [np.corrcoef(reference.ravel(), m.astype(np.float64).ravel())[0, 1] for m in maps]
    np.testing.assert_allclose(got, expected, atol=1e-9)
    assert metrics.ncc(reference, torch.from_numpy(maps[1])) == pytest.approx(expected[1], abs=1e-9)
    with pytest.raises(ValueError, match=r"ncc: predicted_maps: contains 1 NaN and 0 infinite"):
        maps[2, 3, 4, 5] = np.nan
        metrics.ncc_many(reference, maps)


@pytest.mark.parametrize("n", [1, 2, 300])  # 300 raters: counts above a uint8
def test_rater_variance_of_many_raters_is_eq13(n):
    rng = np.random.default_rng(n)
    raters = (rng.random((n, 5, 6)) < 0.4).astype(np.int64)
    np.testing.assert_allclose(rater_variance(raters), raters.astype(np.float64).var(axis=0), atol=1e-15)


@pytest.mark.parametrize("offset, ignore", [(0, -1), (290, -1), (0, 255)])  # uint8-compactable or not
def test_ged_of_int64_labels_any_range_matches_double_loop(offset, ignore):
    rng = np.random.default_rng(offset + 3)
    pred = rng.integers(0, 3, (4, 9, 8)).astype(np.int64) + offset
    refs = rng.integers(0, 3, (3, 9, 8)).astype(np.int64) + offset
    pred[:, 0] = 0  # background in every mask
    refs[:, 0] = 0
    refs[1, 2:4] = ignore
    expected = ref_ged(pred, refs, ignore_index=ignore)
    got = ged(pred, refs, num_classes=offset + 3, ignore_index=ignore)
    assert got == pytest.approx(expected, abs=1e-10)
    assert ged(pred.astype(np.uint16), refs.astype(np.int32), num_classes=offset + 3, ignore_index=ignore) == got


def test_ncc_with_a_mask_counts_only_its_pixels():
    rng = np.random.default_rng(3)
    a, b = rng.random((9, 7)), rng.random((2, 9, 7))
    keep = rng.random((9, 7)) < 0.6
    got = metrics.ncc_many(a, b, mask=keep)
    for i in range(2):  # float64 reference on the kept pixels only
        assert got[i] == pytest.approx(np.corrcoef(a[keep], b[i][keep])[0, 1], abs=1e-12)
    assert ncc(a, b[0], mask=keep) == pytest.approx(got[0], abs=1e-15)
    assert np.isnan(ncc(a, b[0], mask=np.zeros((9, 7), dtype=bool)))
    with pytest.raises(ValueError, match="mask must be a boolean map of shape"):
        ncc(a, b[0], mask=keep[:3])


def test_ncc_of_float32_maps_whose_sum_overflows_float32_is_still_computed():
    """The finite check sums in the maps' precision: an overflowing sum of finite values is no error."""
    rng = np.random.default_rng(3)
    reference = rng.random((40, 50))
    maps = (reference + rng.random((2, 40, 50))).astype(np.float32) * np.float32(1e36)  # sum > float32 max
    with np.errstate(over="ignore"):
        assert not np.isfinite(maps.sum())
    expected = [np.corrcoef(reference.ravel(), m.astype(np.float64).ravel())[0, 1] for m in maps]
    np.testing.assert_allclose(metrics.ncc_many(reference, maps), expected, atol=1e-9)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ncc_many_refuses_a_map_with_a_nan_or_infinity_anywhere(bad, dtype):
    """The stack's finite check is its own float64 sums (no separate pass): a non-finite value in
    any map, first pixel or last, is still a ValueError that counts it."""
    rng = np.random.default_rng(3)
    reference = rng.random((6, 7))
    for where in [(0, 0, 0), (2, 5, 6)]:
        maps = rng.random((3, 6, 7)).astype(dtype)
        maps[where] = bad
        with pytest.raises(ValueError, match=r"ncc: predicted_maps: contains [01] NaN and [01] infinite"):
            metrics.ncc_many(reference, maps)
