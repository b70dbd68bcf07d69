"""Figure 3 numbers against an independent pandas computation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from values_seg.report import component_deviations

KEYS = ["backbone", "prediction_model", "measure", "uncertainty_type", "aggregation"]


def _independent(results, task, metric, scenario, split, suited):
    rows = results[(results["task"] == task) & (results["metric"] == metric) & (results["scenario"] == scenario)
                   & (results["split"] == split)]
    methods = rows.groupby(KEYS)["value"].mean().reset_index()
    included = methods[methods["uncertainty_type"].isin(suited)]
    overall = included["value"].mean()
    included = included.assign(dev=included["value"] - overall)
    methods = methods.assign(dev=methods["value"] - overall)
    return methods, included, overall


def _got(dev, scenario, split, component):
    d = dev[(dev["scenario"] == scenario) & (dev["split"] == split) & (dev["component"] == component)]
    return d.set_index("level")


@pytest.mark.parametrize("split", ["iid", "ood"])
def test_failure_detection_deviations_match_groupby(spec, results_frame, split):
    dev = component_deviations(results_frame, "failure_detection", "aurc", spec)
    _, included, overall = _independent(results_frame, "failure_detection", "aurc", "toy_3b", split, ("PU", "AU", "EU"))
    for component in ("uncertainty_type", "prediction_model", "aggregation"):
        want = included.groupby(component)["dev"].agg(["mean", "std", "count"])
        got = _got(dev, "toy_3b", split, component)
        assert set(got.index) == set(want.index)
        np.testing.assert_allclose(got.loc[want.index, "deviation"], want["mean"], atol=1e-12)
        np.testing.assert_allclose(got.loc[want.index, "std"], want["std"], atol=1e-12)
        assert (got.loc[want.index, "n"] == want["count"]).all()
        assert not got["excluded"].any()
    assert np.isclose(dev[(dev["scenario"] == "toy_3b") & (dev["split"] == split)]["overall_mean"].iloc[0], overall)
    # no backbone block with a single backbone
    assert "backbone" not in set(dev["component"])


def test_ood_detection_excludes_au(spec, results_frame):
    dev = component_deviations(results_frame, "ood_detection", "auroc", spec)
    methods, included, _ = _independent(results_frame, "ood_detection", "auroc", "toy_3b", "all", ("PU", "EU"))
    ut = _got(dev, "toy_3b", "all", "uncertainty_type")
    assert bool(ut.loc["AU", "excluded"]) and not ut.loc["PU", "excluded"] and not ut.loc["EU", "excluded"]
    # the AU point is its methods' deviation from the mean of the included methods
    assert np.isclose(ut.loc["AU", "deviation"], methods[methods["uncertainty_type"] == "AU"]["dev"].mean())
    for component in ("prediction_model", "aggregation"):
        want = included.groupby(component)["dev"].agg(["mean", "std"])
        got = _got(dev, "toy_3b", "all", component)
        np.testing.assert_allclose(got.loc[want.index, "deviation"], want["mean"], atol=1e-12)
        np.testing.assert_allclose(got.loc[want.index, "std"], want["std"], atol=1e-12)
        # including AU would give different numbers
        with_au = methods.assign(dev=methods["value"] - methods["value"].mean()).groupby(component)["dev"].mean()
        assert not np.allclose(got.loc[with_au.index, "deviation"], with_au)
    assert set(dev["scenario"]) == {"toy_3b"}  # toy_1 has no shift


def test_ambiguity_excludes_eu_and_has_no_aggregation_block(spec, results_frame):
    dev = component_deviations(results_frame, "ambiguity", "ncc", spec)
    ut = _got(dev, "toy_1", "iid", "uncertainty_type")
    assert bool(ut.loc["EU", "excluded"]) and not ut.loc["AU", "excluded"]
    _, included, _ = _independent(results_frame, "ambiguity", "ncc", "toy_1", "iid", ("PU", "AU"))
    want = included.groupby("prediction_model")["dev"].mean()
    got = _got(dev, "toy_1", "iid", "prediction_model")
    np.testing.assert_allclose(got.loc[want.index, "deviation"], want, atol=1e-12)
    assert "aggregation" not in set(dev["component"])  # NCC does not depend on the aggregation


def test_active_learning_and_backbone_block(spec, results_frame):
    two = pd.concat([results_frame, results_frame.assign(backbone="hrnet",
                                                         value=results_frame["value"] + 0.01)], ignore_index=True)
    dev = component_deviations(two, "active_learning", "improvement", spec)
    bb = _got(dev, "toy_3b", "ood", "backbone")
    assert np.isclose(bb.loc["hrnet", "deviation"] - bb.loc["unet", "deviation"], 0.01)
    assert "AU" not in set(_got(dev, "toy_3b", "ood", "uncertainty_type").index)  # AL never ran AU measures


def test_a_method_the_data_cannot_support_is_not_averaged(spec, results_frame):
    """Issue 31.11: Figure 3 ranks component levels: a method resting on tied scores moves no mean."""
    from values_seg.report.deviations import left_out

    bad = (results_frame["task"] == "failure_detection") & (results_frame["metric"] == "aurc") \
        & (results_frame["prediction_model"] == "ssn") & (results_frame["measure"] == "mutual_information") \
        & (results_frame["aggregation"] == "patch") & (results_frame["seed"] == 0)
    marked = results_frame.assign(supported=~bad, support_note=bad.map({True: "all scores tied", False: ""}))
    dev = component_deviations(marked, "failure_detection", "aurc", spec)
    ssn_mi_patch = (results_frame["prediction_model"] == "ssn") & (results_frame["measure"] == "mutual_information") \
        & (results_frame["aggregation"] == "patch")  # every seed of the method leaves
    _, included, overall = _independent(results_frame[~ssn_mi_patch], "failure_detection", "aurc", "toy_3b", "iid",
                                        ("PU", "AU", "EU"))
    want = included.groupby("aggregation")["dev"].agg(["mean", "count"])
    got = _got(dev, "toy_3b", "iid", "aggregation")
    np.testing.assert_allclose(got.loc[want.index, "deviation"], want["mean"], atol=1e-12)
    assert (got.loc[want.index, "n"] == want["count"]).all()
    text = left_out(marked, "failure_detection", "aurc")
    assert text.startswith("⚠ 3 results (a method on one metric and split) left out (not averaged)")  # toy_1 i.i.d., toy_3b both
