"""Image-level Dice retention task (Shifts 1.0): R-AUC of the uncertainty ranking, random and oracle rankings."""

import numpy as np
import pytest

from values_seg import registry

from ._records import EE, PE, STANDARD_DICE, STANDARD_SCORES, by_key, make_result, standard

task = registry.create("task", "dice_retention")


def loop_rauc(dice, uncertainty):
    """Retention by loops over every order of the tied cases: keep the k most certain (Dice), replace the
    rest by the reference (Dice 1); R-AUC = 1 - trapezoid of the mean Dice over k/N, averaged over orders."""
    import itertools

    n = len(dice)
    areas = []
    for order in itertools.permutations(range(n)):
        ranked = sorted(order, key=lambda i: uncertainty[i])  # stable: ties keep the permutation's order
        values = [(sum(dice[i] for i in ranked[:k]) + n - k) / n for k in range(n + 1)]
        areas.append(1 - sum((values[k] + values[k + 1]) / 2 / n for k in range(n)))
    return float(np.mean(areas))


def test_by_hand():
    rows = by_key(task.score(standard()))
    # pe/image iid: Dice (0.9, 0.8, 0.6), uncertainty (0.1, 0.3, 0.2): retained 0, c0, c0+c2, all:
    # mean Dice 1, (0.9 + 2)/3, (1.5 + 1)/3, 2.3/3; area = (1/3)[(1 + 2.9/3)/2 + (2.9/3 + 2.5/3)/2 + (2.5/3 + 2.3/3)/2]
    area = (1 / 3) * ((1 + 2.9 / 3) / 2 + (2.9 / 3 + 2.5 / 3) / 2 + (2.5 / 3 + 2.3 / 3) / 2)
    assert rows[("rauc", "iid", PE, "image")] == pytest.approx(1 - area)
    # random: (1 - mean Dice) / 2; oracle: the best first (0.9, 0.8, 0.6)
    assert rows[("rauc_random", "iid", None, None)] == pytest.approx((1 - 2.3 / 3) / 2)
    oracle = (1 / 3) * ((1 + 2.9 / 3) / 2 + (2.9 / 3 + 2.7 / 3) / 2 + (2.7 / 3 + 2.3 / 3) / 2)
    assert rows[("rauc_oracle", "iid", None, None)] == pytest.approx(1 - oracle)


@pytest.mark.parametrize("key", sorted(STANDARD_SCORES))
@pytest.mark.parametrize("subset", ["iid", "ood"])
def test_against_loop_over_orders(key, subset):
    part = slice(0, 3) if subset == "iid" else slice(3, 6)
    rows = by_key(task.score(standard()))
    assert rows[("rauc", subset, *key)] == pytest.approx(loop_rauc(STANDARD_DICE[part], STANDARD_SCORES[key][part]))


def test_equals_the_augrc_of_failure_detection():
    # the error at retained fraction k/N is the generalized risk at coverage k/N (risk 1 - Dice)
    fd = by_key(registry.create("task", "failure_detection").score(standard()))
    for (metric, split, measure, aggregation), value in by_key(task.score(standard())).items():
        if metric == "rauc":
            assert value == pytest.approx(fd[("augrc", split, measure, aggregation)], abs=1e-12)


def test_oracle_ranking_reaches_the_oracle_and_ties_average():
    dice = [0.9, 0.5, 0.7, 0.2]
    result = make_result(dice=dice, ood=[False] * 4, scores={(PE, "image"): [1 - d for d in dice],
                                                             (EE, "image"): [0.5] * 4})
    rows = by_key(task.score(result))
    assert rows[("rauc", "iid", PE, "image")] == pytest.approx(rows[("rauc_oracle", "iid", None, None)])
    # all tied: the expectation over orders is the random ranking
    assert rows[("rauc", "iid", EE, "image")] == pytest.approx(rows[("rauc_random", "iid", None, None)])
