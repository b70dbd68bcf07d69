import math

import numpy as np
import pytest
from scipy.stats import binom

from values_seg.metrics import (
    CalibrationBins,
    ace,
    ace_from_bins,
    ace_reference,
    calibration_bins,
    coarsen_bins,
    zeta_score,
)


def de_moivre_mad(n, p):
    """E|K - np| for K ~ Binomial(n, p), de Moivre's closed form (Diaconis & Zabell 1991)."""
    m = math.floor(n * p)
    return 2 * (m + 1) * math.comb(n, m + 1) * p ** (m + 1) * (1 - p) ** (n - m)


def constant_bins(n, p, n_bins=200):
    """A histogram of n items all with confidence p (labels irrelevant for the reference)."""
    return calibration_bins(np.ones(n), np.full(n, p), n_bins)


def test_de_moivre_matches_the_pmf():
    for n, p in [(50, 0.3), (17, 0.85), (200, 0.02)]:
        k = np.arange(n + 1)
        assert de_moivre_mad(n, p) == pytest.approx(np.sum(binom.pmf(k, n, p) * np.abs(k - n * p)), rel=1e-10)


@pytest.mark.parametrize("n, p", [(50, 0.3), (17, 0.85)])
def test_single_bin_closed_form(n, p):
    # one non-empty bin, all confidences p: ACE = |p - K / n| with K ~ Binomial(n, p)
    ref = ace_reference(constant_bins(n, p), n_samples=40000, seed=1)
    exact_mean = de_moivre_mad(n, p) / n
    assert ref.mean == pytest.approx(exact_mean, abs=4 * ref.std_error)
    # the interval's ends are the 2.5 % and 97.5 % quantiles of the discrete |K - np| / n
    k = np.arange(n + 1)
    d = np.abs(k - n * p) / n
    support = np.unique(d)
    cdf = np.array([binom.pmf(k[d <= s], n, p).sum() for s in support])
    q_high = support[np.searchsorted(cdf, 0.975)]
    q_low = support[np.searchsorted(cdf, 0.025)]
    assert ref.ci_high == pytest.approx(q_high, abs=1e-12)
    assert ref.ci_low == pytest.approx(q_low, abs=1e-12)
    # the observed ACE of these labels (all correct) is 1 - p; its exact one-sided tail probability
    assert ref.observed == pytest.approx(1 - p)
    assert ref.compatible == (q_low <= 1 - p <= q_high)
    tail = binom.pmf(k[d >= 1 - p - 1e-12], n, p).sum()
    assert ref.p_value == pytest.approx(tail, abs=4 * math.sqrt(tail * (1 - tail) / 40000) + 1e-4)


def test_independent_bins_average():
    # two ACE bins with constant confidences: E[ACE] = mean of the two closed forms
    bins = constant_bins(40, 0.12) + constant_bins(90, 0.63)
    ref = ace_reference(bins, n_samples=40000, seed=2)
    expected = (de_moivre_mad(40, 0.12) / 40 + de_moivre_mad(90, 0.63) / 90) / 2
    assert ref.mean == pytest.approx(expected, abs=4 * ref.std_error)


def test_fine_bins_give_the_poisson_binomial():
    # one ACE bin [0.6, 0.65) holding 30 items at 0.6025 and 10 at 0.6475 (two fine bins of 200):
    # K = Binomial(30, .6025) + Binomial(10, .6475); the exact distribution by convolution
    bins = constant_bins(30, 0.6025) + constant_bins(10, 0.6475)
    assert (bins.count > 0).sum() == 2
    pmf = np.convolve(binom.pmf(np.arange(31), 30, 0.6025), binom.pmf(np.arange(11), 10, 0.6475))
    s = 30 * 0.6025 + 10 * 0.6475
    exact = np.sum(pmf * np.abs(np.arange(41) - s)) / 40
    fine = ace_reference(bins, n_samples=40000, seed=3)
    assert fine.mean == pytest.approx(exact, abs=4 * fine.std_error)
    # with only the 20 ACE bins the bin mean stands in for both: Binomial(40, s / 40), a slight overstatement
    coarse = ace_reference(coarsen_bins(bins, 20), n_samples=40000, seed=3)
    m = s / 40
    approx = np.sum(binom.pmf(np.arange(41), 40, m) * np.abs(np.arange(41) - s)) / 40
    assert coarse.mean == pytest.approx(approx, abs=4 * coarse.std_error)
    assert approx > exact


