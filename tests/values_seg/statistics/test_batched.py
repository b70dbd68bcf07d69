"""Each batched metric equals the scalar metric of values_seg.metrics on every resample."""

import numpy as np
import pytest

from values_seg import metrics
from values_seg.statistics import batched, bootstrap_indices

N = 40
B = 60


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    is_ood = np.r_[np.zeros(25, bool), np.ones(15, bool)]
    score = np.round(rng.random(N) + 0.5 * is_ood, 1)  # with ties
    dice = np.clip(np.round(rng.beta(5, 2, N), 2), 0, 1)
    dice[:4] = [0.0, 0.0, 1.0, 1.0]  # risks 0 and 1 tie, as in segmentation
    return {"is_ood": is_ood, "score": score, "dice": dice, "rng": rng}


def test_mean_equals_scalar(data):
    idx = bootstrap_indices(N, B, seed=1)
    got = batched.mean(idx, data["dice"])
    np.testing.assert_allclose(got, [np.mean(data["dice"][row]) for row in idx], rtol=0, atol=1e-12)


def test_nan_ignoring_mean_equals_finite_mean(data):
    ncc = data["rng"].uniform(-1, 1, N)
    ncc[::3] = np.nan  # NCC is undefined where the raters agree everywhere
    idx = bootstrap_indices(N, B, seed=2)
    idx[0] = 0  # one resample of a single NaN case
    expected = []
    for row in idx:
        v = ncc[row][np.isfinite(ncc[row])]
        expected.append(v.mean() if v.size else np.nan)
    np.testing.assert_allclose(batched.mean(idx, ncc, ignore_nan=True), expected, atol=1e-12)
    assert np.isnan(batched.mean(idx, ncc, ignore_nan=True)[0])
    with pytest.raises(ValueError, match="NaN"):
        batched.mean(idx, ncc)


def test_auroc_equals_scalar(data):
    idx = bootstrap_indices(N, B, seed=3, strata=data["is_ood"])
    got = batched.auroc(idx, data["is_ood"], data["score"])
    expected = [metrics.auroc(data["is_ood"][row], data["score"][row]) for row in idx]
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_auroc_single_class_resample_is_nan(data):
    idx = bootstrap_indices(N, 3, seed=4)
    idx[1] = np.flatnonzero(~data["is_ood"])[0]  # only i.i.d. cases
    got = batched.auroc(idx, data["is_ood"], data["score"])
    assert np.isnan(got[1]) and np.isfinite(got[[0, 2]]).all()


@pytest.mark.parametrize("name", ["aurc", "eaurc", "augrc", "eaugrc"])
def test_selective_equals_scalar(data, name):
    risks = 1.0 - data["dice"]
    confidences = -data["score"]
    idx = bootstrap_indices(N, B, seed=5)
    idx[0] = np.r_[0, 1, 2, 3, 0, 2][np.arange(N) % 6]  # a resample with binary risks only
    got = getattr(batched, name)(idx, risks, confidences)
    scalar = getattr(metrics, name)
    np.testing.assert_allclose(got, [scalar(risks[row], confidences[row]) for row in idx], atol=1e-12)


def test_ace_equals_scalar(data):
    rng = data["rng"]
    bins = []
    for i in range(N):
        conf = rng.beta(5, 2, 50 + i)
        bins.append(metrics.calibration_bins(rng.random(conf.size) < conf**1.3, conf))
    idx = bootstrap_indices(N, B, seed=6)
    expected = [metrics.ace_from_bins(sum(bins[j] for j in row)) for row in idx]
    np.testing.assert_allclose(batched.ace(idx, bins), expected, atol=1e-12)


def test_ace_empty_resample_is_nan():
    full = metrics.calibration_bins([1, 0, 1], [0.9, 0.2, 0.6])
    empty = metrics.CalibrationBins.empty(20)
    got = batched.ace(np.array([[1, 1], [0, 1]]), [full, empty])
    assert np.isnan(got[0])
    assert got[1] == pytest.approx(metrics.ace_from_bins(full))
    with pytest.raises(ValueError, match="same number of bins"):
        batched.ace(np.array([[0, 1]]), [full, metrics.CalibrationBins.empty(10)])


