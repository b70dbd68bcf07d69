from functools import partial

import numpy as np
import pytest

from values_seg.statistics import (
    batched,
    bootstrap,
    bootstrap_indices,
    paired_bootstrap,
    paired_result,
    percentile_interval,
    resample_counts,
)


def test_indices_shape_range_and_seed():
    idx = bootstrap_indices(30, 200, seed=3)
    assert idx.shape == (200, 30) and idx.dtype == np.int64
    assert idx.min() >= 0 and idx.max() < 30
    np.testing.assert_array_equal(idx, bootstrap_indices(30, 200, seed=3))
    assert not np.array_equal(idx, bootstrap_indices(30, 200, seed=4))
    # every case is drawn about equally often (uniform resampling)
    share = np.bincount(idx.ravel(), minlength=30) / idx.size
    assert np.abs(share - 1 / 30).max() < 0.01


def test_stratified_indices_keep_each_stratum():
    strata = np.array(["iid"] * 7 + ["ood"] * 3 + ["iid"] * 2)
    idx = bootstrap_indices(12, 500, seed=0, strata=strata)
    assert (strata[idx] == strata[None, :]).all()  # column j draws from case j's stratum
    ood = np.flatnonzero(strata == "ood")
    assert set(np.unique(idx[:, ood])) == set(ood.tolist())  # all OoD cases get drawn
    with pytest.raises(ValueError, match="one label per case"):
        bootstrap_indices(12, 5, strata=strata[:5])


def test_resample_counts_by_loop():
    idx = bootstrap_indices(9, 50, seed=1)
    counts = resample_counts(idx, 9)
    np.testing.assert_array_equal(counts, np.stack([np.bincount(row, minlength=9) for row in idx]))
    assert (counts.sum(axis=1) == 9).all()


def test_percentile_interval():
    rng = np.random.default_rng(0)
    s = rng.normal(size=1001)
    low, high = percentile_interval(s)
    assert (low, high) == pytest.approx(tuple(np.percentile(s, [2.5, 97.5])))
    s_nan = np.r_[s, np.full(50, np.nan)]
    assert percentile_interval(s_nan) == pytest.approx((low, high))  # undefined resamples left out
    assert np.isnan(percentile_interval(np.full(5, np.nan))).all()
    lows, highs = percentile_interval(np.stack([s, 2 * s], axis=1), level=0.9)
    np.testing.assert_allclose(lows, np.percentile(s, 5) * np.array([1, 2]))
    with pytest.raises(ValueError, match="level"):
        percentile_interval(s, level=95)


def test_bootstrap_result():
    rng = np.random.default_rng(2)
    x = rng.normal(3.0, 1.0, 50)
    res = bootstrap(partial(batched.mean, values=x), 50, n_resamples=400, seed=9)
    assert res.value == pytest.approx(x.mean())
    idx = bootstrap_indices(50, 400, seed=9)
    np.testing.assert_allclose(res.samples, x[idx].mean(axis=1))
    assert (res.ci_low, res.ci_high) == pytest.approx(tuple(np.percentile(res.samples, [2.5, 97.5])))
    # the bootstrap standard error of a mean is about sd / sqrt(n)
    assert res.samples.std() == pytest.approx(x.std() / np.sqrt(50), rel=0.15)
    with pytest.raises(ValueError, match="one value per resample"):
        bootstrap(lambda idx: np.zeros(3), 50, n_resamples=10)
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap(partial(batched.mean, values=x), 50, n_resamples=0)


@pytest.mark.parametrize("distribution", ["normal", "beta"])
def test_interval_coverage_on_simulated_data(distribution):
    # nominal 95 %: the percentile interval of the mean covers the true mean in 90-98 % of simulations
    rng = np.random.default_rng(2024)
    n, sims = 60, 300
    covered = 0
    for sim in range(sims):
        if distribution == "normal":
            x, mu = rng.normal(0.7, 0.2, n), 0.7
        else:  # Dice-like: bounded and skewed, mean 5 / 7
            x, mu = rng.beta(5, 2, n), 5 / 7
        res = bootstrap(partial(batched.mean, values=x), n, n_resamples=1000, seed=sim)
        covered += res.ci_low <= mu <= res.ci_high
    assert 0.90 <= covered / sims <= 0.98


def test_paired_identical_and_shifted():
    rng = np.random.default_rng(3)
    a = rng.random(40)
    same = paired_bootstrap(partial(batched.mean, values=a), partial(batched.mean, values=a), 40, n_resamples=500)
    assert same.difference == 0.0 and same.p_value == 1.0 and (same.ci_low, same.ci_high) == (0.0, 0.0)
    assert not same.significant()
    shifted = paired_bootstrap(partial(batched.mean, values=a + 0.1), partial(batched.mean, values=a), 40,
                               n_resamples=500)
    assert shifted.difference == pytest.approx(0.1)
    assert (shifted.ci_low, shifted.ci_high) == pytest.approx((0.1, 0.1))
    assert shifted.p_value == pytest.approx(2 / 501)
    assert shifted.significant()


