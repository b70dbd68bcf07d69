"""Lesion F1 (Shifts 2.0, C.2.2), lesion-F1 retention (Shifts 1.0) and the empirical CRPS against
hand-counted cases and float64 re-implementations written here."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import ndimage

from values_seg.metrics import crps_empirical, lesion_counts, lesion_f1_retention
from values_seg.metrics.lesion import lesion_match


def _box(shape, *slices):
    m = np.zeros(shape, np.uint8)
    for s in slices:
        m[s] = 1
    return m


def _counts(c):
    return (c.tp, c.fp, c.fn, c.f1)


def test_identical_lesions_are_all_true_positives():
    ref = _box((10, 10), np.s_[1:3, 1:3], np.s_[6:9, 6:9])
    assert _counts(lesion_counts(ref, ref)) == (2, 0, 0, 1.0)


def test_touching_lesions_are_one_component_under_face_connectivity():
    # two squares touching along a face: one lesion in the reference; the prediction finds one square
    ref = _box((8, 8), np.s_[2:4, 1:3], np.s_[2:4, 3:5])
    pred = _box((8, 8), np.s_[2:4, 1:3])
    # IoU = 4 / 8 = 0.5, not above 0.5: the predicted component is an FP and the lesion an FN
    assert _counts(lesion_counts(pred, ref)) == (0, 1, 1, 0.0)


def test_lesion_split_in_two_by_the_prediction():
    ref = _box((10, 10), np.s_[2:4, 1:9])  # 16 voxels
    pred = _box((10, 10), np.s_[2:4, 1:4], np.s_[2:4, 5:9])  # 6 and 8 voxels
    # IoUs 6/16 and 8/16: neither above 0.5 -> 2 FP, 1 FN, F1 = 0
    assert _counts(lesion_counts(pred, ref)) == (0, 2, 1, 0.0)
    pred = _box((10, 10), np.s_[2:4, 1:2], np.s_[2:4, 3:9])  # 2 and 12 voxels: 12/16 above 0.5
    # TP 1 (the large part), FP 1 (the small part), the lesion is found: FN 0 -> F1 = 1 / 1.5
    assert _counts(lesion_counts(pred, ref)) == (1, 1, 0, pytest.approx(2 / 3))


def test_two_lesions_merged_by_the_prediction():
    ref = _box((10, 10), np.s_[2:4, 1:4], np.s_[2:4, 5:8])  # 6 + 6 voxels
    pred = _box((10, 10), np.s_[2:4, 1:8])  # 14 voxels: IoU 6/14 with each
    assert _counts(lesion_counts(pred, ref)) == (0, 1, 2, 0.0)


def test_iou_exactly_at_threshold_is_not_a_match():
    ref = _box((6, 6), np.s_[0:2, 0:2])
    pred = _box((6, 6), np.s_[0:1, 0:2])  # IoU 2 / 4 = 0.5
    assert _counts(lesion_counts(pred, ref, iou=0.5)) == (0, 1, 1, 0.0)
    assert _counts(lesion_counts(pred, ref, iou=0.49)) == (1, 0, 0, 1.0)


def test_iou_exactly_at_threshold_is_a_match_under_the_at_least_rule():
    """The Shifts authors' code counts IoU >= 0.5 a TP (and the lesion found); the default counts IoU > 0.5."""
    ref = _box((6, 6), np.s_[0:2, 0:2], np.s_[4:6, 4:6])
    pred = _box((6, 6), np.s_[0:1, 0:2], np.s_[4:6, 4:6])  # IoU 2 / 4 = 0.5 and 1
    assert _counts(lesion_counts(pred, ref, rule="above")) == (1, 1, 1, 0.5)
    assert _counts(lesion_counts(pred, ref, rule="at_least")) == (2, 0, 0, 1.0)
    assert _counts(lesion_counts(pred, ref, iou=0.51, rule="at_least")) == (1, 1, 1, 0.5)
    with pytest.raises(ValueError, match="lesion iou rule must be one of above, at_least"):
        lesion_counts(pred, ref, rule="geq")


def test_empty_masks():
    ref = _box((6, 6), np.s_[0:2, 0:2], np.s_[4:6, 4:6])
    empty = np.zeros((6, 6), np.uint8)
    assert _counts(lesion_counts(empty, ref)) == (0, 0, 2, 0.0)
    assert _counts(lesion_counts(ref, empty)) == (0, 2, 0, 0.0)
    assert _counts(lesion_counts(empty, empty)) == (0, 0, 0, 1.0)


