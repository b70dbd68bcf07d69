"""Adjusted p-values (Benjamini-Hochberg, Holm): by hand, against scipy, against the textbook procedures."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import false_discovery_control

from values_seg.statistics import adjust, family_method
from values_seg.statistics.multiple import BH, HOLM, SMALL_FAMILY

P = [0.01, 0.04, 0.03, 0.005]


def test_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 (m = 4)
    # BH:   4/1 0.005 = 0.02, 4/2 0.01 = 0.02, 4/3 0.03 = 0.04, 4/4 0.04 = 0.04 (already monotone)
    # Holm: 4 0.005 = 0.02, 3 0.01 = 0.03, 2 0.03 = 0.06, 1 0.04 = 0.04 -> running max 0.06
    assert adjust(P, BH) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert adjust(P, HOLM) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # at 0.05 all four pass uncorrected and under BH, two under Holm
    assert (adjust(P, HOLM) < 0.05).sum() == 2


def test_bh_against_scipy():
    rng = np.random.default_rng(3)
    for m in (1, 2, 7, 60, 616):
        p = np.round(np.concatenate([rng.uniform(0, 1, m - m // 3), rng.uniform(0, 0.01, m // 3)]), 3)  # with ties
        assert adjust(p, BH) == pytest.approx(false_discovery_control(p, method="bh"), abs=1e-12)


def _holm_rejects(p: np.ndarray, alpha: float) -> np.ndarray:
    """Holm's step-down procedure as written: reject the smallest p-values while p_(i) <= alpha / (m - i + 1)."""
    order = np.argsort(p, kind="stable")
    reject = np.zeros(p.size, dtype=bool)
    for i, j in enumerate(order):
        if p[j] > alpha / (p.size - i):
            break
        reject[j] = True
    return reject


def _bh_rejects(p: np.ndarray, alpha: float) -> np.ndarray:
    """BH's step-up procedure as written: reject the k smallest, k the largest with p_(k) <= k alpha / m."""
    ranked = np.sort(p)
    passing = np.flatnonzero(ranked <= np.arange(1, p.size + 1) * alpha / p.size)
    return p <= ranked[passing[-1]] if passing.size else np.zeros(p.size, dtype=bool)


@pytest.mark.parametrize("method, procedure", [(HOLM, _holm_rejects), (BH, _bh_rejects)])
def test_adjusted_p_gives_the_procedures_decisions(method, procedure):
    rng = np.random.default_rng(8)
    for _ in range(50):
        p = np.round(rng.beta(0.4, 1.0, int(rng.integers(1, 40))), 3)
        adjusted = adjust(p, method)
        for alpha in (0.01, 0.05, 0.1, 0.2):
            assert np.array_equal(adjusted <= alpha, procedure(p, alpha))


def test_untested_entries_stay_nan_and_do_not_count():
    p = [0.01, np.nan, 0.04, 0.03, np.nan, 0.005]
    out = adjust(p, BH)
    assert np.isnan(out[[1, 4]]).all() and out[[0, 2, 3, 5]] == pytest.approx(adjust(P, BH))
    assert np.isnan(adjust([np.nan, np.nan])).all() and adjust([]).size == 0


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match=r"method must be one of bh, holm, got 'bonferroni'"):
        adjust(P, "bonferroni")
    with pytest.raises(ValueError, match=r"p-values must lie in \[0, 1\]"):
        adjust([0.2, 1.5])


def test_small_families_get_holm():
    assert family_method(1) == family_method(SMALL_FAMILY) == HOLM and family_method(SMALL_FAMILY + 1) == BH
