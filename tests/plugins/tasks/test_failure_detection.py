"""Failure-detection task: AURC / E-AURC (eq. 4-8), risk 1 - Dice, confidence -score, per subset."""

import numpy as np
import pytest

from values_seg import registry

from ._records import EE, MI, PE, STANDARD_DICE, STANDARD_SCORES, by_key, make_result, standard, without_ood

task = registry.create("task", "failure_detection")


def loop_aurc(risks, confidences):
    """Eq. 5-7 by explicit loops: thresholds = unique confidences ascending, then (coverage 0, last risk)."""
    n = len(risks)
    coverage, risk = [], []
    for tau in sorted(set(confidences)):
        kept = [r for r, c in zip(risks, confidences) if c >= tau]
        coverage.append(len(kept) / n)
        risk.append(sum(kept) / len(kept))
    coverage.append(0.0)
    risk.append(risk[-1])
    total = 0.0
    for t in range(1, len(coverage)):
        total += (coverage[t - 1] - coverage[t]) * (risk[t] + risk[t - 1]) / 2
    return total


def loop_eaurc(risks, confidences):
    return loop_aurc(risks, confidences) - loop_aurc(risks, [-r for r in risks])


def test_by_hand():
    rows = by_key(task.score(standard()))
    # pe/image, iid cases c0-c2: risks 1 - dice = (0.1, 0.2, 0.4), confidences -(0.1, 0.3, 0.2).
    # thresholds -0.3: all kept, cov 1, risk 0.7/3; -0.2: c0, c2, cov 2/3, risk 0.25;
    # -0.1: c0, cov 1/3, risk 0.1; then (0, 0.1).
    # AURC = 1/3 * (0.7/3 + 0.25)/2 + 1/3 * (0.25 + 0.1)/2 + 1/3 * (0.1 + 0.1)/2 = 1.0333../6
    aurc = (0.7 / 3 + 0.25 + 0.25 + 0.1 + 0.1 + 0.1) / 6
    # oracle (confidence -risk): kept all (0.7/3), then c0, c1 (0.15), then c0 (0.1), then (0, 0.1)
    oracle = (0.7 / 3 + 0.15 + 0.15 + 0.1 + 0.1 + 0.1) / 6
    assert rows[("aurc", "iid", PE, "image")] == pytest.approx(aurc)
    assert rows[("eaurc", "iid", PE, "image")] == pytest.approx(aurc - oracle)
    assert aurc == pytest.approx(0.1722222222)
    assert aurc - oracle == pytest.approx(1 / 30)


def _standard_inputs(key, subset):
    """The task's rows on the standard evaluation, and one (measure, aggregation)'s risks and
    confidences on ``subset`` (cases 0-2 i.i.d., 3-5 OoD) for the loop references."""
    part = slice(0, 3) if subset == "iid" else slice(3, 6)
    risks = [1 - d for d in STANDARD_DICE[part]]
    return by_key(task.score(standard())), risks, [-s for s in STANDARD_SCORES[key][part]]


@pytest.mark.parametrize("key", sorted(STANDARD_SCORES))
@pytest.mark.parametrize("subset", ["iid", "ood"])
def test_against_loop(key, subset):
    rows, risks, confidences = _standard_inputs(key, subset)
    measure, aggregation = key
    assert rows[("aurc", subset, measure, aggregation)] == pytest.approx(loop_aurc(risks, confidences))
    assert rows[("eaurc", subset, measure, aggregation)] == pytest.approx(loop_eaurc(risks, confidences))


def test_rows_complete():
    rows = by_key(task.score(standard()))
    expected = {(m, s, meas, agg) for (meas, agg) in STANDARD_SCORES for m in ("aurc", "eaurc", "augrc", "eaugrc")
                for s in ("iid", "ood")}
    assert set(rows) == expected


def test_ties_enter_together():
    rows = by_key(task.score(standard()))
    # ee/image iid: risks (0.1, 0.2, 0.4), confidences (-0.2, -0.2, -0.5): the tie c0, c1 is one step.
    # -0.5: all, 0.7/3; -0.2: c0 and c1 together, cov 2/3, risk 0.15; then (0, 0.15)
    expected = (1 / 3) * (0.7 / 3 + 0.15) / 2 + (2 / 3) * (0.15 + 0.15) / 2
    assert rows[("aurc", "iid", EE, "image")] == pytest.approx(expected)


def test_single_case_subset():
    result = make_result(
        dice=[0.9, 0.8, 0.6, 0.7, 0.3],
        ood=[False, False, False, False, True],
        scores={(MI, "patch"): [0.1, 0.4, 0.2, 0.3, 0.8]},
    )
    rows = by_key(task.score(result))
    # one case: the curve is flat at its risk 1 - 0.3 over coverage 1 -> 0; the oracle equals it
    assert rows[("aurc", "ood", MI, "patch")] == pytest.approx(0.7)
    assert rows[("eaurc", "ood", MI, "patch")] == pytest.approx(0.0)


