import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from values_seg.metrics import (
    augrc,
    aurc,
    eaugrc,
    eaurc,
    generalized_risk_coverage_curve,
    risk_coverage_curve,
)

FD_SHIFTS = json.loads((Path(__file__).parent / "data" / "fd_shifts_rc_stats_cases.json").read_text())


def fd_shifts_case(case):
    """(risks, confidences) of one fd-shifts case; fd-shifts' residual is 1 - correctness."""
    conf = np.array([np.nan if v is None else v for v in FD_SHIFTS["confidences"][case["confidences"]]])
    correct = np.array([np.nan if v is None else v for v in FD_SHIFTS["correctness"][case["correctness"]]])
    return 1.0 - correct, conf


# ----------------------------------------------------------------------------- float64 references


def ref_curve(risks, confidences, generalized=False):
    """Eq. 5-6 (or Traub et al.'s generalized risk) by explicit loop over the ascending unique thresholds."""
    risks = np.asarray(risks, dtype=np.float64)
    conf = np.asarray(confidences, dtype=np.float64)
    n = len(conf)
    cov, risk = [], []
    for tau in sorted(set(conf.tolist())):
        keep = conf >= tau
        cov.append(keep.sum() / n)
        risk.append(risks[keep].sum() / (n if generalized else keep.sum()))
    return np.array(cov + [0.0]), np.array(risk + [0.0 if generalized else risk[-1]])


def ref_area(cov, risk):
    """Trapezoid: sum over consecutive points of |delta coverage| * mean of the two risks."""
    total = 0.0
    for t in range(1, len(cov)):
        total += (cov[t - 1] - cov[t]) * (risk[t] + risk[t - 1]) / 2
    return total


def ref_aurc(risks, confidences):
    return ref_area(*ref_curve(risks, confidences))


def ref_augrc(risks, confidences):
    return ref_area(*ref_curve(risks, confidences, generalized=True))


def ref_oracle_strict(risks, generalized=False):
    """The oracle's trapezoid, by loop: at coverage k/N the k smallest risks are kept (ranks strict)."""
    r = sorted(float(v) for v in risks)
    n = len(r)
    cov, risk = [], []
    for k in range(n, 0, -1):
        cov.append(k / n)
        risk.append(sum(r[:k]) / (n if generalized else k))
    cov.append(0.0)
    risk.append(0.0 if generalized else risk[-1])
    return ref_area(np.array(cov), np.array(risk))


def closed_form_aurc(e):
    """Geifman et al. (2019): the optimal AURC of binary risks with error rate e (continuous limit)."""
    return 1.0 if e == 1 else e + (1 - e) * math.log(1 - e)


# ----------------------------------------------------------------------------- fd-shifts' own test cases


def test_fd_shifts_data_is_complete():
    cases = FD_SHIFTS["cases"]
    assert FD_SHIFTS["source"]["commit"] == "c4467aec134e99691359da209f811d91283fc1e3"
    assert len(cases) == 43
    assert sum("aurc" in c for c in cases) == 31  # the 12 others contain NaN
    for c in cases:
        risks, conf = fd_shifts_case(c)
        assert len(risks) == len(conf) == FD_SHIFTS["n_samples"]
        assert ("aurc" in c) == bool(np.isfinite(risks).all() and np.isfinite(conf).all())


VALUED = [c for c in FD_SHIFTS["cases"] if "aurc" in c]
WITH_NAN = [c for c in FD_SHIFTS["cases"] if "aurc" not in c]


@pytest.mark.parametrize("case", VALUED, ids=[c["id"] for c in VALUED])
def test_fd_shifts_rc_stats_cases(case):
    risks, conf = fd_shifts_case(case)
    assert aurc(risks, conf) == pytest.approx(case["aurc"], abs=1e-6)
    assert eaurc(risks, conf) == pytest.approx(case["eaurc"], abs=1e-6)
    assert augrc(risks, conf) == pytest.approx(case["augrc"], abs=1e-6)