@pytest.mark.parametrize("connectivity", ["face", "edge", "vertex"])
def test_3d_edge_neighbours(connectivity):
    # two voxels sharing an edge (not a face): 1 lesion under edge/vertex, 2 under face connectivity
    m = np.zeros((3, 3, 3), np.uint8)
    m[0, 0, 0] = m[1, 1, 0] = 1
    pred = np.zeros_like(m)
    pred[0, 0, 0] = 1
    pred[1, 1, 0] = 1
    ref = m.copy()
    ref[1, 1, 0] = 0  # the reference has only the first voxel
    ref2 = m  # both voxels
    tp, fp, fn, _ = _counts(lesion_counts(pred, ref2, connectivity=connectivity))
    assert (tp, fp, fn) == ((2, 0, 0) if connectivity == "face" else (1, 0, 0))
    tp, fp, fn, _ = _counts(lesion_counts(pred, ref, connectivity=connectivity))
    # face: {000} TP, {110} FP; edge/vertex: one predicted lesion of 2 voxels, IoU 1/2 -> FP + FN
    assert (tp, fp, fn) == ((1, 1, 0) if connectivity == "face" else (0, 1, 1))


@pytest.mark.parametrize("connectivity, n", [("face", 2), ("edge", 2), ("vertex", 1)])
def test_3d_corner_neighbours(connectivity, n):
    m = np.zeros((3, 3, 3), np.uint8)
    m[0, 0, 0] = m[1, 1, 1] = 1
    assert lesion_match(m, m, connectivity=connectivity).n == n


def test_several_raters_is_the_mean_over_raters():
    pred = _box((8, 8), np.s_[0:2, 0:2])
    r1 = pred.copy()
    r2 = _box((8, 8), np.s_[5:7, 5:7])
    c = lesion_counts(pred, np.stack([r1, r2]))
    assert (c.tp, c.fp, c.fn, c.f1) == (0.5, 0.5, 0.5, 0.5)


def test_ignored_voxels_are_left_out():
    ref = _box((8, 8), np.s_[0:2, 0:2]).astype(np.int64)
    pred = _box((8, 8), np.s_[0:2, 0:4])  # IoU 4/8 = 0.5 -> FP
    assert lesion_counts(pred, ref).tp == 0
    ref[0:2, 2:4] = 255  # the prediction's extra voxels are ignored: IoU 1
    assert _counts(lesion_counts(pred, ref, ignore_index=255)) == (1, 0, 0, 1.0)
    only_ignored = _box((8, 8), np.s_[5:7, 5:7])
    ref[5:7, 5:7] = 255
    assert _counts(lesion_counts(only_ignored, ref, ignore_index=255)) == (0, 0, 1, 0.0)


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="connectivity"):
        lesion_counts(np.zeros((4, 4)), np.zeros((4, 4)), connectivity="diagonal")
    with pytest.raises(ValueError, match="iou"):
        lesion_counts(np.zeros((4, 4)), np.zeros((4, 4)), iou=1.5)
    with pytest.raises(ValueError, match="shape"):
        lesion_counts(np.zeros((4, 4)), np.zeros((5, 4)))


def _loop_counts(pred, ref, iou, structure):
    """A plain float64 loop over components (scipy's labelling, one pair at a time)."""
    pl, n_p = ndimage.label(pred != 0, structure=structure)
    rl, n_r = ndimage.label(ref != 0, structure=structure)
    best_p, best_r = np.zeros(n_p), np.zeros(n_r)
    for i in range(1, n_p + 1):
        for j in range(1, n_r + 1):
            a, b = pl == i, rl == j
            v = float(np.sum(a & b)) / float(np.sum(a | b))
            best_p[i - 1], best_r[j - 1] = max(best_p[i - 1], v), max(best_r[j - 1], v)
    tp, fp, fn = float(np.sum(best_p > iou)), float(np.sum(best_p <= iou)), float(np.sum(best_r <= iou))
    return tp, fp, fn, (1.0 if tp + fp + fn == 0 else tp / (tp + 0.5 * (fp + fn)))


@pytest.mark.parametrize("dims, connectivity, rank", [(2, "face", 1), (2, "vertex", 2), (3, "face", 1),
                                                      (3, "edge", 2), (3, "vertex", 3)])