def test_al_improvement_equals_scalar(data):
    rng = data["rng"]
    first = rng.uniform(0.3, 0.7, N)
    method = np.clip(first + rng.normal(0.08, 0.05, N), 0, 1)
    random = np.clip(first + rng.normal(0.03, 0.05, N), 0, 1)
    idx = bootstrap_indices(N, B, seed=7)
    expected = [metrics.al_improvement(first[r].mean(), method[r].mean(), random[r].mean()) for r in idx]
    np.testing.assert_allclose(batched.al_improvement(idx, first, method, random), expected, atol=1e-12)
    zero = np.zeros(3)
    assert np.isnan(batched.al_improvement(np.array([[0, 1, 2]]), zero, zero + 0.5, zero + 0.2))[0]


def test_invalid_indices(data):
    with pytest.raises(ValueError, match=r"\[0, 40\)"):
        batched.mean(np.array([[0, 40]]), data["dice"])
    with pytest.raises(ValueError, match="integer array"):
        batched.mean(np.array([0.0, 1.0]), data["dice"])
    with pytest.raises(ValueError, match="same length"):
        batched.aurc(np.array([[0, 1]]), [0.1, 0.2], [1.0])


def test_chunking_does_not_change_results(data, monkeypatch):
    risks, confidences = 1.0 - data["dice"], -data["score"]
    idx = bootstrap_indices(N, 500, seed=8)
    whole = batched.eaurc(idx, risks, confidences)
    monkeypatch.setattr(batched, "CHUNK_ELEMENTS", 7 * N)  # chunks of 7 rows, the last one shorter
    np.testing.assert_array_equal(batched.eaurc(idx, risks, confidences), whole)


def test_auroc_matches_scikit_learn(data):
    from sklearn.metrics import roc_auc_score

    idx = bootstrap_indices(N, 20, seed=9, strata=data["is_ood"])
    expected = [roc_auc_score(data["is_ood"][row], data["score"][row]) for row in idx]
    np.testing.assert_allclose(batched.auroc(idx, data["is_ood"], data["score"]), expected, atol=1e-12)


def test_constant_scores(data):
    idx = bootstrap_indices(N, 10, seed=10, strata=data["is_ood"])
    constant = np.full(N, 0.3)
    np.testing.assert_allclose(batched.auroc(idx, data["is_ood"], constant), 0.5)  # all tied: chance
    risks = 1.0 - data["dice"]
    np.testing.assert_allclose(batched.aurc(idx, risks, constant), risks[idx].mean(axis=1), atol=1e-12)
    np.testing.assert_allclose(batched.augrc(idx, risks, constant), risks[idx].mean(axis=1) / 2, atol=1e-12)


def test_empty_inputs():
    with pytest.raises(ValueError, match="empty"):
        batched.mean(np.zeros((2, 0), dtype=int), [])
    with pytest.raises(ValueError, match="empty"):
        batched.aurc(np.array([[0]]), [], [])
    with pytest.raises(ValueError, match="non-empty sequence"):
        batched.ace(np.array([[0]]), [])


@pytest.mark.parametrize("name", ["auprc", "fpr_at_95_tpr"])
def test_ranking_companions_equal_scalar(data, name):
    idx = bootstrap_indices(N, B, seed=12, strata=data["is_ood"])
    got = getattr(batched, name)(idx, data["is_ood"], data["score"])
    scalar = getattr(metrics, name)
    np.testing.assert_allclose(got, [scalar(data["is_ood"][row], data["score"][row]) for row in idx], atol=1e-12)


def test_ranking_companions_match_scikit_learn(data):
    from sklearn.metrics import average_precision_score, roc_curve

    idx = bootstrap_indices(N, 20, seed=13, strata=data["is_ood"])
    y, s = data["is_ood"], data["score"]
    ap = [average_precision_score(y[row], s[row]) for row in idx]
    np.testing.assert_allclose(batched.auprc(idx, y, s), ap, atol=1e-12)
    fpr95 = []
    for row in idx:
        fpr, tpr, _ = roc_curve(y[row], s[row], drop_intermediate=False)
        fpr95.append(fpr[np.argmax(tpr >= 0.95)])
    np.testing.assert_allclose(batched.fpr_at_95_tpr(idx, y, s), fpr95, atol=1e-12)


