"""Active-learning task: relative OoD Dice improvement over random querying (eq. 9-10)."""

import pytest

from values_seg import registry
from values_seg_plugins.tasks._active_learning_cycle import ActiveLearningResult

from ._records import MI, NAN, PE, by_key, standard

task = registry.create("task", "active_learning")


def with_al(first, random, method):
    return standard(active_learning=ActiveLearningResult(first, random, method))


def test_by_hand():
    result = with_al(0.5, 0.55, {(PE, "image"): 0.6, (MI, "patch"): 0.5, (MI, "image"): 0.45})
    rows = by_key(task.score(result))
    # C_random = (0.55 - 0.5) / 0.5 = 0.1
    # pe/image: (0.6 - 0.5)/0.5 - 0.1 = 0.1; mi/patch: 0 - 0.1 = -0.1; mi/image: -0.1 - 0.1 = -0.2
    assert rows == {
        ("improvement", "ood", PE, "image"): pytest.approx(0.1),
        ("improvement", "ood", MI, "patch"): pytest.approx(-0.1),
        ("improvement", "ood", MI, "image"): pytest.approx(-0.2),
    }


def test_equals_relative_difference_to_random():
    # C_method - C_random = (Dice_method - Dice_random) / Dice_first
    first, random, method = 0.8, 0.82, 0.86
    rows = by_key(task.score(with_al(first, random, {(PE, "patch"): method})))
    assert rows[("improvement", "ood", PE, "patch")] == pytest.approx((method - random) / first)


def test_none_no_rows():
    assert task.score(standard()) == []


def test_empty_method_dice_no_rows():
    assert task.score(with_al(0.5, 0.55, {})) == []


def test_undefined_no_rows():
    # Dice_first = 0: the relative change (eq. 9) is undefined
    assert task.score(with_al(0.0, 0.1, {(PE, "image"): 0.2})) == []
    assert task.score(with_al(NAN, 0.1, {(PE, "image"): 0.2})) == []
    rows = by_key(task.score(with_al(0.5, 0.5, {(PE, "image"): NAN, (MI, "image"): 0.55})))
    assert rows == {("improvement", "ood", MI, "image"): pytest.approx(0.1)}