def test_paired_difference_is_the_bootstrap_of_the_differences():
    rng = np.random.default_rng(4)
    a, b = rng.random(30), rng.random(30)
    res = paired_bootstrap(partial(batched.mean, values=a), partial(batched.mean, values=b), 30, seed=5)
    idx = bootstrap_indices(30, 1000, seed=5)
    np.testing.assert_allclose(res.samples, (a - b)[idx].mean(axis=1), atol=1e-12)
    tail = min((res.samples <= 0).sum(), (res.samples >= 0).sum())
    assert res.p_value == pytest.approx(min(1.0, 2 * (1 + tail) / 1001))


def test_paired_null_rejection_rate_and_duality():
    # two methods of equal expected AUROC on the same cases: p < 0.05 in about 5 % of simulations,
    # and p < 0.05 exactly where the 95 % interval excludes 0 (up to one order statistic)
    rng = np.random.default_rng(6)
    y = np.r_[np.zeros(40, bool), np.ones(20, bool)]
    rejected, agree, sims = 0, 0, 150
    for sim in range(sims):
        signal = rng.normal(size=60) + y
        s1, s2 = signal + rng.normal(size=60), signal + rng.normal(size=60)
        res = paired_bootstrap(partial(batched.auroc, is_ood=y, uncertainty=s1),
                               partial(batched.auroc, is_ood=y, uncertainty=s2), 60, strata=y, seed=sim)
        rejected += res.p_value < 0.05
        agree += (res.p_value < 0.05) == (not res.ci_low <= 0 <= res.ci_high)
    assert 0.01 <= rejected / sims <= 0.11
    assert agree / sims >= 0.97


def test_paired_detects_a_real_difference():
    rng = np.random.default_rng(7)
    y = np.r_[np.zeros(60, bool), np.ones(40, bool)]
    signal = rng.normal(size=100) + 1.5 * y
    good, bad = signal + 0.3 * rng.normal(size=100), signal + 2.0 * rng.normal(size=100)
    res = paired_bootstrap(partial(batched.auroc, is_ood=y, uncertainty=good),
                           partial(batched.auroc, is_ood=y, uncertainty=bad), 100, strata=y)
    assert res.difference > 0 and res.ci_low > 0 and res.p_value < 0.01


def test_paired_result_from_stored_distributions_equals_paired_bootstrap():
    rng = np.random.default_rng(8)
    a, b = rng.random(35), rng.random(35) + 0.05
    res = paired_bootstrap(partial(batched.mean, values=a), partial(batched.mean, values=b), 35, seed=2)
    idx = bootstrap_indices(35, 1000, seed=2)
    again = paired_result(a.mean() - b.mean(), batched.mean(idx, a) - batched.mean(idx, b))
    assert (again.difference, again.ci_low, again.ci_high, again.p_value) == pytest.approx(
        (res.difference, res.ci_low, res.ci_high, res.p_value))
    # p-value by hand: twice the smaller tail (with the +1 of the interval inversion)
    d = np.array([0.3, -0.1, 0.2, 0.4, 0.0])
    assert paired_result(0.1, d).p_value == pytest.approx(2 * (1 + 2) / 6)
    assert np.isnan(paired_result(0.0, [np.nan, np.nan]).p_value)


def test_paired_p_value_over_many_pairs_equals_paired_result_per_pair():
    from values_seg.statistics import paired_p_value

    rng = np.random.default_rng(3)
    samples = rng.normal(0.1, 1.0, (6, 200))
    samples[1, :50] = np.nan  # undefined resamples are left out
    samples[2] = np.nan  # no defined resample: NaN
    samples[3] = 0.0  # ties with 0 count on both sides: p = 1
    samples[4] = np.abs(samples[4]) + 1e-3  # all above 0: the smallest p, 2 / (B + 1)
    vector = paired_p_value(samples)
    for row, p in zip(samples, vector):
        expected = paired_result(0.0, row).p_value
        assert (np.isnan(p) and np.isnan(expected)) or p == expected
    assert np.isnan(vector[2]) and vector[3] == 1.0 and vector[4] == pytest.approx(2 / 201)
    # hand count for one row: min(#{d <= 0}, #{d >= 0}) over the defined resamples
    defined = samples[1][~np.isnan(samples[1])]
    tail = min((defined <= 0).sum(), (defined >= 0).sum())
    assert vector[1] == pytest.approx(min(1.0, 2 * (1 + tail) / (defined.size + 1)))


def test_percentile_interval_columns_with_and_without_nan_equal_numpy_per_column():
    rng = np.random.default_rng(5)
    samples = rng.random((101, 4))
    low, high = percentile_interval(samples, 0.9)  # no NaN: one vectorised quantile
    for j in range(4):  # the same order statistics, interpolated up to rounding
        np.testing.assert_allclose((low[j], high[j]), np.quantile(samples[:, j], [0.05, 0.95]), rtol=1e-14)
    samples[:10, 1] = np.nan
    low, high = percentile_interval(samples, 0.9)  # NaN left out per column
    column = samples[10:, 1]
    np.testing.assert_allclose((low[1], high[1]), np.quantile(column, [0.05, 0.95]), rtol=1e-14)
    np.testing.assert_allclose((low[0], high[0]), np.quantile(samples[:, 0], [0.05, 0.95]), rtol=1e-14)