def test_ranking_companions_by_hand_and_single_class():
    # scores 0.9 (OoD), 0.8 (iid), 0.8 (OoD), 0.1 (iid): thresholds 0.9 -> TP 1, FP 0 (P 1);
    # 0.8 -> TP 2, FP 1 (P 2/3); AP = (1/2)(1) + (1/2)(2/3) = 5/6. TPR >= 0.95 first at 0.8: FPR 1/2
    y = np.array([1, 0, 1, 0], bool)
    s = np.array([0.9, 0.8, 0.8, 0.1])
    idx = np.array([[0, 1, 2, 3], [1, 1, 3, 3]])  # the second resample has i.i.d. cases only
    ap = batched.auprc(idx, y, s)
    fpr = batched.fpr_at_95_tpr(idx, y, s)
    assert ap[0] == pytest.approx(5 / 6) and fpr[0] == pytest.approx(0.5)
    assert np.isnan(ap[1]) and np.isnan(fpr[1])


def test_dice_rauc_equals_scalar(data):
    idx = bootstrap_indices(N, B, seed=14)
    idx[0] = 7  # one case repeated: every position ties
    got = batched.dice_rauc(idx, data["dice"], data["score"])  # the scores tie in groups
    curves = [metrics.dice_retention_curve(data["dice"][row], data["score"][row]) for row in idx]
    np.testing.assert_allclose(got, [c.rauc for c in curves], atol=1e-12)
    np.testing.assert_allclose(batched.dice_rauc_oracle(idx, data["dice"]), [c.oracle_rauc for c in curves], atol=1e-12)


def test_dice_rauc_by_hand():
    # Dice (0.8, 0.4) with uncertainty (0.1, 0.9): retained fractions 0, 1/2, 1 give mean Dice
    # 1, (0.8 + 1)/2 = 0.9, 0.6; area = (1/2)(1 + 0.9)/2 + (1/2)(0.9 + 0.6)/2 = 0.85; R-AUC 0.15.
    # Reversed uncertainty: 1, (0.4 + 1)/2 = 0.7, 0.6: area 0.75, R-AUC 0.25 (the oracle: 0.15)
    idx = np.array([[0, 1]])
    assert batched.dice_rauc(idx, [0.8, 0.4], [0.1, 0.9])[0] == pytest.approx(0.15)
    assert batched.dice_rauc(idx, [0.8, 0.4], [0.9, 0.1])[0] == pytest.approx(0.25)
    assert batched.dice_rauc_oracle(idx, [0.8, 0.4])[0] == pytest.approx(0.15)
    # tied uncertainty: the expectation over both orders, (0.15 + 0.25) / 2
    assert batched.dice_rauc(idx, [0.8, 0.4], [0.5, 0.5])[0] == pytest.approx(0.2)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        batched.dice_rauc(idx, [1.2, 0.4], [0.5, 0.5])


def test_dice_rauc_is_the_augrc_of_risk_one_minus_dice(data):
    # the error at retained fraction k/N is the generalized risk at coverage k/N (Traub et al. 2024)
    idx = bootstrap_indices(N, B, seed=15)
    np.testing.assert_allclose(batched.dice_rauc(idx, data["dice"], data["score"]),
                               batched.augrc(idx, 1.0 - data["dice"], -data["score"]), atol=1e-12)


def test_selective_equals_the_four_areas(data):
    risks, confidences = 1.0 - data["dice"], -data["score"]
    idx = bootstrap_indices(N, B, seed=16)
    got = batched.selective(idx, risks, confidences)
    for name in ("aurc", "eaurc", "augrc", "eaugrc"):
        np.testing.assert_allclose(got[name], getattr(batched, name)(idx, risks, confidences), atol=1e-12)


def test_ace_applies_the_minimum_bin_mass_to_each_resample():
    """Issue 31.8: a resample's ACE merges its own summed bins to the minimum mass."""
    rng = np.random.default_rng(3)
    bins = []
    for k in range(6):
        conf = rng.uniform(0.9, 1.0, 3000)
        conf[:2] = 0.3 + 0.1 * k, 0.6  # lone low-confidence pixels: far below 0.1 % of a resample
        bins.append(metrics.calibration_bins(rng.random(conf.size) < conf, conf))
    idx = rng.integers(0, 6, size=(40, 6))
    expected = [metrics.ace_from_bins(sum(bins[j] for j in row)) for row in idx]
    plain = [metrics.ace_from_bins(sum(bins[j] for j in row), min_bin_mass=0.0) for row in idx]
    got = batched.ace(idx, bins)
    np.testing.assert_allclose(got, expected, atol=1e-12)
    assert np.all(got < np.asarray(plain))
