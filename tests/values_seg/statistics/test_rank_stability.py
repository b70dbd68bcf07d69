
import numpy as np
import pytest
from scipy.stats import kendalltau, rankdata

from values_seg.statistics import batched, bootstrap_indices, kendall_tau, rank_stability, ranks


def test_ranks_by_hand():
    np.testing.assert_array_equal(ranks([0.9, 0.5, 0.9, 0.1]), [1, 3, 1, 4])
    np.testing.assert_array_equal(ranks([0.9, 0.5, 0.9, 0.1], higher_is_better=False), [3, 2, 3, 1])
    np.testing.assert_array_equal(ranks([0.2, np.nan, 0.4]), [2, 3, 1])  # undefined ranks last
    # competition ranking = scipy's "min" method on the negated values
    rng = np.random.default_rng(0)
    v = np.round(rng.random((20, 6)), 1)
    np.testing.assert_array_equal(ranks(v), np.stack([rankdata(-row, method="min") for row in v]))


def test_rank_stability_by_hand():
    samples = np.array([[3, 2, 1], [2, 3, 1], [3, 2, 1], [1, 2, 3]], dtype=float)
    rs = rank_stability(samples, observed=[3, 2, 1], methods=["a", "b", "c"])
    np.testing.assert_array_equal(rs.observed_rank, [1, 2, 3])
    # a: ranks 1, 2, 1, 3; b: 2, 1, 2, 2; c: 3, 3, 3, 1
    np.testing.assert_allclose(rs.histogram, [[0.5, 0.25, 0.25], [0.25, 0.75, 0.0], [0.25, 0.0, 0.75]])
    np.testing.assert_allclose(rs.keep_rate, [0.5, 0.75, 0.75])
    frame = rs.to_frame()
    assert len(frame) == 9
    np.testing.assert_allclose(frame.groupby("method")["share"].sum(), 1.0)
    assert frame.loc[(frame.method == "b") & (frame["rank"] == 2), "share"].item() == 0.75
    # lower is better reverses the ranking
    low = rank_stability(samples, observed=[3, 2, 1], higher_is_better=False)
    np.testing.assert_array_equal(low.observed_rank, [3, 2, 1])


def test_rank_stability_drops_undefined_resamples():
    samples = np.array([[0.8, 0.6], [np.nan, 0.7], [0.5, 0.9]])
    rs = rank_stability(samples, observed=[0.8, 0.6])
    assert rs.n_resamples == 2
    np.testing.assert_allclose(rs.keep_rate, [0.5, 0.5])
    with pytest.raises(ValueError, match="M = len"):
        rank_stability(samples, observed=[0.8, 0.6, 0.1])
    with pytest.raises(ValueError, match="no resample"):
        rank_stability(np.full((3, 2), np.nan), observed=[1.0, 2.0])


def test_rank_stability_from_bootstrap():
    # three methods: a clear winner and two nearly equal ones, on the same resamples
    rng = np.random.default_rng(1)
    base = rng.random(80)
    values = {"best": base + 0.3, "b": base + rng.normal(0, 0.05, 80), "c": base + rng.normal(0, 0.05, 80)}
    idx = bootstrap_indices(80, 500, seed=2)
    samples = np.stack([batched.mean(idx, v) for v in values.values()], axis=1)
    observed = [v.mean() for v in values.values()]
    rs = rank_stability(samples, observed, methods=list(values))
    assert rs.keep_rate[0] == 1.0  # the clear winner always ranks first
    assert rs.histogram[1:, 1:].sum() == pytest.approx(2.0)  # b and c only swap ranks 2 and 3
    assert 0.2 < rs.keep_rate[1] < 0.8


@pytest.mark.parametrize("seed", range(6))
def test_kendall_tau_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    x = np.round(rng.random(9), 1)  # ties
    y = np.round(x + rng.normal(0, 0.3, 9), 1)
    assert kendall_tau(x, y) == pytest.approx(kendalltau(x, y).statistic, abs=1e-12)


def test_kendall_tau_batched_and_edge_cases():
    rng = np.random.default_rng(9)
    x = rng.random((5, 7))
    y = rng.random(7)
    np.testing.assert_allclose(kendall_tau(x, y), [kendalltau(row, y).statistic for row in x], atol=1e-12)
    assert kendall_tau([1, 2, 3], [1, 2, 3]) == 1.0
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0
    assert np.isnan(kendall_tau([1, 1, 1], [1, 2, 3]))  # a constant ranking: undefined, as scipy
    assert np.isnan(kendalltau([1, 1, 1], [1, 2, 3]).statistic)
    with pytest.raises(ValueError, match="same number"):
        kendall_tau([1, 2], [1, 2, 3])
