"""Conformal risk control of the FNR and risk-controlled selection (values_seg.metrics.conformal):
against a brute force over every candidate threshold in exact rational arithmetic, against MAPIE,
and on bad input."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from values_seg import metrics
from values_seg.metrics.conformal import crc_exact


def brute_force_crc(scores, targets, alpha: Fraction) -> float:
    """Every candidate threshold (each distinct score, and +inf), its mean FNR in exact fractions,
    the largest one whose bound n/(n+1)·L + 1/(n+1) is at most alpha."""
    n = len(scores)
    candidates = sorted({float(v) for s in scores for v in np.asarray(s).reshape(-1)}) + [math.inf]
    best = None
    for t in candidates:
        total = Fraction(0)
        for s, masks in zip(scores, targets):
            masks = np.asarray(masks, dtype=bool)
            masks = masks[None] if masks.shape == np.asarray(s).shape else masks
            per_rater = [Fraction(int(np.count_nonzero(m & (np.asarray(s) < t))), int(m.sum())) if m.any() else Fraction(0)
                         for m in masks]
            total += sum(per_rater, Fraction(0)) / len(per_rater)
        if Fraction(n, n + 1) * total / n + Fraction(1, n + 1) <= alpha:
            best = t  # the loss is monotone in t: the last feasible one is the largest
    return best


@st.composite
def calibration_sets(draw):
    alpha = draw(st.sampled_from([Fraction(1, 10), Fraction(1, 5), Fraction(1, 4), Fraction(1, 3), Fraction(1, 2)]))
    need = math.ceil(1 / alpha) - 1
    n = draw(st.integers(need, need + 6))
    raters = draw(st.integers(1, 3))
    size = draw(st.integers(1, 6))
    levels = draw(st.integers(1, 5))  # few distinct scores: ties within and across cases
    scores = [np.array(draw(st.lists(st.integers(0, levels), min_size=size, max_size=size)), dtype=float) / levels
              for _ in range(n)]
    targets = [np.array(draw(st.lists(st.lists(st.booleans(), min_size=size, max_size=size),
                                       min_size=raters, max_size=raters))) for _ in range(n)]
    if not any(t.any() for t in targets):
        targets[0][0, 0] = True
    return scores, targets, alpha


@settings(max_examples=300, deadline=None)
@given(calibration_sets())
def test_crc_threshold_equals_brute_force(data):
    scores, targets, alpha = data
    assert metrics.crc_threshold(scores, targets, float(alpha)) == brute_force_crc(scores, targets, alpha)


@settings(max_examples=100, deadline=None)
@given(calibration_sets(), st.integers(0, 2))
def test_crc_threshold_per_rater_equals_brute_force(data, rater):
    scores, targets, alpha = data
    rater = min(rater, targets[0].shape[0] - 1)
    picked = [t[[rater]] for t in targets]
    if not any(t.any() for t in picked):
        with pytest.raises(ValueError, match="every rater mask"):
            metrics.crc_threshold(scores, targets, float(alpha), raters=rater)
        return
    assert metrics.crc_threshold(scores, targets, float(alpha), raters=rater) == brute_force_crc(scores, picked, alpha)


def test_hand_computed():
    # ten cases with one foreground pixel each at scores 0.1 .. 1.0 and one background pixel
    scores = [np.array([0.1 * (i + 1), 0.0]) for i in range(10)]
    targets = [np.array([True, False]) for _ in range(10)]
    # L(t) = #{cases with score < t}/10; bound 10/11·L + 1/11 <= 0.2 <=> L <= 0.12: L = 0.1 at t = 0.2
    assert metrics.crc_threshold(scores, targets, 0.2) == pytest.approx(0.2)
    # the guarantee at alpha = 1/11 allows L = 0 only: the smallest foreground score
    assert metrics.crc_threshold(scores, targets, 1 / 11) == pytest.approx(0.1)
    # with every reference non-empty the empty set loses 1 per case: never feasible
    assert metrics.crc_threshold(scores, targets, 0.95) == pytest.approx(1.0)
    # half the references empty: the empty set's bound 10/11·0.5 + 1/11 = 0.545 holds at 0.6
    half = [t & (i % 2 == 0) for i, t in enumerate(targets)]
    assert metrics.crc_threshold(scores, half, 0.6) == math.inf
    fnr = metrics.fnr(scores, targets, 0.2)
    assert fnr.tolist() == [1.0] + [0.0] * 9


def test_mean_over_raters_and_empty_reference():
    scores = [np.array([0.9, 0.2, 0.5])] * 9
    targets = [np.array([[1, 1, 0], [0, 0, 0]])] * 9  # the second rater's mask is empty: FNR 0 for it
    # per case loss at t: (1/2)·(FNR of rater 0); rater 0 loses 0.5 at t in (0.2, 0.9]
    assert metrics.fnr(scores, targets, 0.5).tolist() == [0.25] * 9
    assert metrics.crc_threshold(scores, targets, 0.4) == pytest.approx(0.9)  # 9/10·0.25 + 0.1 = 0.325
    assert metrics.crc_threshold(scores, targets, 0.3) == pytest.approx(0.2)


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, 1.5, float("nan"), "a"])
def test_alpha_outside_unit_interval(alpha):
    with pytest.raises(ValueError, match="alpha"):
        metrics.crc_threshold([np.ones(2)] * 20, [np.ones(2)] * 20, alpha)


def test_too_few_calibration_cases_says_how_many():
    assert metrics.min_calibration_cases(0.1) == 9
    assert metrics.min_calibration_cases(0.05) == 19
    assert metrics.min_calibration_cases(0.3) == 3
    with pytest.raises(ValueError, match="needs at least 9 calibration cases.*got 8"):
        metrics.crc_threshold([np.ones(2)] * 8, [np.ones(2)] * 8, 0.1)
    assert metrics.crc_threshold([np.ones(2)] * 9, [np.ones(2)] * 9, 0.1) == 1.0


def test_empty_rater_masks_and_non_finite_scores():
    with pytest.raises(ValueError, match="every rater mask of every calibration case is empty"):
        metrics.crc_threshold([np.ones(3)] * 10, [np.zeros((2, 3))] * 10, 0.1)
    bad = [np.ones(3)] * 9 + [np.array([0.5, np.nan, 1.0])]
    with pytest.raises(ValueError, match=r"scores\[9\].*NaN"):
        metrics.crc_threshold(bad, [np.ones(3)] * 10, 0.1)
    with pytest.raises(ValueError, match="binary"):
        metrics.crc_threshold([np.ones(3)] * 10, [np.full(3, 2)] * 10, 0.1)
    with pytest.raises(ValueError, match="shape"):
        metrics.crc_threshold([np.ones(3)] * 10, [np.ones(4)] * 10, 0.1)


def test_crc_exact_from_jumps_matches_maps():
    rng = np.random.default_rng(0)
    scores = [rng.random((5, 5)) for _ in range(30)]
    targets = [rng.random((3, 5, 5)) < 0.3 for _ in range(30)]
    values, weights, index = metrics.conformal.fnr_jumps(scores, targets)
    t = crc_exact(values, weights, 30, 0.1)
    assert t == metrics.crc_threshold(scores, targets, 0.1)
    # the realised mean loss on the calibration cases satisfies the bound at t and fails just above
    loss = metrics.fnr(scores, targets, t).mean()
    assert 30 / 31 * loss + 1 / 31 <= 0.1 + 1e-12
    above = np.min(values[values > t])
    assert 30 / 31 * metrics.fnr(scores, targets, np.nextafter(above, 2)).mean() + 1 / 31 > 0.1


def test_agrees_with_mapie_within_one_grid_step():
    from mapie.risk_control import SemanticSegmentationController

    rng = np.random.default_rng(1)
    n, h, w, step = 60, 8, 8, 1e-3
    truth = rng.random((n, h, w)) < 0.3
    truth[:, 0, 0] = True  # every case has foreground (MAPIE's recall is undefined without)
    proba = np.clip(np.where(truth, rng.beta(5, 2, truth.shape), rng.beta(2, 5, truth.shape)), 0, 1)
    for alpha in (0.05, 0.1, 0.2):
        controller = SemanticSegmentationController(predict_function=lambda x: x[:, None], risk="recall", method="crc",
                                                    target_level=1 - alpha,
                                                    predict_params=np.arange(0, 1, step))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            controller.calibrate(proba, truth.reshape(n, -1).astype(int))
        grid = float(np.asarray(controller.best_predict_param).reshape(-1)[0])  # sets {p > grid}
        ours = metrics.crc_threshold(list(proba), list(truth), alpha)  # sets {p >= ours}
        assert abs(ours - grid) <= step + 1e-9, (alpha, ours, grid)


def test_hoeffding_bentkus_matches_mapie():
    from mapie.risk_control.methods import compute_hoeffding_bentkus_p_value

    r_hat = np.array([0.0, 0.05, 0.1, 0.13, 0.3, 0.5, 0.9])
    for n in (5, 40, 300):
        for level in (0.1, 0.25):
            ours = metrics.hoeffding_bentkus_p_value(r_hat, n, level)
            theirs = np.minimum(compute_hoeffding_bentkus_p_value(r_hat, n, level)[:, 0], 1.0)
            np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


def test_ltt_selection_hand_computed_and_edges():
    assert metrics.min_accepted_cases(0.1, 0.1) == 22  # 0.9^22 = 0.098 <= 0.1 < 0.9^21
    # 30 confident cases without risk, then risky ones: the threshold stops before the risky
    confidences = np.r_[np.linspace(1.0, 0.7, 30), np.linspace(0.6, 0.0, 30)]
    risks = np.r_[np.zeros(30), np.ones(30)]
    threshold = metrics.ltt_selection_threshold(risks, confidences, 0.1, 0.1)
    accepted = confidences >= threshold
    # the sequence starts at half the cases (30, all without risk: p = 0.9^30 = 0.042), and stops at 31
    # (mean risk 1/31: Hoeffding 0.35, Bentkus e·P(Bin(31, 0.1) <= 1) = 0.46)
    assert accepted.sum() == 30 and threshold == pytest.approx(0.7)
    p30, p31 = metrics.hoeffding_bentkus_p_value([0.0, 1 / 31], [30, 31], 0.1)
    assert p30 == pytest.approx(0.9**30) and p31 > 0.1
    # starting where the first 22 are tested: the same threshold (every k from 22 to 30 has risk 0)
    assert metrics.ltt_selection_threshold(risks, confidences, 0.1, 0.1, start=0.0) == threshold
    # starting at 40 cases (mean risk 0.25) certifies nothing
    assert metrics.ltt_selection_threshold(risks, confidences, 0.1, 0.1, start=40 / 60) == math.inf
    # too few cases for any guarantee: nothing accepted
    assert metrics.ltt_selection_threshold(np.zeros(10), np.arange(10.0), 0.1, 0.1) == math.inf
    for bad in ({"max_risk": 0.0}, {"delta": 1.0}):
        with pytest.raises(ValueError, match="must lie in"):
            metrics.ltt_selection_threshold(risks, confidences, **{"max_risk": 0.1, "delta": 0.1, **bad})
    with pytest.raises(ValueError, match="finite"):
        metrics.ltt_selection_threshold(risks, np.r_[confidences[:-1], np.nan], 0.1, 0.1)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        metrics.ltt_selection_threshold(risks + 1, confidences, 0.1, 0.1)


def test_ltt_selection_ties_accepted_together():
    confidences = np.r_[np.ones(25), np.zeros(25)]
    risks = np.r_[np.zeros(25), np.full(25, 0.5)]
    assert metrics.ltt_selection_threshold(risks, confidences, 0.1, 0.1) == 1.0


def test_loss_steps_agree_with_crc_threshold_and_fnr():
    rng = np.random.default_rng(3)
    scores = [np.round(rng.random((4, 4)), 1) for _ in range(25)]
    targets = [rng.random((2, 4, 4)) < 0.4 for _ in range(25)]
    steps = metrics.conformal.LossSteps(*metrics.conformal.fnr_jumps(scores, targets), 25)
    for t in (0.0, 0.3, 0.55, 1.0, math.inf):
        u = np.searchsorted(steps.candidates, t)  # the first candidate >= t: same losses as t
        np.testing.assert_allclose(steps.losses[:, u], metrics.fnr(scores, targets, t), atol=1e-12)
    calibration = np.arange(25) < 15
    for alpha in (0.1, 0.2, 0.3):
        t, _ = steps.threshold(calibration, alpha)
        assert t == metrics.crc_threshold(scores[:15], targets[:15], alpha)


def _synthetic(rng, n: int, shift: float = 0.0):
    """Exchangeable cases: foreground probability maps whose foreground pixels score Beta(4, 2) (+ shift),
    rounded to 1e-3 (at most 1001 candidate thresholds)."""
    truth = rng.random((n, 3, 6, 6)) < 0.35
    score = np.clip(np.where(truth.any(axis=1), rng.beta(4, 2, (n, 6, 6)) + shift, rng.beta(2, 4, (n, 6, 6))), 0, 1).round(3)
    return list(score), list(truth)


@pytest.mark.parametrize("alpha", [0.1, 0.2])
def test_simulation_exchangeable_guarantee_holds(alpha):
    """Over many re-splits of exchangeable cases the realised FNR averages at most alpha + 3 s.e."""
    scores, targets = _synthetic(np.random.default_rng(4), 400)
    steps = metrics.conformal.LossSteps(*metrics.conformal.fnr_jumps(scores, targets), 400)
    risks = steps.resplit_risks(np.arange(400), 20, alpha, resplits=2000, seed=0)
    se = risks.std(ddof=1) / math.sqrt(risks.size)
    assert risks.mean() <= alpha + 3 * se
    assert risks.mean() > alpha - 0.06  # and not trivially far below (CRC is tight up to 1/(n+1))


def test_simulation_shifted_calibration_detected():
    """Calibrating on cases whose foreground scores higher (a shifted set) gives sets too small for
    the test cases: the same check flags it."""
    rng = np.random.default_rng(5)
    cal_scores, cal_targets = _synthetic(rng, 500, shift=0.3)
    test_scores, test_targets = _synthetic(rng, 500)
    scores, targets = cal_scores + test_scores, cal_targets + test_targets
    steps = metrics.conformal.LossSteps(*metrics.conformal.fnr_jumps(scores, targets), 1000)
    risks = []
    for k in range(100):
        calibration = np.zeros(1000, dtype=bool)
        calibration[rng.choice(500, 20, replace=False)] = True
        _, index = steps.threshold(calibration, 0.1)
        risks.append(steps.losses[500:, index].mean())
    risks = np.asarray(risks)
    se = risks.std(ddof=1) / math.sqrt(risks.size)
    assert risks.mean() > 0.1 + 3 * se


def test_ltt_selection_controls_the_selective_risk():
    """Simulation: over many calibration draws the population selective risk at the selected threshold
    exceeds max_risk in at most delta of them, where the plug-in rule (the lowest threshold whose empirical
    selective risk is <= max_risk) exceeds it about half the time."""
    rng = np.random.default_rng(7)
    max_risk, delta, ours, plug_in = 0.2, 0.1, [], []
    for _ in range(400):
        confidence = rng.random(300)
        risk = (1 - confidence) * rng.random(300)  # E[risk | c >= t] = (1 - t) / 4: above 0.2 for t < 0.2
        ours.append(metrics.ltt_selection_threshold(risk, confidence, max_risk, delta))
        order = np.argsort(-confidence)
        selective = np.cumsum(risk[order]) / np.arange(1, 301)
        plug_in.append(confidence[order][np.flatnonzero(selective <= max_risk).max()])
    ours, plug_in = np.asarray(ours), np.asarray(plug_in)
    assert np.mean((1 - ours) / 4 > max_risk) <= delta
    assert np.mean((1 - plug_in) / 4 > max_risk) > 0.3  # the check detects an uncontrolled rule
    assert np.isfinite(ours).mean() > 0.6 and np.nanmedian(np.where(np.isfinite(ours), ours, np.nan)) < 0.5


def test_effective_level_is_what_the_threshold_holds_the_calibration_cases_to():
    """At alpha = 0.02 with 60 calibration cases the finite-sample correction takes 82 % of alpha."""
    assert metrics.crc_effective_level(0.02, 60) == pytest.approx(0.22 / 60)
    assert 1 - metrics.crc_effective_level(0.02, 60) / 0.02 == pytest.approx(0.8167, abs=1e-4)
    assert metrics.crc_effective_level(0.05, 60) == pytest.approx(2.05 / 60)
    rng = np.random.default_rng(3)
    n, alpha = 60, 0.05
    scores, targets = rng.uniform(size=(n, 50)), rng.uniform(size=(n, 50)) < 0.3
    t = metrics.crc_threshold(scores, targets, alpha)
    # the calibration cases' mean FNR of the sets {score >= t}: at most the effective level, never alpha's
    missed = np.array([((s < t) & y).sum() / max(y.sum(), 1) for s, y in zip(scores, targets)])
    assert missed == pytest.approx(metrics.fnr(list(scores), list(targets), t))
    assert missed.mean() <= metrics.crc_effective_level(alpha, n) + 1e-12
    with pytest.raises(ValueError, match="n must be an integer >= 49"):
        metrics.crc_effective_level(0.02, 48)
