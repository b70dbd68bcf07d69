"""Which aggregations rank the cases identically on a run: decided from the per-case scores."""

from __future__ import annotations

import numpy as np
import pandas as pd

from values_seg.report.equivalence import confirmed, equivalent_groups


def _cases(scores: dict) -> pd.DataFrame:
    """cases.csv rows from ``{(measure, aggregation): per-case scores}`` (one model, scenario, seed)."""
    return pd.DataFrame([dict(dataset="toy", scenario="toy_1", seed=0, backbone="unet", prediction_model="ensemble",
                              measure=m, aggregation=a, case_id=f"c{i}", score=float(s))
                         for (m, a), values in scores.items() for i, s in enumerate(values)])


BASE = np.array([0.3, 0.1, 0.7, 0.2, 0.9])


def test_a_monotone_transform_of_the_scores_is_the_same_ranking():
    cases = _cases({("pe", "image_mean"): BASE, ("pe", "image_sum"): 1024 * BASE, ("pe", "log"): np.log(BASE),
                    ("pe", "other"): BASE[::-1], ("mi", "image_mean"): BASE ** 2, ("mi", "image_sum"): 1024 * BASE ** 2,
                    ("mi", "log"): np.log(BASE ** 2), ("mi", "other"): BASE})
    assert equivalent_groups(cases) == [["image_mean", "image_sum", "log"]]


def test_one_combination_that_ranks_differently_keeps_them_apart():
    swapped = BASE[[1, 0, 2, 3, 4]]
    cases = _cases({("pe", "a"): BASE, ("pe", "b"): 2 * BASE, ("mi", "a"): BASE, ("mi", "b"): swapped})
    assert equivalent_groups(cases) == []


def test_ties_must_be_the_same_ties():
    tied = np.array([0.3, 0.3, 0.7, 0.2, 0.9])
    cases = _cases({("pe", "a"): BASE, ("pe", "b"): tied, ("pe", "c"): 5 * tied})
    assert equivalent_groups(cases) == [["b", "c"]]


def test_aggregations_never_scored_together_are_not_merged():
    cases = _cases({("pe", "a"): BASE, ("samples", "b"): BASE})
    assert equivalent_groups(cases) == []
    assert equivalent_groups(None) == [] and equivalent_groups(cases.drop(columns="score")) == []


def test_the_panels_values_must_agree_too():
    methods = pd.DataFrame({"backbone": "unet", "prediction_model": "ensemble", "measure": ["pe", "pe", "mi", "mi"],
                            "aggregation": ["a", "b", "a", "b"], "value": [0.7, 0.7, 0.6, 0.6]})
    assert confirmed([["a", "b"]], [methods]) == [["a", "b"]]
    differs = methods.assign(value=[0.7, 0.7, 0.6, 0.61])
    assert confirmed([["a", "b"]], [methods, differs]) == []