@pytest.mark.parametrize("case", WITH_NAN, ids=[c["id"] for c in WITH_NAN])
@pytest.mark.parametrize("fn", [aurc, eaurc, augrc, eaugrc])
def test_fd_shifts_nan_cases_raise(case, fn):
    # fd-shifts returns NaN; values-seg validates at the boundary and names the problem
    risks, conf = fd_shifts_case(case)
    with pytest.raises(ValueError, match="NaN"):
        fn(risks, conf)


def test_issue_examples():
    # all confidences equal, alternating correctness: AURC 0.5, oracle 0.5 + 0.5 ln 0.5
    r = np.arange(100) % 2
    assert eaurc(r, np.full(100, 0.3)) == pytest.approx(0.5 - closed_form_aurc(0.5), abs=1e-12)
    assert eaurc(r, np.full(100, 0.3)) == pytest.approx(0.346574, abs=1e-6)
    # confidence plateaus equal to risk plateaus: trapezoid across the tie groups falls below the oracle
    plateaus = np.repeat([0.2, 0.4, 0.6, 0.8], 25)
    assert eaurc(1 - plateaus, plateaus) == pytest.approx(-0.005709, abs=1e-6)
    # ascending confidences, risk plateaus: the CSF is already optimal
    assert eaurc(1 - plateaus, np.linspace(0, 1, 100)) == pytest.approx(0.0, abs=1e-12)


# ----------------------------------------------------------------------------- hand-computed values


def test_hand_computed_distinct():
    risks = [0.1, 0.4, 0.7]
    conf = [3.0, 2.0, 1.0]
    # tau=1: cov 1, risk 0.4; tau=2: cov 2/3, risk 0.25; tau=3: cov 1/3, risk 0.1; then (0, 0.1)
    cov, risk = risk_coverage_curve(risks, conf)
    np.testing.assert_allclose(cov, [1, 2 / 3, 1 / 3, 0])
    np.testing.assert_allclose(risk, [0.4, 0.25, 0.1, 0.1])
    # AURC = 1/3 (0.4 + 0.25)/2 + 1/3 (0.25 + 0.1)/2 + 1/3 * 0.1 = 0.2
    assert aurc(risks, conf) == pytest.approx(0.2)
    assert eaurc(risks, conf) == pytest.approx(0.0, abs=1e-15)  # already the oracle ranking
    # generalized risk: (1, 1.2/3), (2/3, 0.5/3), (1/3, 0.1/3), (0, 0)
    cov, grisk = generalized_risk_coverage_curve(risks, conf)
    np.testing.assert_allclose(cov, [1, 2 / 3, 1 / 3, 0])
    np.testing.assert_allclose(grisk, [0.4, 0.5 / 3, 0.1 / 3, 0])
    # AUGRC = 1/3 [(1.2 + .5)/6 + (.5 + .1)/6 + .1/6] = 2.4 / 18
    assert augrc(risks, conf) == pytest.approx(2.4 / 18)
    assert eaugrc(risks, conf) == pytest.approx(0.0, abs=1e-15)


def test_hand_computed_ties_form_one_step():
    risks = [0.0, 1.0, 0.5]
    conf = [1.0, 1.0, 0.0]
    # tau=0: cov 1, risk 0.5; tau=1: cov 2/3, risk (0+1)/2 = 0.5; then (0, 0.5) -> AURC 0.5
    cov, risk = risk_coverage_curve(risks, conf)
    np.testing.assert_allclose(cov, [1, 2 / 3, 0])
    np.testing.assert_allclose(risk, [0.5, 0.5, 0.5])
    assert aurc(risks, conf) == pytest.approx(0.5)
    # oracle (strict): risks 0, .5, 1 -> (1, .5), (2/3, .25), (1/3, 0), (0, 0)
    #   -> 1/3 (.75/2) + 1/3 (.25/2) + 0 = 1/6
    assert eaurc(risks, conf) == pytest.approx(0.5 - 1 / 6)
    # generalized: (1, 1.5/3), (2/3, 1/3), (0, 0) -> 1/3 (0.5 + 1/3)/2 + 2/3 (1/3)/2 = 5/36 + 1/9 = 1/4
    cov, grisk = generalized_risk_coverage_curve(risks, conf)
    np.testing.assert_allclose(grisk, [0.5, 1 / 3, 0])
    assert augrc(risks, conf) == pytest.approx(0.25)
    # oracle generalized: (1, .5), (2/3, .5/3), (1/3, 0), (0, 0) -> 1/3 (.5 + .5/3)/2 + 1/3 (.5/3)/2 = 1/9 + 1/36
    assert eaugrc(risks, conf) == pytest.approx(0.25 - (1 / 9 + 1 / 36))


