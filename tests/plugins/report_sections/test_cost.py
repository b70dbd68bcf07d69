"""The cost section: the Pareto front, each model's best point per task, and the section in a built report."""

import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from values_seg_plugins.report_sections.cost import pareto_front, quality_points


def test_pareto_front_of_a_hand_made_set():
    cost = [1, 2, 3, 4, 2, np.nan, 8]
    quality = [0.5, 0.7, 0.6, 0.9, 0.7, 1.0, 0.9]
    # 3 is beaten by 2 (cheaper, better); the two equal points (2 and 5) both stay; no cost: never on it;
    # 7 is as good as 4 and costs more
    assert pareto_front(cost, quality).tolist() == [True, True, False, True, True, False, False]
    # lower is better: the cheapest is best too, nothing else
    assert pareto_front([1, 2, 3], [0.2, 0.1, 0.3], higher_is_better=False).tolist() == [True, True, False]


def _costs(models: dict[str, float], scenario: str = "toy_1") -> pd.DataFrame:
    return pd.DataFrame([{"dataset": "toy", "scenario": scenario, "seed": 0, "backbone": "unet", "prediction_model": m,
                          "family": "x", "trainings": 1, "steps": 10, "train_seconds": 1.0, "train_device": "cpu",
                          "forward_passes": 1, "flops_per_case": f, "inference_seconds_per_case": 0.01,
                          "peak_memory_bytes": None, "inference_device": "cpu", "measured_cases": 5}
                         for m, f in models.items()])


def _results(values: dict[tuple[str, str], float]) -> pd.DataFrame:
    return pd.DataFrame([{"dataset": "toy", "scenario": "toy_1", "seed": 0, "backbone": "unet", "prediction_model": m,
                          "measure": measure, "aggregation": "patch", "task": "failure_detection", "metric": "aurc",
                          "split": "iid", "value": v, "ci_low": v - 0.01, "ci_high": v + 0.01, "supported": True,
                          "support_note": ""} for (m, measure), v in values.items()])


def test_each_models_best_measure_against_its_cost():
    results = _results({("det", "pe"): 0.30, ("det", "msr"): 0.20, ("ens", "pe"): 0.10, ("tta", "pe"): 0.25})
    points = quality_points(results, _costs({"det": 1e6, "ens": 5e6, "tta": 8e6}), "failure_detection", "aurc",
                            "lower")
    best = points.set_index("prediction_model")
    assert best.loc["det", "measure"] == "msr" and best.loc["det", "value"] == 0.20  # lower AURC is better
    assert best["on_front"].to_dict() == {"det": True, "ens": True, "tta": False}
    assert best.loc["ens", "flops_per_case"] == 5e6


def test_the_section_in_a_built_report(synthetic_run, tmp_path):
    from values_seg.report import build_report
    from values_seg.storage import run_directory

    run_dir = Path(shutil.copytree(synthetic_run, tmp_path / "run"))
    results = pd.read_csv(run_dir / "results.csv")
    flops = {m: 1e7 * (i + 1) for i, m in enumerate(sorted(results["prediction_model"].unique()))}
    frames = [_costs(flops, s) for s in sorted(results["scenario"].unique())]
    pd.concat(frames).to_csv(run_dir / "costs.csv", index=False)
    run_directory.record(run_dir, [run_dir / "costs.csv"])
    text = build_report(run_dir).read_text()
    assert "## Cost beside quality" in text and "Could not build the cost section" not in text
    flat = " ".join(text.split())  # report.md wraps at 100 columns
    assert "On the front of the point estimates (AURC)" in flat or "On the front of the point estimates (Dice)" in flat
    assert "Dominated by the data:" in flat or "no point is shown to be dominated" in flat
    assert (run_dir / "figures" / "cost_failure_detection.png").stat().st_size > 0
    assert (run_dir / "figures" / "cost_segmentation.png").exists()
    for name in ("cost.tex", "cost.csv", "cost_failure_detection.csv", "cost_failure_detection.tex"):
        assert (run_dir / "tables" / name).exists(), name
    assert "could not build the cost section" not in text


def test_dominated_by_the_data_not_by_the_point_estimates():
    """det (cheap) against ens (costlier): overlapping own intervals decide nothing; on shared resamples
    the paired difference can still exclude 0 (a common case-level noise cancels); a costlier model is
    never said to dominate a cheaper one."""
    from values_seg.report.intervals import ROW, Distributions

    results = _results({("det", "pe"): 0.30, ("ens", "pe"): 0.20})  # AURC: lower is better
    costs = _costs({"det": 5e6, "ens": 1e6})  # here the ensemble is the cheaper one
    points = quality_points(results, costs, "failure_detection", "aurc", "lower").set_index("prediction_model")
    assert points["dominated_by"].to_dict() == {"det": "ens", "ens": ""}  # own intervals apart: 0.21 < 0.29
    results.loc[:, "ci_low"], results.loc[:, "ci_high"] = results["value"] - 0.2, results["value"] + 0.2
    points = quality_points(results, costs, "failure_detection", "aurc", "lower").set_index("prediction_model")
    assert points["dominated_by"].to_dict() == {"det": "", "ens": ""} and set(points["decided_by"]) == {"intervals", ""}
    noise = np.random.default_rng(0).normal(0, 0.2, 500)  # shared by both rows: paired, it cancels
    dist = Distributions(np.stack([0.30 + noise, 0.20 + noise + np.random.default_rng(1).normal(0, 0.01, 500)]))
    paired = results.assign(**{ROW: [0, 1]})
    points = quality_points(paired, costs, "failure_detection", "aurc", "lower", dist).set_index("prediction_model")
    assert points["dominated_by"].to_dict() == {"det": "ens", "ens": ""}
    assert points.loc["det", "decided_by"] == "paired bootstrap"
    points = quality_points(paired, _costs({"det": 1e6, "ens": 5e6}), "failure_detection", "aurc", "lower",
                            dist).set_index("prediction_model")
    assert points["dominated_by"].to_dict() == {"det": "", "ens": ""}  # better but costlier: no domination
