"""Segmentation task: mean per-case Dice (eq. 3) of the i.i.d. and the OoD test cases."""

import numpy as np
import pytest

from values_seg import registry

from ._records import STANDARD_DICE, by_key, make_result, standard, without_ood

task = registry.create("task", "segmentation")


def test_standard_by_hand():
    rows = by_key(task.score(standard()))
    # iid: (0.9 + 0.8 + 0.6) / 3 = 2.3 / 3; ood: (0.7 + 0.4 + 0.5) / 3 = 1.6 / 3
    assert rows == {
        ("dice", "iid", None, None): pytest.approx(2.3 / 3),
        ("dice", "ood", None, None): pytest.approx(1.6 / 3),
    }


def test_matches_numpy_means():
    rows = by_key(task.score(standard()))
    assert rows[("dice", "iid", None, None)] == pytest.approx(np.mean(STANDARD_DICE[:3]))
    assert rows[("dice", "ood", None, None)] == pytest.approx(np.mean(STANDARD_DICE[3:]))


def test_distractor_splits_ignored():
    # validation and pool cases have dice 0; including them would lower both means
    rows = by_key(task.score(standard()))
    assert rows[("dice", "iid", None, None)] > 0.7


def test_no_ood_cases():
    rows = by_key(task.score(without_ood()))
    assert rows == {("dice", "iid", None, None): pytest.approx(2.3 / 3)}


def test_single_case_subset():
    rows = by_key(task.score(make_result(dice=[0.9, 0.8, 0.25], ood=[False, False, True])))
    assert rows[("dice", "ood", None, None)] == pytest.approx(0.25)
    assert rows[("dice", "iid", None, None)] == pytest.approx(0.85)


def test_independent_of_scores():
    # no scores at all: Dice rows still come (they do not depend on a measure)
    rows = task.score(make_result(dice=[1.0, 0.5], ood=[False, True]))
    assert {(r["split"], r["value"]) for r in rows} == {("iid", 1.0), ("ood", 0.5)}
