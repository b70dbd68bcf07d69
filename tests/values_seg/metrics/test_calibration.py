import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from values_seg.metrics import (
    CalibrationBins,
    ace,
    ace_from_bins,
    calibration_bins,
    platt_apply,
    platt_fit,
    reliability_diagram,
)

try:
    from sklearn.calibration import _sigmoid_calibration as _sk_sigmoid
except ImportError:  # private helper; fall back to a float64 re-implementation of Platt (1999)
    _sk_sigmoid = None


def reference_platt(score, y, sample_weight=None):
    """(a, b) with P(correct) = 1 / (1 + exp(a * score + b)), Platt's prior-corrected targets."""
    if _sk_sigmoid is not None:
        return _sk_sigmoid(np.asarray(score, np.float64), np.asarray(y, np.float64), sample_weight)
    w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, np.float64)
    y = np.asarray(y) > 0
    n_pos, n_neg = w[y].sum(), w[~y].sum()
    t = np.where(y, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))

    def nll(ab):
        p = 1 / (1 + np.exp(ab[0] * score + ab[1]))
        p = np.clip(p, 1e-300, 1 - 1e-16)
        return -np.sum(w * (t * np.log(p) + (1 - t) * np.log(1 - p)))

    return minimize(nll, [0.0, np.log((n_neg + 1) / (n_pos + 1))], method="Nelder-Mead",
                    options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000}).x


def reference_confidence(u, correct, sample_weight=None):
    a, b = reference_platt(-np.asarray(u, np.float64), correct, sample_weight)
    return 1 / (1 + np.exp(a * -np.asarray(u, np.float64) + b))


def _pixels(seed, n=2000, slope=3.0):
    rng = np.random.default_rng(seed)
    u = rng.gamma(2.0, 0.3, n)
    correct = rng.random(n) < 1 / (1 + np.exp(-(2.0 - slope * u)))
    return u, correct


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("slope", [0.5, 3.0, -1.0])
def test_platt_matches_reference(seed, slope):
    u, correct = _pixels(seed, slope=slope)
    a, b = platt_fit(u, correct)
    np.testing.assert_allclose(platt_apply(u, a, b), reference_confidence(u, correct), atol=1e-3)


def test_platt_sign_convention():
    u, correct = _pixels(0, slope=3.0)
    a, b = platt_fit(u, correct)
    # more uncertain -> less often correct -> confidence decreasing in u, i.e. a < 0 on s = -u
    assert a < 0
    conf = platt_apply(np.array([0.1, 0.5, 2.0]), a, b)
    assert np.all(np.diff(conf) < 0)
    # the documented formula
    np.testing.assert_allclose(conf, 1 / (1 + np.exp(a * -np.array([0.1, 0.5, 2.0]) + b)))


@pytest.mark.parametrize("all_correct", [True, False])
def test_platt_all_correct_or_all_wrong(all_correct):
    u = np.linspace(0, 1, 10)
    correct = np.full(10, all_correct)
    a, b = platt_fit(u, correct)
    conf = platt_apply(u, a, b)
    # only one target value: t+ = (10 + 1) / (10 + 2) = 11/12, or t- = 1 / (10 + 2) = 1/12,
    # which a constant confidence (a = 0) reaches exactly
    expected = 11 / 12 if all_correct else 1 / 12
    np.testing.assert_allclose(conf, expected, atol=1e-6)
    assert abs(a) < 1e-5


def test_platt_constant_uncertainty():
    u = np.full(8, 0.7)
    correct = np.array([1, 1, 1, 0, 0, 1, 1, 1])
    a, b = platt_fit(u, correct)
    # N+ = 6, N- = 2: targets 7/8 (six times) and 1/4 (twice); the maximum-likelihood constant is
    # their mean (6 * 7/8 + 2 * 1/4) / 8 = 5.75 / 8
    np.testing.assert_allclose(platt_apply(u, a, b), 5.75 / 8, atol=1e-6)
    np.testing.assert_allclose(platt_apply(u, a, b), reference_confidence(u, correct), atol=1e-3)


