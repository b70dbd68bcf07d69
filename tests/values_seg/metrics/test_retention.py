import itertools
import math

import numpy as np
import pytest

from values_seg import metrics
from values_seg.metrics import (
    dice,
    dice_retention_curve,
    ndsc,
    ndsc_rauc,
    ndsc_retention_curve,
    retention_fractions,
    retention_rauc,
)


def ref_ndsc(gt, seg, r=0.001):
    """Shifts' dice_norm_metric (Shifts 2.0 code, mswml/metrics.py), re-implemented in float64."""
    gt = np.asarray(gt, dtype=np.float64).ravel()
    seg = np.asarray(seg, dtype=np.float64).ravel()
    if seg.sum() + gt.sum() == 0:
        return 1.0
    k = 1.0 if gt.sum() == 0 else (1 - r) * gt.sum() / (r * (len(gt) - gt.sum()))
    tp = seg[gt == 1].sum()
    fp = seg[gt == 0].sum()
    fn = gt[seg == 0].sum()
    return 2 * tp / (k * fp + 2 * tp + fn)


def ref_retention(gt, seg, unc, r=0.001, n_points=200):
    """Shifts' nDSC retention loop: sort by uncertainty, keep int(N f) predictions, the rest from gt."""
    order = np.argsort(np.asarray(unc).ravel(), kind="stable")
    gts, preds = np.asarray(gt).ravel()[order], np.asarray(seg).ravel()[order]
    n = len(gts)
    fracs = np.log(np.arange(1, n_points + 1)) / np.log(n_points)
    scores = []
    for f in fracs:
        pos = int(n * f)
        scores.append(ref_ndsc(gts, np.concatenate([preds[:pos], gts[pos:]]), r))
    return fracs, np.array(scores)


# ----------------------------------------------------------------------------- nDSC


def test_ndsc_by_hand():
    ref = np.zeros(10, int)
    ref[[0, 1]] = 1
    pred = np.zeros(10, int)
    pred[[1, 2, 3]] = 1  # TP 1, FP 2, FN 1
    # r = 0.2: k = 0.8 * 2 / (0.2 * 8) = 1 -> the Dice, 2 / (2 + 2 + 1) = 0.4
    assert ndsc(pred, ref, r=0.2) == pytest.approx(0.4)
    assert ndsc(pred, ref, r=0.2) == pytest.approx(dice(pred, ref))
    # r = 0.1: k = 0.9 * 2 / (0.1 * 8) = 2.25 -> 2 / (2 + 4.5 + 1)
    assert ndsc(pred, ref, r=0.1) == pytest.approx(2 / 7.5)
    # default r = 0.001: k = 0.999 * 2 / (0.001 * 8) = 249.75
    assert ndsc(pred, ref) == pytest.approx(2 / (2 + 2 * 249.75 + 1))


def test_ndsc_equals_dice_when_lesion_load_is_r():
    # 1 lesion voxel of 1000 = r = 0.001: k = 0.999 / (0.001 * 999) = 1
    rng = np.random.default_rng(0)
    ref = np.zeros((10, 10, 10), int)
    ref[5, 5, 5] = 1
    for _ in range(5):
        pred = (rng.random((10, 10, 10)) < 0.01).astype(int)
        pred[5, 5, 5] = rng.integers(2)
        assert ndsc(pred, ref) == pytest.approx(dice(pred, ref), abs=1e-12)


def test_ndsc_equals_dice_without_false_positives():
    ref = np.zeros(100, bool)
    ref[:30] = True
    pred = np.zeros(100, bool)
    pred[:12] = True  # a subset of the reference
    assert ndsc(pred, ref) == pytest.approx(dice(pred, ref)) == pytest.approx(24 / 42)


