"""Voxel-level retention task (Shifts 2.0): mean nDSC per model and mean nDSC R-AUC per measure, per subset."""

import pytest

from values_seg import registry

from ._records import FULL_NDSC, FULL_NDSC_RAUC, MI, PE, by_key, full, standard

task = registry.create("task", "ndsc_retention")


def test_by_hand():
    rows = by_key(task.score(full()))
    # i.i.d. c0-c2, OoD c3-c5: the means of the per-case values of the fused evaluation
    assert rows == {
        ("ndsc", "iid", None, None): pytest.approx((0.6 + 0.5 + 0.2) / 3),
        ("ndsc", "ood", None, None): pytest.approx((0.4 + 0.1 + 0.3) / 3),
        ("ndsc_rauc", "iid", PE, None): pytest.approx((0.1 + 0.2 + 0.4) / 3),
        ("ndsc_rauc", "ood", PE, None): pytest.approx((0.3 + 0.5 + 0.2) / 3),
        ("ndsc_rauc", "iid", MI, None): pytest.approx((0.2 + 0.1 + 0.3) / 3),
        ("ndsc_rauc", "ood", MI, None): pytest.approx((0.1 + 0.4 + 0.6) / 3),
    }
    assert len(FULL_NDSC) == 6 and set(FULL_NDSC_RAUC) == {PE, MI}


def test_without_the_retention_stage_no_rows():
    assert task.score(standard()) == []  # no ndsc column, no retention frame
