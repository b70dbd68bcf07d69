"""Ambiguity task: NaN-ignoring mean NCC per measure and mean GED per model, i.i.d. and OoD."""

import numpy as np
import pytest

from values_seg import registry

from ._records import EE, MI, MS, NAN, PE, STANDARD_GED, STANDARD_NCC, by_key, make_result, standard, without_ood

task = registry.create("task", "ambiguity")


def test_by_hand():
    rows = by_key(task.score(standard()))
    # NCC iid (c2 is NaN for every measure: the raters agree everywhere there):
    #   pe (0.5 + 0.3)/2 = 0.4; ee (0.6 + 0.4)/2 = 0.5; mi (0.1 + 0.2)/2 = 0.15
    # NCC ood: pe (0.1 + 0.2 + 0.3)/3 = 0.2; ee (0.0 - 0.1 + 0.2)/3 = 0.1/3; mi 0.3 (only c3)
    # ms (max_softmax) is NaN on every case: no row.
    # GED iid (0.2 + 0.4 + 0.3)/3 = 0.3; ood (0.5 + 0.7 + 0.6)/3 = 0.6
    assert rows == {
        ("ncc", "iid", PE, None): pytest.approx(0.4),
        ("ncc", "iid", EE, None): pytest.approx(0.5),
        ("ncc", "iid", MI, None): pytest.approx(0.15),
        ("ncc", "ood", PE, None): pytest.approx(0.2),
        ("ncc", "ood", EE, None): pytest.approx(0.1 / 3),
        ("ncc", "ood", MI, None): pytest.approx(0.3),
        ("ged", "iid", None, None): pytest.approx(0.3),
        ("ged", "ood", None, None): pytest.approx(0.6),
    }


@pytest.mark.parametrize("measure", [PE, EE, MI])
def test_ncc_matches_nanmean(measure):
    rows = by_key(task.score(standard()))
    values = np.array(STANDARD_NCC[measure])
    assert rows[("ncc", "iid", measure, None)] == pytest.approx(np.nanmean(values[:3]))
    assert rows[("ncc", "ood", measure, None)] == pytest.approx(np.nanmean(values[3:]))


def test_ged_matches_numpy_mean():
    rows = by_key(task.score(standard()))
    assert rows[("ged", "iid", None, None)] == pytest.approx(np.mean(STANDARD_GED[:3]))
    assert rows[("ged", "ood", None, None)] == pytest.approx(np.mean(STANDARD_GED[3:]))


def test_all_nan_ncc_no_row():
    rows = by_key(task.score(standard()))
    assert not any(measure == MS for (_, _, measure, _) in rows)
    result = make_result(dice=[0.5, 0.6], ood=[False, False], ncc={PE: [NAN, NAN]}, ged=[0.2, 0.4])
    assert by_key(task.score(result)) == {("ged", "iid", None, None): pytest.approx(0.3)}


def test_nan_only_in_one_subset():
    result = make_result(dice=[0.5, 0.6], ood=[False, True], ncc={PE: [0.4, NAN]}, ged=[0.2, 0.4])
    rows = by_key(task.score(result))
    assert ("ncc", "ood", PE, None) not in rows
    assert rows[("ncc", "iid", PE, None)] == pytest.approx(0.4)
    assert rows[("ged", "ood", None, None)] == pytest.approx(0.4)  # a single case


def test_no_ood_cases():
    rows = by_key(task.score(without_ood()))
    assert {s for (_, s, _, _) in rows} == {"iid"}
    assert rows[("ged", "iid", None, None)] == pytest.approx(0.3)


def test_distractor_ncc_ignored():
    # validation and pool NCC are -1; including them would change every mean
    rows = by_key(task.score(standard()))
    assert rows[("ncc", "ood", MI, None)] == pytest.approx(0.3)
