"""The conformal task end to end on tiny toy data: the validation cases evaluated as records (quantity
``conformal_sets``, split "val"), its rows, curves, report section and figure."""

import pandas as pd
import pytest

from values_seg.config import load_config
from values_seg.runner import run_experiment

TINY = {
    "name": "tiny_conformal",
    "datasets": [{"name": "toy", "label": "toy_2", "params": {"scenario": "2", "dims": 2, "size": 32,
                                                               "train_cases": 8, "val_cases": 10}}],
    "backbones": [{"name": "unet", "params": {"base_width": 4}}],
    "recipe": {"epochs": 1},
    "prediction_models": ["deterministic"],
    "measures": ["predictive_entropy", "max_softmax"],
    "aggregations": [{"name": "patch", "params": {"size": 5}}, "threshold"],
    "tasks": ["failure_detection", {"name": "conformal", "params": {"resplits": 20}}],
    "statistics": {"n_resamples": 50},
}


@pytest.mark.slow
def test_conformal_run_end_to_end(tmp_path):
    summary = run_experiment(load_config(base={**TINY, "cache_dir": str(tmp_path / "cache")}), tmp_path / "run",
                             progress=False)
    assert summary.ok, summary.describe()
    # without an aggregation that is fitted, the validation cases are scored in the fit's pass itself;
    # with one, from the maps it kept once fitted: the same scores either way
    patch_only = {**TINY, "aggregations": [{"name": "patch", "params": {"size": 5}}], "cache_dir": str(tmp_path / "cache")}
    assert run_experiment(load_config(base=patch_only), tmp_path / "patch", progress=False).ok
    val = {name: pd.read_csv(tmp_path / name / "cases.csv").query("split == 'val' and aggregation == 'patch'")
           .set_index(["case_id", "measure"])["score"].sort_index() for name in ("run", "patch")}
    assert len(val["run"]) == 20 and val["run"].equals(val["patch"])
    tmp_path = tmp_path / "run"
    results = pd.read_csv(tmp_path / "results.csv")
    conformal = results[results["task"] == "conformal"]
    for metric, split in (("set_size", "iid"), ("fnr", "ood"), ("fnr_probability", "iid"), ("coverage", "iid"),
                          ("resplit_fnr", "iid")):
        assert ((conformal["metric"] == metric) & (conformal["split"] == split)).any(), (metric, split)
    assert conformal[conformal["metric"] == "fnr"]["ci_low"].notna().all()  # bootstrap intervals
    cases = pd.read_csv(tmp_path / "cases.csv")
    assert (cases["split"] == "val").sum() > 0 and cases[cases["split"] == "val"]["score"].notna().all()
    # the other tasks read the test cases only: failure detection's rows are those of a run without the task
    curves = pd.read_parquet(tmp_path / "curves.parquet")
    assert (curves["curve"] == "crc_risk").any()
    report = (tmp_path / "report.md").read_text()
    assert "## Guarantees: conformal risk control" in report and "figures/conformal_toy_2.png" in report
    assert (tmp_path / "figures" / "conformal_toy_2.png").stat().st_size > 10_000
