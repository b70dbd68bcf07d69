"""The conformal task end to end on tiny toy data: the validation cases evaluated as records (quantity
``conformal_sets``, split "val"), its rows, curves, report section and figure."""

import pandas as pd
import pytest

from values_seg.config.loading import load_config
from values_seg.runner import run_experiment

from tiny import tiny_config, toy

TINY = tiny_config(name="tiny_conformal", datasets=[toy("2", val_cases=10)],
                   measures=["predictive_entropy", "max_softmax"],
                   aggregations=[{"name": "patch", "params": {"size": 5}}, "threshold"],
                   tasks=["failure_detection", {"name": "conformal", "params": {"resplits": 20}}],
                   statistics={"n_resamples": 50})


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
    assert "could not build" not in report.lower()  # every table of the section built
    assert (tmp_path / "figures" / "conformal_toy_2.png").stat().st_size > 10_000


@pytest.mark.slow
def test_guarantees_claim_only_what_holds(tmp_path):
    """Toy 3a (a sharp i.i.d. test split, a half-blurred validation split): no re-split check of its
    i.i.d. cases and a † on their FNR; ``learned_risk`` (fitted on the validation risks): no in-sample
    validation score, no selection certificate, and the report says why."""
    config = {**TINY, "name": "tiny_guarantees",
              "datasets": [toy("3a", val_cases=10)],
              "aggregations": [{"name": "patch", "params": {"size": 5}}, {"name": "learned_risk",
                                                                          "params": {"min_cases": 5}}],
              "tasks": ["failure_detection", {"name": "conformal", "params": {"resplits": 20, "max_risk": 0.5}}],
              "cache_dir": str(tmp_path / "cache")}
    summary = run_experiment(load_config(base=config), tmp_path / "run", progress=False)
    assert summary.ok, summary.describe()
    results = pd.read_csv(tmp_path / "run" / "results.csv")
    conformal = results[results["task"] == "conformal"]
    assert not conformal["metric"].str.startswith("resplit").any()
    assert ((conformal["metric"] == "fnr") & (conformal["split"] == "iid")).any()
    assert (conformal.loc[conformal["metric"] == "coverage", "aggregation"] == "patch").all()
    assert ((results["task"] == "failure_detection") & (results["aggregation"] == "learned_risk")).any()
    cases = pd.read_csv(tmp_path / "run" / "cases.csv")
    val = cases[cases["split"] == "val"]
    assert (val["aggregation"] == "patch").any() and not (val["aggregation"] == "learned_risk").any()
    test = cases[(cases["split"] == "test") & ~cases["ood"]]
    assert not test["exchangeable"].astype(bool).any() and val["exchangeable"].astype(bool).all()
    curves = pd.read_parquet(tmp_path / "run" / "curves.parquet")
    assert not curves.loc[(curves["curve"] == "crc_risk") & (curves["split"] == "iid"), "exchangeable"].any()
    report = " ".join((tmp_path / "run" / "report.md").read_text().split())  # report.md wraps at 100 columns
    assert "† No guarantee covers the i.i.d. FNR of toy_3a" in report
    assert "No selection certificate for Learned risk" in report