def test_ties_in_risk_do_not_tie_the_oracle():
    # The old oracle AURC(risks, -risks) let the three tied risks 1 form one step; the strict oracle
    # ranks them one by one. risks [0, .5, 1, 1, 1] (not binary):
    # strict: (1, 3.5/5), (.8, 2.5/4), (.6, 1.5/3), (.4, .25), (.2, 0), (0, 0) -> .2 * 1.725 = .345
    risks = [0.0, 0.5, 1.0, 1.0, 1.0]
    pts = [3.5 / 5, 2.5 / 4, 1.5 / 3, 0.25, 0.0, 0.0]
    oracle = 0.2 * sum((a + b) / 2 for a, b in zip(pts[:-1], pts[1:]))
    assert oracle == pytest.approx(0.345)
    conf = [5.0, 4.0, 3.0, 2.0, 1.0]  # a strict ranking as good as the oracle
    assert aurc(risks, conf) == pytest.approx(oracle)
    assert eaurc(risks, conf) == pytest.approx(0.0, abs=1e-15)
    tied = [5.0, 4.0, 1.0, 1.0, 1.0]  # the old oracle: the ties in risk as ties in confidence
    # (1, .7), (.4, .25), (.2, 0), (0, 0): .6 (.7 + .25)/2 + .2 (.25)/2 = .31, below the oracle
    assert aurc(risks, tied) == pytest.approx(0.31)
    assert eaurc(risks, tied) == pytest.approx(0.31 - 0.345)


def test_augrc_with_ties_hand_computed():
    # risks [1, 0, 1, 0], confidences [2, 2, 1, 1]: both groups hold one failure
    # points (1, 2/4), (1/2, 1/4), (0, 0): 1/2 (.5 + .25)/2 + 1/2 (.25)/2 = .25
    risks, conf = [1.0, 0.0, 1.0, 0.0], [2.0, 2.0, 1.0, 1.0]
    assert augrc(risks, conf) == pytest.approx(0.25)
    # binary: oracle AUGRC e^2/2 = 1/8
    assert eaugrc(risks, conf) == pytest.approx(0.125)
    # AURC: (1, .5), (.5, .5), (0, .5) = .5; oracle closed form .5 + .5 ln .5
    assert aurc(risks, conf) == pytest.approx(0.5)
    assert eaurc(risks, conf) == pytest.approx(0.5 - closed_form_aurc(0.5))


@pytest.mark.parametrize("n, n_fail", [(2, 1), (4, 1), (10, 3), (50, 49), (100, 50)])
def test_binary_closed_forms(n, n_fail):
    risks = np.r_[np.zeros(n - n_fail), np.ones(n_fail)]
    perfect = -risks + np.linspace(0.0, 1e-3, n)  # strict, failures least confident
    e = n_fail / n
    # AUGRC's closed form e^2/2 is exact for any N: a perfect ranking scores E-AUGRC 0
    assert ref_oracle_strict(risks, generalized=True) == pytest.approx(e * e / 2, abs=1e-15)
    assert eaugrc(risks, perfect) == pytest.approx(0.0, abs=1e-15)
    # AURC's closed form is the continuous limit; the trapezoid of a perfect ranking lies below it
    assert eaurc(risks, perfect) == pytest.approx(ref_oracle_strict(risks) - closed_form_aurc(e), abs=1e-14)
    assert eaurc(risks, perfect) <= 0.0