def test_ndsc_conventions():
    empty = np.zeros(20, int)
    some = empty.copy()
    some[3] = 1
    assert ndsc(empty, empty) == 1.0  # both empty
    assert ndsc(some, empty) == 0.0  # empty reference, k = 1: the plain Dice
    assert ndsc(empty, some) == 0.0  # missed lesion
    full = np.ones(20, int)
    half = full.copy()
    half[:10] = 0
    assert ndsc(half, full) == pytest.approx(dice(half, full))  # no negative voxel: no FP
    assert ndsc(full, full) == 1.0


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("r", [0.001, 0.05, 0.5])
def test_ndsc_matches_shifts_code(seed, r):
    rng = np.random.default_rng(seed)
    ref = rng.random((8, 9, 10)) < rng.uniform(0.005, 0.3)
    pred = np.where(rng.random(ref.shape) < 0.1, ~ref, ref)
    assert ndsc(pred, ref, r=r) == pytest.approx(ref_ndsc(ref, pred, r), abs=1e-12)


def test_ndsc_invalid():
    with pytest.raises(ValueError, match="r must lie"):
        ndsc([0, 1], [0, 1], r=0)
    with pytest.raises(ValueError, match="binary"):
        ndsc([0, 2], [0, 1])
    with pytest.raises(ValueError, match="same shape"):
        ndsc([0, 1, 1], [0, 1])


# ----------------------------------------------------------------------------- voxel-level retention


def test_fractions_are_shifts_log_spacing():
    f = retention_fractions(5)
    np.testing.assert_allclose(f, [0, math.log(2) / math.log(5), math.log(3) / math.log(5), math.log(4) / math.log(5), 1])
    with pytest.raises(ValueError):
        retention_fractions(1)


def test_ndsc_retention_by_hand():
    gt = [1, 1, 0, 0]
    pred = [1, 0, 1, 0]  # voxel 0 TP, 1 FN, 2 FP, 3 TN
    unc = [0.1, 0.4, 0.3, 0.2]  # retained in the order TP, TN, FP, FN
    # r = 0.25: k = 0.75 * 2 / (0.25 * 2) = 3; n_points 5: kept floor(4 f) = 0, 1, 2, 3, 4
    # kept 0-2: every error replaced -> 1; kept 3: TP 2, FP 1 -> 4 / (3 + 4) ; kept 4: TP 1, FP 1, FN 1 -> 2 / 6
    f, v = ndsc_retention_curve(pred, gt, unc, r=0.25, n_points=5)
    np.testing.assert_allclose(v, [1, 1, 1, 4 / 7, 1 / 3])
    l5 = math.log(5)
    area = (
        math.log(3) / l5 * 1.0
        + (math.log(4) - math.log(3)) / l5 * (1 + 4 / 7) / 2
        + (l5 - math.log(4)) / l5 * (4 / 7 + 1 / 3) / 2
    )
    assert ndsc_rauc(pred, gt, unc, r=0.25, n_points=5) == pytest.approx(1 - area)
    assert retention_rauc(f, v) == pytest.approx(1 - area)


def test_ndsc_retention_ties_interpolate_counts():
    gt = [1, 1, 0, 0]
    pred = [1, 0, 1, 0]
    unc = [0.1, 0.3, 0.3, 0.2]  # the FN and the FP tie
    # kept 3 cuts the tie group in half: FP 0.5, FN 0.5, TP = 1 + (2 - 1.5) = 1.5 -> 3 / (1.5 + 3 + 0.5)
    _, v = ndsc_retention_curve(pred, gt, unc, r=0.25, n_points=5)
    np.testing.assert_allclose(v, [1, 1, 1, 0.6, 1 / 3])
    # and the result does not depend on the voxel order
    perm = [2, 0, 3, 1]
    _, vp = ndsc_retention_curve(np.take(pred, perm), np.take(gt, perm), np.take(unc, perm), r=0.25, n_points=5)
    np.testing.assert_allclose(vp, v)