@pytest.mark.parametrize("seed", range(3))
def test_platt_histogram_weights_equal_raw_pixels(seed):
    rng = np.random.default_rng(seed)
    u = np.round(rng.gamma(2.0, 0.3, 3000), 1)  # histogram bin centres
    correct = rng.random(3000) < 1 / (1 + np.exp(-(2.0 - 3 * u)))
    a_raw, b_raw = platt_fit(u, correct)
    # one entry per (bin centre, correctness) with its pixel count as weight
    keys, counts = np.unique(np.stack([u, correct.astype(float)]), axis=1, return_counts=True)
    a_w, b_w = platt_fit(keys[0], keys[1], sample_weight=counts)
    grid = np.linspace(0, 3, 31)
    np.testing.assert_allclose(platt_apply(grid, a_w, b_w), platt_apply(grid, a_raw, b_raw), atol=1e-6)
    np.testing.assert_allclose(
        platt_apply(grid, a_w, b_w),
        reference_confidence_grid(keys[0], keys[1], counts, grid),
        atol=1e-3,
    )


@pytest.mark.parametrize("seed", range(3))
def test_platt_fit_converges_on_a_large_skewed_histogram(seed):
    """A validation histogram as the runner accumulates it (float16 codes of a map, millions of
    pixels, nearly all correct and nearly all certain): no warning, and at the fit the gradient of
    the weighted log-likelihood vanishes (first-order optimality, checked in float64 here)."""
    rng = np.random.default_rng(seed)
    u = np.unique(rng.gamma(0.3, 0.05, 4000).astype(np.float16)).astype(np.float64)  # distinct codes
    p_wrong = 1 / (1 + np.exp(6.0 - 40 * u))
    total = rng.integers(1, 5_000_000, u.size) * (u < 0.01) + rng.integers(1, 2_000, u.size)
    wrong = rng.binomial(total, p_wrong)
    values = np.concatenate([u, u])
    correct = np.concatenate([np.ones(u.size), np.zeros(u.size)])
    weight = np.concatenate([total - wrong, wrong]).astype(np.float64)
    keep = weight > 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a, b = platt_fit(values[keep], correct[keep], sample_weight=weight[keep])
    w, y, x = weight[keep], correct[keep] > 0, values[keep]
    n_pos, n_neg = w[y].sum(), w[~y].sum()
    t = np.where(y, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    residual = platt_apply(x, a, b) - t  # d(-log-likelihood)/dz up to sign, per entry
    assert abs(np.sum(w * residual)) / w.sum() < 1e-9
    assert abs(np.sum(w * residual * x)) / w.sum() < 1e-9 * max(1.0, x.max())
    np.testing.assert_allclose(platt_apply(np.linspace(0, 0.5, 11), a, b),
                               reference_confidence_grid(x, y.astype(float), w, np.linspace(0, 0.5, 11)), atol=1e-3)


def test_platt_fit_converges_where_lbfgs_gave_up():
    """A validation histogram of the quick toy study (float16 codes of a map with their pixel counts)
    on which the earlier L-BFGS-B fit stopped with ABNORMAL line-search termination: the Newton fit
    warns of nothing and reaches a vanishing gradient; it agrees with the reference fit."""
    data = np.load(Path(__file__).parent / "data" / "platt_validation_histogram.npz")
    u, y, w = data["u"], data["y"], data["w"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a, b = platt_fit(u, y, sample_weight=w)
    positive = y > 0
    n_pos, n_neg = w[positive].sum(), w[~positive].sum()
    residual = platt_apply(u, a, b) - np.where(positive, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    assert abs(np.sum(w * residual)) / w.sum() < 1e-12
    assert abs(np.sum(w * residual * u)) / w.sum() < 1e-12
    grid = np.linspace(0, u.max(), 11)
    np.testing.assert_allclose(platt_apply(grid, a, b), reference_confidence_grid(u, y, w, grid), atol=1e-3)


def reference_confidence_grid(u, correct, w, grid):
    a, b = reference_platt(-u, correct, w.astype(np.float64))
    return 1 / (1 + np.exp(a * -grid + b))


def test_platt_torch_inputs_and_shape():
    u, correct = _pixels(1, n=400)
    ut = torch.from_numpy(u.reshape(20, 20)).float()
    ct = torch.from_numpy(correct.reshape(20, 20))
    a, b = platt_fit(ut, ct)
    conf = platt_apply(ut, a, b)
    assert conf.shape == (20, 20)
    assert np.all((conf >= 0) & (conf <= 1))
    np.testing.assert_allclose(conf.ravel(), reference_confidence(u.astype(np.float32), correct), atol=1e-3)


def test_platt_invalid_inputs():
    with pytest.raises(ValueError, match="same shape"):
        platt_fit(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="binary"):
        platt_fit(np.zeros(3), np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="NaN"):
        platt_fit(np.array([0.1, np.nan]), np.array([0, 1]))
    with pytest.raises(ValueError, match="non-negative"):
        platt_fit(np.zeros(2), np.array([0, 1]), sample_weight=np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="weight is zero"):
        platt_fit(np.zeros(2), np.array([0, 1]), sample_weight=np.zeros(2))
    with pytest.raises(ValueError, match="empty"):
        platt_apply([], 1.0, 0.0)


# ----------------------------------------------------------------------------- ACE


def ref_ace(correct, confidence, n_bins=20):
    """Eq. 11 by explicit loop over the bins."""
    correct = np.asarray(correct, np.float64).ravel()
    confidence = np.asarray(confidence, np.float64).ravel()
    gaps = []
    for m in range(n_bins):
        in_bin = [min(int(np.floor(c * n_bins)), n_bins - 1) == m for c in confidence]
        in_bin = np.array(in_bin)
        if in_bin.any():
            gaps.append(abs(confidence[in_bin].mean() - correct[in_bin].mean()))
    return float(np.mean(gaps))


def test_ace_hand_computed():
    conf = [0.1, 0.12, 0.9]
    correct = [0, 1, 1]
    # bins (20 on [0, 1]): 0.1 -> 2, 0.12 -> 2, 0.9 -> 18
    # bin 2: |0.11 - 0.5| = 0.39; bin 18: |0.9 - 1| = 0.1 -> ACE = (0.39 + 0.1) / 2 = 0.245
    assert ace(correct, conf) == pytest.approx(0.245)
    # ECE would weight by counts: (2 * 0.39 + 0.1) / 3; ACE weights non-empty bins equally
    assert ace(correct, conf) != pytest.approx((2 * 0.39 + 0.1) / 3)


def test_ace_bin_edges():
    # confidence 1.0 goes to the last bin, 0.0 to the first
    bins = calibration_bins([1, 0, 1], [1.0, 0.0, 0.97])
    assert bins.count[-1] == 2 and bins.count[0] == 1
    # last bin: |mean(1.0, 0.97) - 1| = 0.015; first: |0 - 0| = 0 -> 0.0075
    assert ace([1, 0, 1], [1.0, 0.0, 0.97]) == pytest.approx(0.0075)


def test_ace_perfect_and_worst():
    assert ace([1, 0, 1, 0], [0.5, 0.5, 0.5, 0.5]) == pytest.approx(0.0)
    assert ace([1, 1], [1.0, 1.0]) == 0.0  # all correct, fully confident
    assert ace([0, 0], [1.0, 1.0]) == 1.0


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("n_bins", [5, 20])
def test_ace_matches_bruteforce_and_range(seed, n_bins):
    rng = np.random.default_rng(seed)
    conf = rng.random((15, 11))
    conf[0, :3] = [0.0, 1.0, 0.5]
    correct = rng.random((15, 11)) < conf**2
    value = ace(correct, conf, n_bins=n_bins)
    assert value == pytest.approx(ref_ace(correct, conf, n_bins), abs=1e-12)
    assert 0.0 <= value <= 1.0


@pytest.mark.parametrize("seed", range(3))
def test_merged_bins_equal_pooled_pixels(seed):
    rng = np.random.default_rng(seed)
    cases = []
    for shape in [(8, 8), (4, 5, 6), (30,)]:
        conf = rng.beta(2, 1, shape)
        cases.append((rng.random(shape) < conf, conf))
    merged = sum(calibration_bins(c, p) for c, p in cases)
    assert isinstance(merged, CalibrationBins)
    pooled_c = np.concatenate([c.ravel() for c, _ in cases])
    pooled_p = np.concatenate([p.ravel() for _, p in cases])
    pooled = calibration_bins(pooled_c, pooled_p)
    np.testing.assert_array_equal(merged.count, pooled.count)
    np.testing.assert_allclose(merged.confidence_sum, pooled.confidence_sum)
    assert ace_from_bins(merged) == pytest.approx(ace(pooled_c, pooled_p), abs=1e-12)
    assert ace_from_bins(merged) == pytest.approx(ref_ace(pooled_c, pooled_p), abs=1e-12)
    assert ace_from_bins(CalibrationBins.empty(20) + merged) == ace_from_bins(merged)


def test_reliability_diagram():
    bins = calibration_bins([0, 1, 1, 1], [0.1, 0.12, 0.9, 0.95], n_bins=10)
    # bin 1: conf (0.1 + 0.12) / 2 = 0.11, acc 0.5; bin 9: conf 0.925, acc 1
    rd = reliability_diagram(bins)
    np.testing.assert_allclose(rd.bin_edges, np.linspace(0, 1, 11))
    assert rd.count.tolist() == [0, 2, 0, 0, 0, 0, 0, 0, 0, 2]
    assert rd.confidence[1] == pytest.approx(0.11) and rd.accuracy[1] == pytest.approx(0.5)
    assert rd.confidence[9] == pytest.approx(0.925) and rd.accuracy[9] == 1.0
    assert np.isnan(rd.confidence[0]) and np.isnan(rd.accuracy[5])


def test_ace_torch_inputs():
    conf = torch.tensor([0.1, 0.12, 0.9], dtype=torch.float64)
    assert ace(torch.tensor([False, True, True]), conf) == pytest.approx(0.245)


def test_ace_invalid_inputs():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ace([0, 1], [0.5, 1.2])
    with pytest.raises(ValueError, match="binary"):
        ace([0, 0.5], [0.5, 0.5])
    with pytest.raises(ValueError, match="same shape"):
        ace([0, 1], [0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="n_bins"):
        ace([0, 1], [0.5, 0.5], n_bins=0)
    with pytest.raises(ValueError, match="NaN"):
        ace([0, 1], [0.5, np.nan])
    with pytest.raises(ValueError, match="empty"):
        ace([], [])
    with pytest.raises(ValueError, match="bins"):
        calibration_bins([1], [0.5], n_bins=10) + calibration_bins([1], [0.5], n_bins=20)
    with pytest.raises(ValueError, match="empty"):
        ace_from_bins(CalibrationBins.empty(20))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_broadcast_confidence_equals_the_tiled_one(dtype):
    """One map for every rater (np.broadcast_to) is binned once; the bins equal those of real copies."""
    rng = np.random.default_rng(7)
    conf = rng.random((6, 5)).astype(dtype)
    conf[0, :4] = [0.0, 1.0, 0.05, 0.95]  # bin edges
    correct = rng.random((3, 6, 5)) < 0.6
    shared = calibration_bins(correct, np.broadcast_to(conf, correct.shape))
    tiled = calibration_bins(correct, np.ascontiguousarray(np.broadcast_to(conf, correct.shape)))
    np.testing.assert_array_equal(shared.count, tiled.count)
    np.testing.assert_array_equal(shared.correct_sum, tiled.correct_sum)
    np.testing.assert_allclose(shared.confidence_sum, tiled.confidence_sum, rtol=1e-12)
    assert shared.count.dtype == np.int64 and shared.count.sum() == correct.size
    expected = ref_ace(correct.ravel(), np.tile(conf.astype(np.float64).ravel(), 3), 20)
    assert ace(correct, np.broadcast_to(conf, correct.shape)) == pytest.approx(expected, abs=1e-12)
    with pytest.raises(ValueError, match=r"confidence must lie in \[0, 1\]"):
        calibration_bins(correct, np.broadcast_to(conf + 1, correct.shape))


# ----------------------------------------------------------------------------- minimum bin mass (issue 31.8)


def ref_ace_min_mass(correct, confidence, n_bins, min_mass):
    """Independent float64 ACE over merged bins: pixels sorted into equal-width bins by a Python
    loop, consecutive bins merged from low to high confidence until a merged bin holds at least
    ``min_mass`` of all pixels, a top remainder below it joined to the last merged bin."""
    correct = np.asarray(correct, dtype=np.float64).ravel()
    confidence = np.asarray(confidence, dtype=np.float64).ravel()
    members = [[] for _ in range(n_bins)]
    for i, c in enumerate(confidence):
        members[min(int(np.floor(c * n_bins)), n_bins - 1)].append(i)
    need = min_mass * confidence.size
    groups, current = [], []
    for m in range(n_bins):
        current += members[m]
        if current and len(current) >= need:
            groups.append(current)
            current = []
    if current:
        groups[-1] += current
    return float(np.mean([abs(confidence[g].mean() - correct[g].mean()) for g in groups]))


def _sparse_tail(seed, n=20000, n_stray=6):
    """Most pixels confident and calibrated; ``n_stray`` lone wrong pixels at low confidence, one
    per equal-width bin, whose bins hold 1 pixel each (far below 0.1 % of the pixels)."""
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0.9, 1.0, n)
    correct = rng.random(n) < conf
    conf[:n_stray] = 0.52 + 0.05 * np.arange(n_stray)
    correct[:n_stray] = False
    return correct, conf


@pytest.mark.parametrize("seed", range(3))
def test_near_empty_bins_do_not_dominate_the_ace(seed):
    correct, conf = _sparse_tail(seed)
    plain = ref_ace_min_mass(correct, conf, 20, 0.0)  # the equal-width ACE: the lone pixels dominate
    merged = ref_ace_min_mass(correct, conf, 20, 1e-3)
    assert plain > 0.3 and merged < 0.1
    assert ace(correct, conf) == pytest.approx(merged, abs=1e-12)  # the default binning
    assert ace(correct, conf, n_bins=20, min_bin_mass=0.0) == pytest.approx(plain, abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("min_mass", [0.0, 0.01, 0.05, 0.3])
def test_ace_min_mass_matches_the_independent_reference(seed, min_mass):
    rng = np.random.default_rng(seed)
    conf = rng.beta(5, 1, 3000)
    correct = rng.random(3000) < conf**1.5
    got = ace(correct, conf, n_bins=20, min_bin_mass=min_mass)
    assert got == pytest.approx(ref_ace_min_mass(correct, conf, 20, min_mass), abs=1e-12)


def test_min_bin_mass_groups_by_hand():
    from values_seg.metrics import ace_bin_groups

    # total 100, minimum 10: [0 empty alone] [1+2: 4+7] [3: 50] [4 empty alone] [5+6+7: 3+0+36]
    assert ace_bin_groups([0, 4, 7, 50, 0, 3, 0, 36], 0.1).tolist() == [0, 1, 1, 2, 3, 4, 4, 4]
    # a top remainder below the minimum joins the last full group, with the empty bins between
    assert ace_bin_groups([60, 36, 0, 4], 0.1).tolist() == [0, 1, 1, 1]
    assert ace_bin_groups([0, 3, 0, 5], 0.0).tolist() == [0, 1, 2, 3]  # every bin its own
    with pytest.raises(ValueError, match="min_bin_mass"):
        ace_bin_groups([1, 2], 1.5)


def test_merged_case_bins_give_the_pooled_min_mass_ace():
    """The grouping is applied to the summed histogram: per-case bins merge exactly."""
    correct, conf = _sparse_tail(1)
    parts = np.array_split(np.arange(conf.size), 7)
    merged = sum(calibration_bins(correct[p], conf[p]) for p in parts)
    assert ace_from_bins(merged) == pytest.approx(ref_ace_min_mass(correct, conf, 20, 1e-3), abs=1e-12)


def test_reliability_diagram_shows_the_ace_bins_and_their_counts():
    correct, conf = _sparse_tail(2)
    rd = reliability_diagram(calibration_bins(correct, conf))
    used = rd.count > 0
    assert rd.count.sum() == conf.size and (rd.count[used] >= 1e-3 * conf.size).all()
    # the diagram's bins are the ACE's: its ACE is the mean gap over its non-empty points
    assert np.mean(np.abs(rd.confidence[used] - rd.accuracy[used])) == pytest.approx(ace(correct, conf), abs=1e-12)
    assert rd.bin_edges[0] == 0.0 and rd.bin_edges[-1] == 1.0 and np.all(np.diff(rd.bin_edges) > 0)
    assert len(rd.bin_edges) == len(rd.count) + 1