def test_binary_closed_form_is_the_limit_of_the_strict_oracle():
    for e in (0.1, 0.5, 0.9):
        n = 20000
        risks = (np.arange(n) < e * n).astype(float)
        assert ref_oracle_strict(risks) == pytest.approx(closed_form_aurc(e), abs=1e-6)


@pytest.mark.parametrize("conf", [np.full(7, 2.0), np.arange(7.0), -np.arange(7.0)])
def test_all_correct_and_all_wrong(conf):
    zeros, ones = np.zeros(7), np.ones(7)
    assert (aurc(zeros, conf), eaurc(zeros, conf), augrc(zeros, conf), eaugrc(zeros, conf)) == (0, 0, 0, 0)
    assert aurc(ones, conf) == pytest.approx(1.0)
    assert augrc(ones, conf) == pytest.approx(0.5)
    assert eaurc(ones, conf) == pytest.approx(0.0, abs=1e-15)
    assert eaugrc(ones, conf) == pytest.approx(0.0, abs=1e-15)


def test_single_case():
    assert aurc([0.3], [1.0]) == pytest.approx(0.3)
    assert augrc([0.3], [1.0]) == pytest.approx(0.15)
    assert eaurc([0.3], [1.0]) == pytest.approx(0.0, abs=1e-15)
    assert eaugrc([0.3], [1.0]) == pytest.approx(0.0, abs=1e-15)
    assert eaurc([1.0], [1.0]) == 0.0


def test_constant_confidence_gives_mean_risk():
    risks = np.array([0.2, 0.9, 0.4, 0.1])
    assert aurc(risks, np.full(4, 3.0)) == pytest.approx(risks.mean())
    assert augrc(risks, np.full(4, 3.0)) == pytest.approx(risks.mean() / 2)


# ----------------------------------------------------------------------------- brute force


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ties", [False, True])
def test_matches_bruteforce(seed, ties):
    rng = np.random.default_rng(seed)
    n = 40
    risks = rng.random(n)
    if ties:
        risks = np.round(risks, 1)
    conf = -risks + rng.normal(scale=0.3, size=n)
    if ties:
        conf = np.round(conf, 1)
    cov, risk = risk_coverage_curve(risks, conf)
    rcov, rrisk = ref_curve(risks, conf)
    np.testing.assert_allclose(cov, rcov, atol=1e-12)
    np.testing.assert_allclose(risk, rrisk, atol=1e-12)
    gcov, grisk = generalized_risk_coverage_curve(risks, conf)
    rgcov, rgrisk = ref_curve(risks, conf, generalized=True)
    np.testing.assert_allclose(gcov, rgcov, atol=1e-12)
    np.testing.assert_allclose(grisk, rgrisk, atol=1e-12)
    assert aurc(risks, conf) == pytest.approx(ref_aurc(risks, conf), abs=1e-12)
    assert augrc(risks, conf) == pytest.approx(ref_augrc(risks, conf), abs=1e-12)
    assert eaurc(risks, conf) == pytest.approx(ref_aurc(risks, conf) - ref_oracle_strict(risks), abs=1e-12)
    assert eaugrc(risks, conf) == pytest.approx(
        ref_augrc(risks, conf) - ref_oracle_strict(risks, generalized=True), abs=1e-12
    )


@pytest.mark.parametrize("seed", range(4))
def test_binary_risks_bruteforce(seed):
    rng = np.random.default_rng(100 + seed)
    risks = (rng.random(30) < 0.3).astype(float)
    risks[0] = 1.0
    conf = np.round(rng.normal(size=30), 1)  # with ties
    e = risks.mean()
    assert eaurc(risks, conf) == pytest.approx(ref_aurc(risks, conf) - closed_form_aurc(e), abs=1e-12)
    assert eaugrc(risks, conf) == pytest.approx(ref_augrc(risks, conf) - e * e / 2, abs=1e-12)