@pytest.mark.parametrize("seed", range(4))
def test_ndsc_retention_matches_shifts_loop(seed):
    rng = np.random.default_rng(seed)
    shape = (12, 12, 12)
    gt = rng.random(shape) < 0.05
    pred = np.where(rng.random(shape) < 0.03, ~gt, gt)
    unc = rng.random(shape) + 0.5 * (pred != gt)  # distinct, informative
    f, v = ndsc_retention_curve(pred, gt, unc)
    rf, rv = ref_retention(gt, pred, unc)
    np.testing.assert_allclose(f, rf)
    np.testing.assert_allclose(v, rv, atol=1e-12)
    ref_rauc = 1 - float(np.sum(np.diff(rf) * (rv[1:] + rv[:-1]) / 2))
    assert ndsc_rauc(pred, gt, unc) == pytest.approx(ref_rauc, abs=1e-12)


def test_ndsc_retention_informative_beats_random():
    rng = np.random.default_rng(5)
    gt = rng.random((20, 20, 20)) < 0.05
    pred = np.where(rng.random(gt.shape) < 0.02, ~gt, gt)
    good = rng.random(gt.shape) * 0.1 + (pred != gt)
    bad = rng.random(gt.shape)
    assert ndsc_rauc(pred, gt, good) < ndsc_rauc(pred, gt, bad)
    assert ndsc_rauc(gt, gt, bad) == pytest.approx(0.0)  # a perfect prediction: nDSC 1 everywhere


def test_ndsc_retention_invalid():
    with pytest.raises(ValueError, match="same length"):
        ndsc_retention_curve([0, 1], [0, 1], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="NaN"):
        ndsc_retention_curve([0, 1], [0, 1], [0.1, np.nan])


# ----------------------------------------------------------------------------- image-level retention


def test_dice_retention_by_hand():
    dice_values = [0.9, 0.5, 0.7, 0.2]
    unc = [0.2, 0.1, 0.4, 0.3]  # retained in the order 0.5, 0.9, 0.2, 0.7
    c = dice_retention_curve(dice_values, unc)
    np.testing.assert_allclose(c.fractions, [0, 0.25, 0.5, 0.75, 1])
    np.testing.assert_allclose(c.values, [1, 0.875, 0.85, 0.65, 0.575])
    np.testing.assert_allclose(c.random, [1, 0.89375, 0.7875, 0.68125, 0.575])
    np.testing.assert_allclose(c.oracle, [1, 0.975, 0.9, 0.775, 0.575])
    # R-AUC = 1 - trapezoid, 0.25 * [(1 + .875)/2 + (.875 + .85)/2 + (.85 + .65)/2 + (.65 + .575)/2]
    assert c.rauc == pytest.approx(1 - 0.25 * (1.875 + 1.725 + 1.5 + 1.225) / 2)
    assert c.oracle_rauc <= c.rauc <= c.random_rauc + 0.05
    assert c.random_rauc == pytest.approx((1 - 0.575) / 2)  # a straight line from 1 to the mean Dice


def test_dice_retention_oracle_ranking_equals_oracle():
    dice_values = np.array([0.9, 0.5, 0.7, 0.2, 1.0])
    c = dice_retention_curve(dice_values, 1 - dice_values)
    np.testing.assert_allclose(c.values, c.oracle)


def test_dice_retention_ties_are_the_mean_over_orders():
    rng = np.random.default_rng(3)
    dice_values = rng.random(7)
    unc = np.array([0.3, 0.1, 0.3, 0.3, 0.2, 0.1, 0.5])
    groups = [np.flatnonzero(unc == u) for u in np.unique(unc)]
    curves = []
    for perms in itertools.product(*[itertools.permutations(g) for g in groups]):
        order = np.concatenate(perms)  # ascending uncertainty, one order of the tied cases
        retained = np.r_[0, np.cumsum(dice_values[order])]
        curves.append((retained + 7 - np.arange(8)) / 7)
    np.testing.assert_allclose(dice_retention_curve(dice_values, unc).values, np.mean(curves, axis=0), atol=1e-12)
    # all tied: exactly the random baseline
    c = dice_retention_curve(dice_values, np.zeros(7))
    np.testing.assert_allclose(c.values, c.random, atol=1e-12)


def test_dice_retention_single_case_and_invalid():
    c = dice_retention_curve([0.4], [1.0])
    np.testing.assert_allclose(c.values, [1, 0.4])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        dice_retention_curve([1.2, 0.3], [0.1, 0.2])
    with pytest.raises(ValueError, match="empty"):
        dice_retention_curve([], [])


