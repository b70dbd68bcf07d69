"""Which tasks the data supports (the rules of values_seg_plugins.datasets._nnunet_raw.support)."""

import pytest

from values_seg_plugins.datasets._nnunet_raw.support import DataFacts, supported_tasks

ALWAYS = ["segmentation", "failure_detection", "calibration"]


@pytest.mark.parametrize("facts, family, retrainable, expected", [
    (DataFacts(5, 0, 1, 0), "bayesian", False, ALWAYS),
    (DataFacts(5, 3, 1, 0), "bayesian", False, ["segmentation", "ood_detection", "failure_detection", "calibration"]),
    (DataFacts(5, 0, 3, 0), "bayesian", False, ALWAYS + ["ambiguity"]),
    (DataFacts(5, 3, 3, 0), "bayesian", False,
     ["segmentation", "ood_detection", "failure_detection", "calibration", "ambiguity", "separation"]),
    (DataFacts(5, 3, 3, 0), "deterministic", True,  # no AU/EU measures: no separation
     ["segmentation", "ood_detection", "failure_detection", "calibration", "ambiguity"]),
    (DataFacts(5, 3, 1, 4), "bayesian", True,
     ["segmentation", "ood_detection", "failure_detection", "calibration", "active_learning"]),
    (DataFacts(5, 3, 1, 4), "bayesian", False,  # a trained nnU-Net cannot be retrained by values-seg
     ["segmentation", "ood_detection", "failure_detection", "calibration"]),
    (DataFacts(5, 0, 1, 4), "bayesian", True, ALWAYS),  # AL measures its gain on OoD test cases
    (DataFacts(0, 4, 1, 0), "bayesian", False, ALWAYS),  # OoD only: no AUROC without i.i.d. cases
])
def test_tasks_follow_the_data(facts, family, retrainable, expected):
    support = supported_tasks(facts, family, retrainable)
    assert list(support.tasks) == expected
    assert set(support.reasons) == set(expected) | {"ood_detection", "ambiguity", "active_learning", "separation"}
    assert all(line[2] in "+-" for line in support.describe().splitlines())


def test_reasons_say_what_is_missing():
    support = supported_tasks(DataFacts(5, 0, 1, 0), "bayesian", retrainable=False)
    assert "needs both i.i.d. and OoD test cases" in support.reasons["ood_detection"]
    assert "labelsTs_rater<k>" in support.reasons["ambiguity"]
    assert "not a trained nnU-Net folder" in support.reasons["active_learning"]


def test_no_test_cases_is_an_error():
    with pytest.raises(ValueError, match="no labelled test cases"):
        supported_tasks(DataFacts(0, 0, 0, 0), "bayesian", retrainable=False)