def test_against_a_plain_loop_over_components(dims, connectivity, rank):
    rng = np.random.default_rng(dims * 10 + rank)
    structure = ndimage.generate_binary_structure(dims, rank)
    shape = (24, 24) if dims == 2 else (10, 10, 10)
    for _ in range(5):
        base = ndimage.binary_opening(rng.random(shape) < 0.35)
        pred = base ^ (rng.random(shape) < 0.08)
        ref = base ^ (rng.random(shape) < 0.05)
        got = _counts(lesion_counts(pred, ref, iou=0.3, connectivity=connectivity))
        assert got == pytest.approx(_loop_counts(pred, ref, 0.3, structure))


def _direct_curve(scores, tp, n_fn):
    """F1 of the kept lesions at k = N .. 0, rejecting the most uncertain first (no ties)."""
    order = np.argsort(-np.asarray(scores, float))
    t = np.asarray(tp, bool)
    n = len(t)
    values = []
    for k in range(n + 1):
        kept = np.setdiff1d(np.arange(n), order[: n - k])
        tp_k = t[kept].sum()
        precision = tp_k / k if k else 1.0
        recall = tp_k / (t.sum() + n_fn) if t.sum() + n_fn else 1.0
        values.append(0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall))
    return np.arange(n + 1) / n, np.array(values)


def test_f1_retention_against_a_direct_computation():
    rng = np.random.default_rng(3)
    scores, tp = rng.random(13), rng.random(13) < 0.6
    curve = lesion_f1_retention(scores, tp, n_fn=2)
    fractions, values = _direct_curve(scores, tp, 2)
    np.testing.assert_allclose(curve.values[1:], values[1:])  # k = 0: 0 kept, F1 0 either way
    area = sum((values[i] + values[i + 1]) / 2 / 13 for i in range(13))
    assert curve.f1_auc == pytest.approx(area)
    # F1@95 %: between k = 12 (0.923) and k = 13 (1.0)
    w = (0.95 - 12 / 13) * 13
    assert curve.f1_at(0.95) == pytest.approx(values[12] * (1 - w) + values[13] * w)
    assert curve.values[-1] == pytest.approx(tp.sum() / (tp.sum() + 0.5 * ((~tp).sum() + 2)))  # the lesion F1


def test_f1_retention_ideal_and_random_curves():
    tp = np.array([1, 1, 0, 1, 0], bool)
    ideal_scores = np.where(tp, 0.0, 1.0) + np.arange(5) * 0.01  # FPs most uncertain
    curve = lesion_f1_retention(ideal_scores, tp)
    np.testing.assert_allclose(curve.values, curve.ideal)
    # random: the expectation over all orders, computed by brute force
    orders = list(itertools.permutations(range(5)))
    mean = np.mean([_direct_curve(-np.argsort(o).astype(float), tp, 0)[1] for o in orders], axis=0)
    np.testing.assert_allclose(curve.random[1:], mean[1:])
    # all scores tied: the curve is the random one
    np.testing.assert_allclose(lesion_f1_retention(np.zeros(5), tp).values, curve.random)


def test_f1_retention_without_lesions():
    curve = lesion_f1_retention([], [], n_fn=0)
    assert curve.f1_auc == 1.0
    assert lesion_f1_retention([], [], n_fn=3).f1_auc == 0.0


def _crps_reference(x, y):
    """CRPS = integral of (F(z) - 1{z >= y})^2 dz of the empirical CDF, integrated exactly piecewise."""
    x = np.sort(np.asarray(x, float))
    points = np.sort(np.r_[x, y])
    total = 0.0
    for a, b in zip(points[:-1], points[1:]):
        f = np.mean(x <= a)
        h = 1.0 if a >= y else 0.0
        total += (f - h) ** 2 * (b - a)
    return total


@pytest.mark.parametrize("seed", range(4))
def test_crps_against_the_integral_of_the_squared_cdf_difference(seed):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=7), float(rng.normal())
    assert crps_empirical(x, y) == pytest.approx(_crps_reference(x, y))
    assert crps_empirical([2.0], 5.0) == pytest.approx(3.0)  # one sample: the absolute error