@pytest.mark.parametrize("ties", [False, True])
def test_ndsc_rauc_many_equals_one_at_a_time(ties):
    rng = np.random.default_rng(21)
    prediction = rng.random((9, 11)) < 0.35
    references = np.stack([rng.random((9, 11)) < p for p in (0.2, 0.35, 0.5)])
    references[0] = False  # an empty reference (Shifts' plain-Dice convention)
    maps = rng.random((4, 9, 11))
    if ties:
        maps = np.round(maps, 1)
    maps[3] = 0.5  # a constant map: every voxel tied
    got = metrics.ndsc_rauc_many(prediction, references, maps, r=0.01, n_points=50)
    expected = [[metrics.ndsc_rauc(prediction, ref, m, r=0.01, n_points=50) for ref in references] for m in maps]
    np.testing.assert_allclose(got, expected, atol=1e-12)
    with pytest.raises(ValueError, match="voxels"):
        metrics.ndsc_rauc_many(prediction, references[:, :5], maps)


# ----------------------------------------------------------------------------- no background class


def ref_class_ndsc(prediction, reference, r):
    """Float64 reference: the Shifts nDSC of each class present in either map, one vs the rest, averaged."""
    p, g = np.ravel(prediction), np.ravel(reference)
    values = []
    for c in sorted(set(p.tolist()) | set(g.tolist())):
        tp = float(np.sum((p == c) & (g == c)))
        fp = float(np.sum((p == c) & (g != c)))
        fn = float(np.sum((p != c) & (g == c)))
        load = np.sum(g == c)
        k = 1.0 if load == 0 else 0.0 if load == g.size else (1 - r) * load / (r * (g.size - load))
        values.append(1.0 if 2 * tp + k * fp + fn == 0 else 2 * tp / (2 * tp + k * fp + fn))
    return float(np.mean(values))


@pytest.mark.parametrize("seed", range(4))
def test_class_ndsc_is_the_mean_of_the_one_vs_rest_ndsc(seed):
    rng = np.random.default_rng(seed)
    pred = rng.integers(0, 5, (12, 9))
    ref = np.where(rng.random((12, 9)) < 0.7, pred, rng.integers(0, 6, (12, 9)))  # class 5 only in the reference
    assert metrics.class_ndsc(pred, ref, r=0.05) == pytest.approx(ref_class_ndsc(pred, ref, 0.05), abs=1e-12)
    assert metrics.class_ndsc(ref, ref, r=0.05) == 1.0
    # binary maps: the mean of the foreground's and the background's nDSC
    p, g = pred > 2, ref > 2
    expected = (metrics.ndsc(p, g, 0.05) + metrics.ndsc(~p, ~g, 0.05)) / 2
    assert metrics.class_ndsc(p.astype(int), g.astype(int), r=0.05) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("ties", [False, True])
def test_class_ndsc_rauc_is_the_mean_of_the_classes_rauc(ties):
    rng = np.random.default_rng(11)
    pred = rng.integers(0, 4, (10, 11))
    ref = np.where(rng.random((10, 11)) < 0.6, pred, rng.integers(0, 4, (10, 11)))
    maps = rng.random((3, 10, 11))
    if ties:
        maps = np.round(maps, 1)
    got = metrics.class_ndsc_rauc_many(pred, ref, maps, r=0.02)
    classes = sorted(set(pred.ravel()) | set(ref.ravel()))
    for m, umap in enumerate(maps):  # per class through the binary curve (ndsc_retention_curve), averaged
        expected = np.mean([metrics.ndsc_rauc(pred == c, ref == c, umap, r=0.02) for c in classes])
        assert got[m] == pytest.approx(expected, abs=1e-12)
    # retaining nothing replaces every voxel by the reference: the curve ends at 1 for a perfect map
    perfect = (pred != ref).astype(float)
    assert metrics.class_ndsc_rauc_many(pred, ref, perfect[None], r=0.02)[0] < got.min()
