import numpy as np
import pytest
import torch

from values_seg import metrics
from values_seg.metrics import dice, dice_per_class, mean_dice_over_raters, pairwise_dice

from ._reference import ref_dice


def test_binary_hand_computed():
    pred = np.array([[1, 1, 0], [0, 0, 0]])
    ref = np.array([[1, 0, 0], [1, 0, 0]])
    # TP = 1, |P| = 2, |R| = 2 -> 2 * 1 / (2 + 2) = 0.5
    assert dice(pred, ref) == pytest.approx(0.5)
    assert isinstance(dice(pred, ref), float)


def test_empty_masks():
    z = np.zeros((4, 5), dtype=np.int64)
    assert dice(z, z) == 1.0  # convention: two empty masks agree perfectly
    one = z.copy()
    one[1, 1] = 1
    assert dice(z, one) == 0.0  # 2 * 0 / (0 + 1)
    assert dice(one, z) == 0.0


def test_multiclass_hand_computed_with_ignore():
    pred = np.array([0, 1, 1, 2, 2, 3, 0])
    ref = np.array([0, 1, 2, 2, 255, 0, 4])
    # pixel 4 (ref = 255) is dropped -> pred [0,1,1,2,3,0], ref [0,1,2,2,0,4]
    # class 1: TP 1, |P| 2, |R| 1 -> 2/3; class 2: TP 1, |P| 1, |R| 2 -> 2/3
    # class 3: TP 0, |P| 1, |R| 0 -> 0; class 4: TP 0, |P| 0, |R| 1 -> 0; classes 5.. absent
    # macro mean over present foreground classes: (2/3 + 2/3 + 0 + 0) / 4 = 1/3
    assert dice(pred, ref, num_classes=6, ignore_index=255) == pytest.approx(1 / 3)
    per_class = dice_per_class(pred, ref, num_classes=6, ignore_index=255)
    # class 0: TP 1 (pixel 0), |P| 2, |R| 2 -> 0.5
    np.testing.assert_allclose(per_class[:5], [0.5, 2 / 3, 2 / 3, 0.0, 0.0])
    assert np.isnan(per_class[5])


