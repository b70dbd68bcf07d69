"""Resamples shared by every method on the same test cases, and the two-level bootstrap over seeds."""


import numpy as np
import pytest

from values_seg.statistics import CaseResamples, batched, bootstrap_indices, mean_over_seeds, percentile_interval, seed_indices


def test_drawn_from_sorted_ids_whatever_the_order():
    ids = ["c3", "c1", "c0", "c2", "c4"]
    ood = [True, False, False, True, False]
    a = CaseResamples.draw(ids, ood, 50, seed=1)
    b = CaseResamples.draw(list(reversed(ids)), list(reversed(ood)), 50, seed=1)
    assert a.case_ids == ("c0", "c1", "c2", "c3", "c4") == b.case_ids
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.ood, [False, False, True, True, False])
    np.testing.assert_array_equal(a.indices, bootstrap_indices(5, 50, seed=1, strata=a.ood))


def test_subsets_take_their_columns():
    ids = [f"c{i}" for i in range(8)]
    ood = np.arange(8) >= 5
    r = CaseResamples.draw(ids, ood, 200, seed=3)
    iid = ["c4", "c0", "c2", "c1", "c3"]  # any order: indices refer to the given order
    idx = r.of(iid)
    assert idx.shape == (200, 5)
    full = r.indices
    for k, case in enumerate(iid):
        j = int(case[1:])
        np.testing.assert_array_equal(np.array(iid)[idx[:, k]], np.array(ids)[full[:, j]])
    np.testing.assert_array_equal(r.of(ids), full)  # all cases: the resamples themselves
    with pytest.raises(ValueError, match="whole strata"):
        r.of(["c0", "c1"])
    with pytest.raises(ValueError, match="not among"):
        r.of(["c9"])
    with pytest.raises(ValueError, match="duplicate"):
        CaseResamples.draw(["a", "a"], [0, 0])


def test_same_cases_give_paired_resamples():
    # two methods on the same cases: the per-resample difference of their means is the mean of the
    # per-case differences on that resample (what makes a paired comparison valid)
    rng = np.random.default_rng(0)
    ids = [f"c{i:02d}" for i in range(30)]
    r = CaseResamples.draw(ids, np.zeros(30, bool), 300, seed=0)
    a, b = rng.random(30), rng.random(30)
    idx = r.of(ids)
    np.testing.assert_allclose(batched.mean(idx, a) - batched.mean(idx, b), (a - b)[idx].mean(axis=1), atol=1e-12)


def test_seed_indices():
    np.testing.assert_array_equal(seed_indices(1, 5), np.zeros((5, 1)))
    s = seed_indices(3, 4000, seed=2)
    assert s.shape == (4000, 3) and set(np.unique(s)) == {0, 1, 2}
    np.testing.assert_array_equal(s, seed_indices(3, 4000, seed=2))
    assert np.abs(np.bincount(s.ravel()) / s.size - 1 / 3).max() < 0.02


def test_mean_over_seeds_by_hand():
    samples = np.array([[1.0, 2.0], [10.0, 20.0], [100.0, 200.0]])  # [S=3, B=2]
    seeds = np.array([[0, 0, 2], [1, 2, 2]])  # [B, S]
    np.testing.assert_allclose(mean_over_seeds(samples, seeds), [(1 + 1 + 100) / 3, (20 + 200 + 200) / 3])
    with pytest.raises(ValueError, match="do not match"):
        mean_over_seeds(samples, seeds[:, :2])


def test_two_level_interval_covers_a_known_mean():
    # seeds add a random offset (sd 0.05) to every case of their run, cases vary with sd 0.2: the
    # two-level interval of the mean over 5 seeds must cover the true mean about 95 % of the time,
    # while case resampling alone (ignoring the seeds' spread) undercovers
    rng = np.random.default_rng(7)
    n, seeds, sims, mu = 40, 5, 200, 0.6
    two_level = cases_only = 0
    for sim in range(sims):
        base = rng.normal(mu, 0.2, n)  # the test cases, shared by all seeds
        values = base[None] + rng.normal(0, 0.05, (seeds, 1)) + rng.normal(0, 0.02, (seeds, n))
        r = CaseResamples.draw([f"c{i:02d}" for i in range(n)], np.zeros(n, bool), 1000, seed=sim)
        per_seed = np.stack([batched.mean(r.indices, v) for v in values])  # [S, B]
        low, high = percentile_interval(mean_over_seeds(per_seed, seed_indices(seeds, 1000, seed=sim)))
        two_level += low <= mu <= high
        low, high = percentile_interval(per_seed.mean(axis=0))
        cases_only += low <= mu <= high
    assert 0.88 <= two_level / sims <= 0.99
    assert cases_only < two_level