@pytest.mark.parametrize("connectivity", ["edge", "vertex"])
def test_a_ring_of_eight_connected_voxels_is_one_lesion(connectivity):
    """A 2D mask that cc3d 4.1.1 mislabels when given as bool under 8-connectivity (it labels a
    background voxel and counts 1 component for labels 1 and 2): one lesion, labelled only on the mask."""
    from values_seg.metrics.lesion import components

    mask = np.array([[1, 1, 1], [0, 0, 1], [0, 0, 1], [1, 1, 1], [1, 1, 1]], bool)
    labels, n = components(mask, connectivity)
    assert n == 1
    np.testing.assert_array_equal(labels, mask.astype(np.int64))
    counts = lesion_counts(mask, mask, connectivity=connectivity)
    assert (counts.tp, counts.fp, counts.fn, counts.f1) == (1.0, 0.0, 0.0, 1.0)


def _case_curve_direct(scores, tp, n, fn):
    """Case-level lesion-F1 retention written out: distinct scores, the k most certain cases kept."""
    order = np.argsort(scores)
    C = tp.sum() + fn.sum()
    f1 = lambda t, m: 1.0 if m + C == 0 else 2.0 * t / (m + C)
    N = len(scores)
    values = [f1(tp[order[:k]].sum(), n[order[:k]].sum()) for k in range(N + 1)]
    random = [f1(k / N * tp.sum(), k / N * n.sum()) for k in range(N + 1)]
    ideal = [max(f1(tp[list(s)].sum(), n[list(s)].sum()) for s in itertools.combinations(range(N), k))
             for k in range(N + 1)]
    return np.array(values), np.array(random), np.array(ideal)


def test_case_f1_retention_against_the_curve_written_out():
    from values_seg.metrics.lesion import case_f1_retention

    rng = np.random.default_rng(3)
    for _ in range(30):
        N = int(rng.integers(1, 7))
        n = rng.integers(0, 5, N)
        tp = np.array([rng.integers(0, m + 1) for m in n])
        fn = rng.integers(0, 3, N)
        scores = rng.permutation(N) / N  # distinct
        curve = case_f1_retention(scores, tp, n, fn)
        values, random, ideal = _case_curve_direct(scores, tp, n, fn)
        x = np.arange(N + 1) / N
        np.testing.assert_allclose(curve.fractions, x)
        np.testing.assert_allclose(curve.values, values, rtol=0, atol=1e-12)
        np.testing.assert_allclose(curve.random, random, rtol=0, atol=1e-12)
        np.testing.assert_allclose(curve.ideal, ideal, rtol=0, atol=1e-12)
        area = sum((values[i] + values[i + 1]) / 2 * (x[i + 1] - x[i]) for i in range(N))
        assert curve.f1_auc == pytest.approx(area, abs=1e-12)
        i = int(np.floor(0.95 * N))
        at_95 = values[i] if i == N else values[i] + (0.95 - x[i]) / (x[i + 1] - x[i]) * (values[i + 1] - values[i])
        assert curve.f1_at(0.95) == pytest.approx(at_95, abs=1e-12)


def test_case_f1_retention_edge_cases():
    from values_seg.metrics.lesion import case_f1_retention

    # one case: F1 0 with nothing kept (its lesions are to be found), its lesion F1 with it kept
    one = case_f1_retention([0.3], [2], [3], [1])
    np.testing.assert_allclose(one.values, [0.0, 2 * 2 / (3 + 3)])
    assert one.f1_auc == pytest.approx((0.0 + 4 / 6) / 2)
    # no lesion anywhere: F1 is 1 at every retention, for the model, random and ideal rankings
    empty = case_f1_retention([0.0, 0.0, 0.0], [0, 0, 0], [0, 0, 0], [0, 0, 0])
    for curve in (empty.values, empty.random, empty.ideal):
        np.testing.assert_array_equal(curve, [1.0] * 4)
    # no predicted lesion, but missed ones: F1 0 throughout
    missed = case_f1_retention([0.0, 0.0], [0, 0], [0, 0], [1, 2])
    np.testing.assert_array_equal(missed.values, [0.0] * 3)
    # tied cases are rejected pro rata: all tied = the random curve
    tied = case_f1_retention([0.5] * 3, [1, 0, 2], [1, 2, 2], [0, 1, 0])
    np.testing.assert_allclose(tied.values, tied.random)
    with pytest.raises(ValueError, match="tp <= n"):
        case_f1_retention([0.1], [2], [1], [0])


def test_the_configs_iou_rules_are_the_metrics():
    """The config's vocabulary of tie rules (validated on load) is the one the metric computes."""
    from values_seg.components.settings import LESION_IOU_RULES
    from values_seg.metrics.lesion import IOU_RULES

    assert tuple(IOU_RULES) == LESION_IOU_RULES