def test_multiclass_all_foreground_absent_is_one():
    z = np.zeros(10, dtype=np.int64)
    assert dice(z, z, num_classes=19) == 1.0


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("shape", [(17, 13), (6, 7, 8)])
@pytest.mark.parametrize("n_classes", [2, 5])
def test_matches_bruteforce(seed, shape, n_classes):
    rng = np.random.default_rng(seed)
    pred = rng.integers(0, n_classes, shape)
    ref = rng.integers(0, n_classes, shape)
    assert dice(pred, ref) == pytest.approx(ref_dice(pred, ref), abs=1e-12)
    # the number of classes does not change the result as long as it covers the labels
    assert dice(pred, ref, num_classes=n_classes + 3) == pytest.approx(ref_dice(pred, ref), abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_ignore_index_matches_bruteforce(seed):
    rng = np.random.default_rng(seed)
    pred = rng.integers(0, 4, (20, 20))
    ref = rng.integers(0, 4, (20, 20))
    ref[rng.random((20, 20)) < 0.3] = 255
    expected = ref_dice(pred, ref, ignore_index=255)
    assert dice(pred, ref, ignore_index=255) == pytest.approx(expected, abs=1e-12)


def test_torch_inputs_and_dtypes():
    rng = np.random.default_rng(0)
    pred = rng.integers(0, 2, (3, 9, 9))
    ref = rng.integers(0, 2, (3, 9, 9))
    expected = ref_dice(pred, ref)
    assert dice(torch.from_numpy(pred), torch.from_numpy(ref)) == pytest.approx(expected)
    assert dice(torch.from_numpy(pred).bool(), torch.from_numpy(ref).to(torch.uint8)) == pytest.approx(expected)
    assert dice(pred.astype(np.float32), ref.astype(bool)) == pytest.approx(expected)


@pytest.mark.parametrize("seed", range(3))
def test_mean_dice_over_raters(seed):
    rng = np.random.default_rng(seed)
    pred = rng.integers(0, 3, (12, 11))
    raters = rng.integers(0, 3, (4, 12, 11))
    raters[0, :3] = 255
    expected = np.mean([ref_dice(pred, r, ignore_index=255) for r in raters])  # eq. 3
    assert mean_dice_over_raters(pred, raters, ignore_index=255) == pytest.approx(expected, abs=1e-12)
    as_list = [torch.from_numpy(r) for r in raters]
    assert mean_dice_over_raters(torch.from_numpy(pred), as_list, ignore_index=255) == pytest.approx(expected)


def test_mean_dice_over_raters_hand_computed():
    pred = np.array([1, 1, 0, 0])
    raters = np.array([[1, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]])
    # Dice: 1, 2*1/(2+1) = 2/3, 2*0/(2+0) = 0 -> mean 5/9
    assert mean_dice_over_raters(pred, raters) == pytest.approx(5 / 9)


@pytest.mark.parametrize("n_classes", [2, 4])
def test_pairwise_dice_matches_double_loop(n_classes):
    rng = np.random.default_rng(n_classes)
    masks = rng.integers(0, n_classes, (5, 8, 9))
    masks[3] = 0  # an empty mask
    masks[4] = 0
    d = pairwise_dice(masks)
    for i in range(5):
        for j in range(5):
            assert d[i, j] == pytest.approx(ref_dice(masks[i], masks[j]), abs=1e-12)
    assert d[3, 4] == 1.0


def test_reexported():
    assert metrics.dice is dice


@pytest.mark.parametrize(
    "pred, ref, num_classes, match",
    [
        (np.zeros((3, 3)), np.zeros((3, 4)), None, "same shape"),
        (np.zeros(0), np.zeros(0), None, "empty"),
        (np.array([0.0, np.nan]), np.array([0, 1]), None, "NaN"),
        (np.array([0.5, 1.0]), np.array([0, 1]), None, "integer"),
        (np.array([0, 3]), np.array([0, 1]), 2, r"\[0, 2\)"),
        (np.array([0, -1]), np.array([0, 1]), None, r"\[0, 2\)"),
    ],
)
def test_invalid_inputs(pred, ref, num_classes, match):
    with pytest.raises(ValueError, match=match):
        dice(pred, ref, num_classes=num_classes)


def test_invalid_num_classes_and_raters_shape():
    with pytest.raises(ValueError, match="num_classes"):
        dice([0, 1], [0, 1], num_classes=1)
    with pytest.raises(ValueError, match="stacked"):
        mean_dice_over_raters(np.zeros((4, 4)), np.zeros((2, 4, 5)))


def test_dice_over_raters_is_per_rater_dice():
    rng = np.random.default_rng(12)
    pred = rng.integers(0, 2, (9, 9)).astype(np.uint8)
    raters = rng.integers(0, 2, (3, 9, 9))
    raters[1] = 0
    got = metrics.dice_over_raters(pred, raters)
    assert np.allclose(got, [metrics.dice(pred, r) for r in raters])
    assert metrics.mean_dice_over_raters(pred, raters) == pytest.approx(got.mean())


def test_without_a_background_class_every_class_counts():
    # class 0 is a real class (Cityscapes' road): Dice_0 = 2*1/(2+1), Dice_1 = 2*1/(1+2), Dice_2 = 1
    pred = np.array([[0, 0, 1, 2]])
    ref = np.array([[0, 1, 1, 2]])
    assert metrics.dice(pred, ref, background=None) == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)
    assert metrics.dice(pred, ref) == pytest.approx((2 / 3 + 1) / 2)  # classes 1 and 2 only
    raters = np.stack([ref, pred])
    assert metrics.dice_over_raters(pred, raters, background=None) == pytest.approx([(2 / 3 + 2 / 3 + 1) / 3, 1.0])
    # GED's distance follows the same convention
    assert metrics.ged(pred[None], ref[None], background=None) == pytest.approx(2 * (1 - 7 / 9))


@pytest.mark.parametrize("M", [1, 2, 13, 16, 17])  # the pattern codes up to 16 masks, the matrix product above
def test_intersections_match_a_double_loop(M):
    from values_seg.metrics.segmentation import intersections

    rng = np.random.default_rng(M)
    masks = rng.random((M, 500)) < rng.random((M, 1))  # from nearly empty to nearly full
    masks[0] = False  # an empty mask
    if M > 1:
        masks[-1] = True  # a full one
    expected = np.array([[np.logical_and(a, b).sum() for b in masks] for a in masks], dtype=np.float64)
    got = intersections(masks)
    assert got.dtype == np.float64 and np.array_equal(got, expected)