@pytest.mark.parametrize("seed", range(3))
def test_coarsen_bins_equals_direct_binning(seed):
    rng = np.random.default_rng(seed)
    c = rng.random(5000)
    y = rng.random(5000) < c**1.5
    fine = calibration_bins(y, c, 200)
    direct = calibration_bins(y, c, 20)
    merged = coarsen_bins(fine, 20)
    np.testing.assert_array_equal(merged.count, direct.count)
    np.testing.assert_allclose(merged.confidence_sum, direct.confidence_sum)
    np.testing.assert_allclose(merged.correct_sum, direct.correct_sum)
    assert ace_from_bins(merged) == pytest.approx(ace(y, c, 20))
    assert ace_reference(fine, n_samples=500).observed == pytest.approx(ace(y, c, 20))


def test_calibrated_model_is_compatible_and_a_miscalibrated_one_is_not():
    rng = np.random.default_rng(7)
    compatible = []
    for trial in range(40):
        c = rng.beta(4, 1.5, 3000)
        y = rng.random(3000) < c  # perfectly calibrated
        compatible.append(ace_reference(calibration_bins(y, c, 200), n_samples=500, seed=trial).compatible)
    assert 0.85 <= np.mean(compatible) <= 1.0
    c = rng.beta(4, 1.5, 3000)
    y = rng.random(3000) < c**3  # overconfident
    ref = ace_reference(calibration_bins(y, c, 200), n_samples=1000)
    assert not ref.compatible
    assert ref.observed > ref.ci_high
    assert ref.p_value < 0.01


def test_reproducible_and_rater_weighted_counts():
    bins = constant_bins(60, 0.7)
    assert ace_reference(bins, n_samples=300, seed=5) == ace_reference(bins, n_samples=300, seed=5)
    # counts as evaluation keeps them (float, pixels x raters) are fine when whole numbers
    as_float = CalibrationBins(bins.count.astype(float) * 3, bins.confidence_sum * 3, bins.correct_sum * 3)
    assert ace_reference(as_float, n_samples=300).observed == pytest.approx(0.3)


def test_invalid():
    bins = constant_bins(10, 0.5)
    with pytest.raises(ValueError, match="multiple"):
        ace_reference(bins, n_bins=30)
    with pytest.raises(ValueError, match="whole numbers"):
        ace_reference(CalibrationBins(bins.count * 0.25, bins.confidence_sum, bins.correct_sum))
    with pytest.raises(ValueError, match="empty"):
        ace_reference(CalibrationBins.empty(200))
    with pytest.raises(ValueError, match="n_samples"):
        ace_reference(bins, n_samples=1)


def test_zeta_score():
    # eq. 20: estimate 0.10 with interval [0.08, 0.13]
    assert zeta_score(0.10, 0.12, (0.08, 0.13)) == pytest.approx(-0.02 / 0.03)  # reference inside: |ζ| <= 1
    assert zeta_score(0.10, 0.07, (0.08, 0.13)) == pytest.approx(0.03 / 0.02)  # outside: |ζ| > 1
    assert zeta_score(0.10, 0.10, (0.08, 0.13)) == 0.0
    with pytest.raises(ValueError, match="inside"):
        zeta_score(0.2, 0.1, (0.0, 0.1))


def test_the_reference_uses_the_ace_bins_with_the_minimum_mass():
    """Issue 31.8: the ACE of a perfectly calibrated model is taken on the same (merged) bins as the
    observed ACE. 5000 items at 0.95 and 3 at 0.30: the 3 hold under 0.1 % and join the 0.95 bin,
    one ACE bin whose correct count is Binomial(5000, 0.95) + Binomial(3, 0.3) (exact pmf here)."""
    n1, p1, n2, p2 = 5000, 0.95, 3, 0.30
    bins = constant_bins(n1, p1) + constant_bins(n2, p2)
    ref = ace_reference(bins, n_bins=20, n_samples=40000, seed=2)
    assert ref.observed == pytest.approx(abs((n1 * p1 + n2 * p2) - n1 - n2) / (n1 + n2))  # all labelled correct
    pmf = np.convolve(binom.pmf(np.arange(n1 + 1), n1, p1), binom.pmf(np.arange(n2 + 1), n2, p2))
    exact = float(np.sum(pmf * np.abs(np.arange(pmf.size) - (n1 * p1 + n2 * p2)))) / (n1 + n2)
    assert ref.mean == pytest.approx(exact, abs=4 * ref.std_error)
    # the plain equal-width ACE keeps the 3 items as a bin of their own: a far larger reference
    plain = ace_reference(bins, n_bins=20, n_samples=4000, seed=2, min_bin_mass=0.0)
    mad1 = float(np.sum(binom.pmf(np.arange(n1 + 1), n1, p1) * np.abs(np.arange(n1 + 1) - n1 * p1)))
    two_bins = (mad1 / n1 + de_moivre_mad(n2, p2) / n2) / 2
    assert plain.mean == pytest.approx(two_bins, abs=4 * plain.std_error) and plain.mean > 10 * ref.mean