@pytest.mark.parametrize("seed", range(10))
def test_oracle_is_minimal_for_distinct_confidences(seed):
    rng = np.random.default_rng(seed)
    risks = rng.random(30)
    risks[:5] = 0.0  # ties in risk (perfect cases) inside the oracle
    for _ in range(20):
        conf = rng.random(30)  # distinct almost surely
        assert eaurc(risks, conf) >= -1e-12
        assert eaugrc(risks, conf) >= -1e-12
    # invariant to strictly increasing transforms of the confidences
    conf = rng.random(30)
    assert aurc(risks, np.exp(3 * conf)) == pytest.approx(aurc(risks, conf), abs=1e-12)
    assert augrc(risks, np.exp(3 * conf)) == pytest.approx(augrc(risks, conf), abs=1e-12)


def test_torch_inputs():
    risks = torch.tensor([0.1, 0.4, 0.7], dtype=torch.float32)
    conf = torch.tensor([3.0, 2.0, 1.0])
    assert aurc(risks, conf) == pytest.approx(0.2, abs=1e-7)
    assert isinstance(aurc(risks, conf), float)
    assert isinstance(eaugrc(risks, conf), float)


@pytest.mark.parametrize("fn", [aurc, eaurc, augrc, eaugrc, risk_coverage_curve, generalized_risk_coverage_curve])
def test_invalid_inputs(fn):
    with pytest.raises(ValueError, match="same length"):
        fn([0.1, 0.2], [1.0])
    with pytest.raises(ValueError, match="empty"):
        fn([], [])
    with pytest.raises(ValueError, match="NaN"):
        fn([0.1, np.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match="infinite"):
        fn([0.1, 0.2], [1.0, np.inf])


# ----------------------------------------------------------------------------- how far below 0 with ties


def tie_bound(risks, confidences):
    """The module docstring's bound: -1/2 w (mean risk - lowest risk), w the largest tie group's share
    of the cases (0 without ties; at least 1/N for binary risks, whose oracle is the continuous limit)."""
    r = np.asarray(risks, dtype=np.float64)
    _, counts = np.unique(np.asarray(confidences), return_counts=True)
    n = len(r)
    w = counts.max() / n if counts.max() > 1 else 0.0
    if np.isin(r, (0.0, 1.0)).all():
        w = max(w, 1.0 / n)
    return -0.5 * w * (r.mean() - r.min())


@pytest.mark.parametrize("kind", ["binary", "thirds", "continuous"])
def test_eaurc_below_zero_only_with_ties_and_within_the_bound(kind):
    rng = np.random.default_rng(7)
    lowest = 0.0
    for _ in range(3000):
        n = int(rng.integers(2, 14))
        risks = {"binary": lambda: rng.integers(0, 2, n).astype(float),
                 "thirds": lambda: rng.integers(0, 4, n) / 3.0,
                 "continuous": lambda: rng.random(n)}[kind]()
        conf = rng.integers(0, int(rng.integers(1, n + 1)), n).astype(float)  # many tie patterns
        value = eaurc(risks, conf)
        assert value >= tie_bound(risks, conf) - 1e-12, (risks, conf)
        assert eaugrc(risks, conf) >= -1e-12, (risks, conf)
        if len(np.unique(conf)) == n and not np.isin(risks, (0.0, 1.0)).all():
            assert value >= -1e-12  # no ties (and not binary): never below the oracle
        lowest = min(lowest, value)
    assert lowest < -0.01  # ties do push it below 0


@pytest.mark.parametrize("n", [2, 10, 1000])
def test_eaurc_tie_bound_is_nearly_reached(n):
    # one case of risk 0 ranked first, the other n - 1 (risk 1) tied: the chord from (1/n, 0) to (1, 1 - 1/n)
    # against the oracle's 1 - a/x: E-AURC = -[(1 - a^2)/2 + a ln a], a = 1/n
    risks = np.r_[0.0, np.ones(n - 1)]
    conf = np.r_[1.0, np.zeros(n - 1)]
    a = 1.0 / n
    expected = -((1 - a * a) / 2 + a * math.log(a))
    assert eaurc(risks, conf) == pytest.approx(expected, abs=1e-12)
    assert tie_bound(risks, conf) <= eaurc(risks, conf) <= tie_bound(risks, conf) + a * (math.log(n) + a)
