"""Learn then Test for several risks at once (``ltt_multi_risk``): against a brute force over every
threshold of small synthetic cases (independent numpy/scipy code), against MAPIE's FWER procedures,
and its edges (ties in scores, empty masks and sets, none valid)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from values_seg import metrics


def _cases(rng, n, size=6, empty_every=0):
    """Score maps and masks: foreground scores drawn higher; scores rounded to tenths (ties)."""
    truth = rng.random((n, size, size)) < 0.3
    if empty_every:
        truth[::empty_every] = False
    scores = np.round(np.where(truth, rng.beta(5, 2, truth.shape), rng.beta(2, 5, truth.shape)), 1)
    return scores, truth


def _brute_losses(scores, truth, grid):
    """Per case and threshold the FNR and the FDR of {score >= t}, straight from the maps."""
    fnr = np.zeros((len(scores), len(grid)))
    fdr = np.zeros_like(fnr)
    for i, (s, y) in enumerate(zip(scores, truth)):
        for g, t in enumerate(grid):
            c = s >= t
            fnr[i, g] = (y & ~c).sum() / y.sum() if y.any() else 0.0
            fdr[i, g] = (c & ~y).sum() / c.sum() if c.any() else 0.0
    return fnr, fdr


def _hb(r, n, level):
    """Hoeffding–Bentkus, written out again (LTT eq. 9)."""
    a = min(r, level)
    h = (a * math.log(a / level) if a > 0 else 0.0) + ((1 - a) * math.log((1 - a) / (1 - level)) if a < 1 else 0.0)
    return min(math.exp(-n * h), math.e * binom.cdf(math.ceil(n * r - 1e-9), n, level), 1.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_valid_set_equals_brute_force_over_every_threshold(seed):
    rng = np.random.default_rng(seed)
    scores, truth = _cases(rng, 150, empty_every=7)
    grid = np.unique(scores)  # every threshold at which a set changes, ties included
    fnr, fdr = _brute_losses(scores, truth, grid)
    levels, delta = (0.25, 0.5), 0.1
    p_values, p, valid = metrics.ltt_multi_risk(np.stack([fnr, fdr]), levels, delta)
    for g in range(grid.size):
        mine = [_hb(fnr[:, g].mean(), len(scores), levels[0]), _hb(fdr[:, g].mean(), len(scores), levels[1])]
        np.testing.assert_allclose(p_values[:, g], mine, rtol=1e-9, atol=1e-12)
        assert valid[g] == (max(mine) <= delta / grid.size)
    assert valid.any() and not valid.all()
    # every valid threshold meets both levels on the calibration cases (a necessary condition)
    assert (fnr[:, valid].mean(axis=0) <= levels[0]).all() and (fdr[:, valid].mean(axis=0) <= levels[1]).all()


def test_fwer_procedures_agree_with_mapie():
    from mapie.risk_control import control_fwer

    rng = np.random.default_rng(3)
    scores, truth = _cases(rng, 200)
    grid = np.round(np.arange(0.05, 1.0, 0.05), 2)
    fnr, fdr = _brute_losses(scores, truth, grid)
    for delta in (0.05, 0.1, 0.2):
        for fwer in ("bonferroni", "fixed_sequence"):
            _, p, valid = metrics.ltt_multi_risk(np.stack([fnr, fdr]), (0.3, 0.45), delta, fwer=fwer)
            theirs = np.asarray(control_fwer(p, delta, fwer_method=fwer), dtype=int)
            np.testing.assert_array_equal(np.flatnonzero(valid), np.sort(theirs))


def test_single_risk_reduces_to_hoeffding_bentkus_and_none_valid_with_few_cases():
    rng = np.random.default_rng(4)
    scores, truth = _cases(rng, 8)
    grid = np.array([0.3, 0.5, 0.7])
    fnr, fdr = _brute_losses(scores, truth, grid)
    p_values, p, valid = metrics.ltt_multi_risk(fnr[None], [0.2], 0.1)
    np.testing.assert_allclose(p, metrics.hoeffding_bentkus_p_value(fnr.mean(axis=0), 8, 0.2))
    _, _, valid = metrics.ltt_multi_risk(np.stack([fnr, fdr]), (0.2, 0.2), 0.1)
    assert not valid.any()  # 8 cases certify nothing at these levels: "none valid", no set claimed


def test_all_empty_masks_and_empty_sets():
    rng = np.random.default_rng(5)
    scores, truth = _cases(rng, 60)
    truth[:] = False
    fnr, fdr = _brute_losses(scores, truth, np.array([0.5, 1.5]))  # t = 1.5: the empty set, FDR 0
    assert (fnr == 0).all() and (fdr[:, 1] == 0).all() and (fdr[:, 0] == 1).all()
    _, _, valid = metrics.ltt_multi_risk(np.stack([fnr, fdr]), (0.1, 0.1), 0.1)
    assert valid.tolist() == [False, True]


def test_bad_inputs():
    good = np.zeros((2, 5, 3))
    with pytest.raises(ValueError, match="lie in"):
        metrics.ltt_multi_risk(good + 2, (0.1, 0.1), 0.1)
    with pytest.raises(ValueError, match="levels"):
        metrics.ltt_multi_risk(good, (0.1,), 0.1)
    with pytest.raises(ValueError, match="fwer"):
        metrics.ltt_multi_risk(good, (0.1, 0.1), 0.1, fwer="holm")
    with pytest.raises(ValueError, match=r"\[risks, cases, thresholds\]"):
        metrics.ltt_multi_risk(np.zeros((2, 0, 3)), (0.1, 0.1), 0.1)