def test_no_ood_cases():
    rows = by_key(task.score(without_ood()))
    assert {s for (_, s, _, _) in rows} == {"iid"}
    assert len(rows) == 4 * len(STANDARD_SCORES)


def test_oracle_ranking_has_zero_excess():
    dice = [0.9, 0.5, 0.7, 0.2]
    # uncertainty = 1 - dice ranks the cases exactly by their risk
    result = make_result(dice=dice, ood=[False] * 4, scores={(PE, "image"): [1 - d for d in dice]})
    rows = by_key(task.score(result))
    assert rows[("eaurc", "iid", PE, "image")] == pytest.approx(0.0, abs=1e-12)
    risks = [1 - d for d in dice]
    assert rows[("aurc", "iid", PE, "image")] == pytest.approx(loop_aurc(risks, [-r for r in risks]))
    assert np.isclose(loop_eaurc(risks, [-r for r in risks]), 0.0)


def loop_augrc(risks, confidences):
    """Generalized risk (Traub et al. 2024) by loops: at each unique confidence threshold, the summed risk
    of the accepted cases over all N; then (coverage 0, 0); trapezoid."""
    n = len(risks)
    coverage, grisk = [], []
    for tau in sorted(set(confidences)):
        kept = [r for r, c in zip(risks, confidences) if c >= tau]
        coverage.append(len(kept) / n)
        grisk.append(sum(kept) / n)
    coverage.append(0.0)
    grisk.append(0.0)
    return sum((coverage[t - 1] - coverage[t]) * (grisk[t] + grisk[t - 1]) / 2 for t in range(1, len(coverage)))


def test_augrc_by_hand():
    rows = by_key(task.score(standard()))
    # pe/image, iid: risks (0.1, 0.2, 0.4), confidences -(0.1, 0.3, 0.2): coverage 1, 2/3, 1/3, 0 with
    # generalized risk 0.7/3, (0.1 + 0.4)/3, 0.1/3, 0: AUGRC = (1/3)[(0.7 + 0.5)/3 + (0.5 + 0.1)/3 + 0.1/3] / 2
    augrc = (1 / 3) * ((0.7 + 0.5) / 3 + (0.5 + 0.1) / 3 + 0.1 / 3) / 2
    # oracle: risks ascending 0.1, 0.2, 0.4: generalized risk 0.7/3, 0.3/3, 0.1/3, 0
    oracle = (1 / 3) * ((0.7 + 0.3) / 3 + (0.3 + 0.1) / 3 + 0.1 / 3) / 2
    assert rows[("augrc", "iid", PE, "image")] == pytest.approx(augrc)
    assert rows[("eaugrc", "iid", PE, "image")] == pytest.approx(augrc - oracle)
    assert augrc - oracle == pytest.approx((1.9 - 1.5) / 18)


@pytest.mark.parametrize("key", sorted(STANDARD_SCORES))
@pytest.mark.parametrize("subset", ["iid", "ood"])
def test_augrc_against_loop(key, subset):
    rows, risks, confidences = _standard_inputs(key, subset)
    oracle = loop_augrc(risks, [-r for r in risks])
    assert rows[("augrc", subset, *key)] == pytest.approx(loop_augrc(risks, confidences))
    assert rows[("eaugrc", subset, *key)] == pytest.approx(loop_augrc(risks, confidences) - oracle)


def test_augrc_ties_form_one_step():
    rows = by_key(task.score(standard()))
    # ee/image iid: risks (0.1, 0.2, 0.4), confidences (-0.2, -0.2, -0.5): the tie c0, c1 is one step:
    # coverage 1 (0.7/3), 2/3 (0.3/3), 0 (0): (1/3)(0.7 + 0.3)/6 + (2/3)(0.3 + 0)/6
    expected = (1 / 3) * (0.7 + 0.3) / 6 + (2 / 3) * 0.3 / 6
    assert rows[("augrc", "iid", EE, "image")] == pytest.approx(expected)


def test_binary_risks_closed_form():
    # Dice 1 or 0 (risk 0 or 1): the oracle's AUGRC is e^2 / 2 with the error rate e (exact for any N)
    dice = [1, 0, 1, 1, 0, 1, 1, 1]
    result = make_result(dice=dice, ood=[False] * 8, scores={(PE, "image"): [0.3, 0.2, 0.1, 0.4, 0.9, 0.5, 0.6, 0.7]})
    rows = by_key(task.score(result))
    risks = [1 - d for d in dice]
    confidences = [-s for s in [0.3, 0.2, 0.1, 0.4, 0.9, 0.5, 0.6, 0.7]]
    e = 2 / 8
    assert rows[("eaugrc", "iid", PE, "image")] == pytest.approx(loop_augrc(risks, confidences) - e * e / 2)
