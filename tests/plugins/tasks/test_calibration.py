"""Calibration task: ACE (eq. 11) from the accumulated bins per (measure, subset)."""

import numpy as np
import pytest

from values_seg import registry
from values_seg.metrics import CalibrationBins, calibration_bins

from ._records import EE, MI, PE, bins, by_key, full, standard

task = registry.create("task", "calibration")


def test_by_hand():
    rows = by_key(task.score(full()))
    # pe iid: bin 2: 2 pixels, mean confidence 0.11, accuracy 1 -> gap 0.89;
    #         bin 18: 2 pixels, mean confidence 0.925, accuracy 0.5 -> gap 0.425; ACE = (0.89 + 0.425) / 2
    # pe ood: bin 10: 4 pixels, mean confidence 0.525, accuracy 0.25 -> ACE 0.275
    assert rows == {
        ("ace", "iid", PE, None): pytest.approx((0.89 + 0.425) / 2),
        ("ace", "ood", PE, None): pytest.approx(0.275),
    }


def test_from_pixels_equal_weight_per_bin():
    # 10 pixels at confidence 0.97 all correct (gap 0.03) and 1 pixel at 0.51 wrong (gap 0.51):
    # every non-empty bin weighs the same, so ACE = (0.03 + 0.51) / 2, not the pixel-weighted mean
    correct = np.array([1] * 10 + [0])
    confidence = np.array([0.97] * 10 + [0.51])
    result = standard(calibration={(MI, "iid"): calibration_bins(correct, confidence)})
    rows = by_key(task.score(result))
    assert rows == {("ace", "iid", MI, None): pytest.approx((0.03 + 0.51) / 2)}


def test_merged_bins_of_several_cases():
    a = calibration_bins(np.array([1, 1, 0]), np.array([0.9, 0.8, 0.3]))
    b = calibration_bins(np.array([0, 1]), np.array([0.9, 0.31]))
    result = standard(calibration={(EE, "ood"): sum([a, b])})
    rows = by_key(task.score(result))
    # bins: 0.3/0.31 -> bin 6 (mean 0.305, acc 0.5, gap 0.195); 0.8 -> bin 16 (gap 0.2);
    # 0.9, 0.9 -> bin 18 (mean 0.9, acc 0.5, gap 0.4); ACE = (0.195 + 0.2 + 0.4) / 3
    assert rows[("ace", "ood", EE, None)] == pytest.approx((0.195 + 0.2 + 0.4) / 3)


def test_missing_keys_skipped():
    # only the OoD bins of one measure: no iid row, no row for the others
    result = standard(calibration={(PE, "ood"): bins(b10=(4, 2.1, 1))})
    assert by_key(task.score(result)) == {("ace", "ood", PE, None): pytest.approx(0.275)}


def test_no_calibration_no_rows():
    assert task.score(standard()) == []


def test_empty_bins_skipped():
    result = standard(calibration={(PE, "iid"): CalibrationBins.empty(20), (PE, "ood"): bins(b0=(1, 0.02, 0))})
    assert by_key(task.score(result)) == {("ace", "ood", PE, None): pytest.approx(0.02)}


def test_other_subsets_ignored():
    result = standard(calibration={(PE, "all"): bins(b0=(1, 0.02, 0)), (PE, "val"): bins(b0=(1, 0.02, 0))})
    assert task.score(result) == []
