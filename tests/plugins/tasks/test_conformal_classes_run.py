"""The conformal task's per-class guarantees and several risks at once end to end on tiny toy data:
curves ``crc_class``, ``ltt_grid`` and ``crc_bins`` written, rows ``multi_fnr``/``multi_fdr``, the section's tables."""

import pandas as pd
import pytest

from values_seg.config.loading import load_config
from values_seg.runner import run_experiment

from tiny import tiny_config, toy

TINY = tiny_config(name="tiny_conformal_classes", datasets=[toy("2", val_cases=10)],
                   measures=["predictive_entropy"], aggregations=["threshold"],
                   tasks=[{"name": "conformal", "params": {"resplits": 0, "per_class": True, "multi_risk": True,
                                                          "multi_fnr": 0.9, "multi_fdr": 0.9, "multi_grid": 9,
                                                          "score_bins": 2}}],
                   statistics={"n_resamples": 50})


@pytest.mark.slow
def test_per_class_and_multi_risk_run_end_to_end(tmp_path):
    summary = run_experiment(load_config(base={**TINY, "cache_dir": str(tmp_path / "cache")}), tmp_path / "run",
                             progress=False)
    assert summary.ok, summary.describe()
    run = tmp_path / "run"
    curves = pd.read_parquet(run / "curves.parquet")
    classes = curves[curves["curve"] == "crc_class"]
    assert set(classes["class_index"].astype(int)) == {1} and set(classes["split"]) == {"iid", "ood"}
    grid = curves[curves["curve"] == "ltt_grid"]
    chosen = int(grid["chosen"].astype(bool).sum())
    assert len(grid) == 9 and chosen == int(grid["valid"].astype(bool).any())
    results = pd.read_csv(run / "results.csv")
    multi = results[results["metric"].isin(["multi_fnr", "multi_fdr"])]
    assert len(multi) == 4 * chosen and multi["ci_low"].notna().all()  # rows only at a valid threshold
    report = (run / "report.md").read_text()
    assert "Per-class guarantees (Mondrian by class" in report and "Several risks at once" in report
    assert "could not build" not in report.lower()
    assert ("| none valid |" in report.split("Several risks at once")[1].split("Risk-controlled")[0]) == (not chosen)
    assert (run / "tables" / "conformal_classes_toy_2.csv").exists()
    bins = curves[curves["curve"] == "crc_bins"]
    assert set(bins["bin"].astype(int)) == {0, 1} and set(bins["aggregation"]) == {"threshold"}
    assert "Thresholds per bin of the image score" in report
