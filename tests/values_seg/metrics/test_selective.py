import numpy as np
import pytest
import torch

from values_seg.metrics import aurc, eaurc, risk_coverage_curve


def ref_curve(risks, confidences):
    """Eq. 5-6 by explicit loop over the ascending unique thresholds, then the (0, last risk) point."""
    risks = np.asarray(risks, dtype=np.float64)
    conf = np.asarray(confidences, dtype=np.float64)
    cov, risk = [], []
    for tau in sorted(set(conf.tolist())):
        keep = conf >= tau
        cov.append(keep.sum() / len(conf))
        risk.append(risks[keep].sum() / keep.sum())
    return np.array(cov + [0.0]), np.array(risk + [risk[-1]])


def ref_aurc(risks, confidences):
    """Eq. 7: sum over consecutive points of |delta coverage| * mean of the two risks."""
    cov, risk = ref_curve(risks, confidences)
    total = 0.0
    for t in range(1, len(cov)):
        total += (cov[t - 1] - cov[t]) * (risk[t] + risk[t - 1]) / 2
    return total


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


def test_hand_computed_ties_form_one_step():
    risks = [0.0, 1.0, 0.5]
    conf = [1.0, 1.0, 0.0]
    # tau=0: cov 1, risk 0.5; tau=1: cov 2/3, risk (0+1)/2 = 0.5; then (0, 0.5) -> AURC 0.5
    cov, risk = risk_coverage_curve(risks, conf)
    np.testing.assert_allclose(cov, [1, 2 / 3, 0])
    np.testing.assert_allclose(risk, [0.5, 0.5, 0.5])
    assert aurc(risks, conf) == pytest.approx(0.5)


def test_constant_confidence_gives_mean_risk():
    risks = np.array([0.2, 0.9, 0.4, 0.1])
    assert aurc(risks, np.full(4, 3.0)) == pytest.approx(risks.mean())


def test_ties_can_make_eaurc_negative():
    # The eq. 7 trapezoid interpolates across a tie group. risks [0, .98, .99, 1], confidences [1, 0, 0, 0]:
    # CSF: (1, .7425), (.25, 0), (0, 0) -> AURC = .75 * .7425 / 2 = .2784375
    # oracle: (1, .7425), (.75, 1.97/3), (.5, .49), (.25, 0), (0, 0)
    #   -> .25 * ((.7425 + 1.97/3)/2 + (1.97/3 + .49)/2 + .49/2) = 0.37947916...
    risks = [0.0, 0.98, 0.99, 1.0]
    conf = [1.0, 0.0, 0.0, 0.0]
    oracle = 0.25 * ((0.7425 + 1.97 / 3) / 2 + (1.97 / 3 + 0.49) / 2 + 0.49 / 2)
    assert aurc(risks, conf) == pytest.approx(0.2784375)
    assert eaurc(risks, conf) == pytest.approx(0.2784375 - oracle)


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
    assert aurc(risks, conf) == pytest.approx(ref_aurc(risks, conf), abs=1e-12)
    assert eaurc(risks, conf) == pytest.approx(ref_aurc(risks, conf) - ref_aurc(risks, -risks), abs=1e-12)


@pytest.mark.parametrize("seed", range(10))
def test_oracle_is_minimal_for_distinct_confidences(seed):
    rng = np.random.default_rng(seed)
    risks = rng.random(30)
    risks[:5] = 0.0  # ties in risk (perfect cases) inside the oracle
    oracle = aurc(risks, -risks)
    for _ in range(20):
        conf = rng.random(30)  # distinct almost surely
        assert aurc(risks, conf) >= oracle - 1e-12
        assert eaurc(risks, conf) >= -1e-12
    # invariant to strictly increasing transforms of the confidences
    conf = rng.random(30)
    assert aurc(risks, np.exp(3 * conf)) == pytest.approx(aurc(risks, conf), abs=1e-12)


def test_torch_inputs():
    risks = torch.tensor([0.1, 0.4, 0.7], dtype=torch.float32)
    conf = torch.tensor([3.0, 2.0, 1.0])
    assert aurc(risks, conf) == pytest.approx(0.2, abs=1e-7)
    assert isinstance(aurc(risks, conf), float)


@pytest.mark.parametrize("fn", [aurc, eaurc, risk_coverage_curve])
def test_invalid_inputs(fn):
    with pytest.raises(ValueError, match="same length"):
        fn([0.1, 0.2], [1.0])
    with pytest.raises(ValueError, match="empty"):
        fn([], [])
    with pytest.raises(ValueError, match="NaN"):
        fn([0.1, np.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match="infinite"):
        fn([0.1, 0.2], [1.0, np.inf])
