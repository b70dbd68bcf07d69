"""The curves the tasks write for the report: the same numbers their metrics came from."""

import numpy as np
import pytest

from values_seg import registry

from ._records import by_key, full, standard

failure_detection = registry.create("task", "failure_detection")
calibration = registry.create("task", "calibration")


def test_risk_coverage_curves_integrate_to_the_tasks_areas():
    result = standard()
    curves = failure_detection.curves(result)
    rows = by_key(failure_detection.score(result))
    measured = curves[curves["ranking"] == "uncertainty"]
    assert not measured.empty
    for (curve, measure, aggregation, split), g in measured.groupby(["curve", "measure", "aggregation", "split"]):
        metric = {"risk_coverage": "aurc", "generalized_risk_coverage": "augrc"}[curve]
        g = g.sort_values("point")
        coverage, risk = g["coverage"].to_numpy(), g["risk"].to_numpy()
        assert coverage[0] == 1.0 and coverage[-1] == 0.0  # from all cases kept to none
        trapezoids = float(np.sum((coverage[:-1] - coverage[1:]) * (risk[:-1] + risk[1:]) / 2))
        assert trapezoids == pytest.approx(rows[(metric, split, measure, aggregation)], abs=1e-12)
        assert g["area"].nunique() == 1 and g["area"].iloc[0] == pytest.approx(trapezoids, abs=1e-12)


def test_the_oracle_is_one_curve_per_subset_ranked_by_risk():
    curves = failure_detection.curves(standard())
    oracle = curves[curves["ranking"] == "oracle"]
    assert set(oracle["split"]) == {"iid", "ood"} and set(oracle["measure"]) == {""}
    rows = by_key(failure_detection.score(standard()))
    for split, g in oracle[oracle["curve"] == "risk_coverage"].groupby("split"):
        some = next(k for k in rows if k[0] == "aurc" and k[1] == split)
        excess = rows[("eaurc",) + some[1:]]
        assert g["area"].iloc[0] == pytest.approx(rows[some] - excess, abs=1e-12)


def test_reliability_bins_carry_the_ace():
    result = full()
    curves = calibration.curves(result)
    rows = by_key(calibration.score(result), ("metric", "split", "measure"))
    assert set(curves["curve"]) == {"reliability"}
    for (measure, split), g in curves.groupby(["measure", "split"]):
        bins = result.output("calibration_bins").bins[(measure, split)]
        assert g["count"].tolist() == [float(c) for c in bins.count]
        assert g["area"].iloc[0] == rows[("ace", split, measure)]
