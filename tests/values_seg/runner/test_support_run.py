"""Degenerate data end to end (issue 31, items 11 and 12): a run on crafted data (degenerate_plugin.py: a constant
measure, a model that misses every object alike, a task that returns NaN, test sets of 1 + 1 and of 8 + 0 cases)
marks what the data cannot support in results.csv, in the report's tables and in report.html, never recommends it,
and says which declared metrics have no value, in the run summary and in the report."""

import re
from pathlib import Path

import numpy as np

import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from values_seg.config.loading import load_config
from values_seg.runner import run_experiment

HERE = Path(__file__).parent
FEW = {
    "name": "degenerate",
    "plugins": ["degenerate_plugin"],
    "datasets": [
        {"name": "toy_few", "label": "pair", "params": {"scenario": "2", "test_iid": 1, "test_ood": 1}},
        {"name": "toy_few", "label": "no_ood", "params": {"scenario": "1", "test_iid": 8, "test_ood": 0}},
        {"name": "toy_few", "label": "twelve", "params": {"scenario": "2", "test_iid": 6, "test_ood": 6}},
    ],
    "backbones": [{"name": "unet", "params": {"base_width": 4}}],
    "recipe": {"epochs": 1},
    "prediction_models": ["deterministic", "all_background"],
    "measures": ["predictive_entropy", "constant_measure"],
    "aggregations": [{"name": "patch", "params": {"size": 5}}],
    "tasks": ["ood_detection", "failure_detection", "nan_task"],
}


@pytest.fixture(scope="module")
def degenerate_run(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(HERE))
    run_dir = tmp_path_factory.mktemp("degenerate")
    summary = run_experiment(load_config(base=FEW), run_dir, progress=False)
    yield run_dir, summary
    mp.undo()


def rows(results, scenario, model, measure, metric, split):
    out = results[(results["scenario"] == scenario) & (results["prediction_model"] == model)
                  & (results["measure"] == measure) & (results["metric"] == metric) & (results["split"] == split)]
    assert len(out) == 1, (scenario, model, measure, metric, split)
    return out.iloc[0]


def test_the_three_degenerate_cases_are_marked_in_results_csv(degenerate_run):
    run_dir, summary = degenerate_run
    assert summary.ok, summary.describe()
    results = pd.read_csv(run_dir / "results.csv")
    cases = pd.read_csv(run_dir / "cases.csv")
    # constant scores: AUROC 0.5 with a zero-width interval
    tied = rows(results, "twelve", "deterministic", "constant_measure", "auroc", "all")
    c = cases[(cases["scenario"] == "twelve") & (cases["prediction_model"] == "deterministic")
              & (cases["measure"] == "constant_measure") & (cases["split"] == "test")]
    assert tied["value"] == pytest.approx(roc_auc_score(c["ood"], c["score"])) == 0.5
    assert (tied["ci_low"], tied["ci_high"]) == (0.5, 0.5)
    assert not tied["supported"] and tied["support_note"] == "all scores tied: the uncertainty ranks no case above another"
    # one i.i.d. and one OoD case: AUROC 0 or 1 with a zero-width interval
    pair = rows(results, "pair", "deterministic", "predictive_entropy", "auroc", "all")
    assert pair["value"] in (0.0, 1.0) and pair["ci_low"] == pair["ci_high"] == pair["value"]
    assert pair["support_note"] == "1 i.i.d. and 1 OoD test case(s) in split all; the metric needs at least 3 of each"
    # every case fails alike (the model misses every object): E-AURC 0 [0, 0] for every measure
    fails = results[(results["scenario"] == "no_ood") & (results["prediction_model"] == "all_background")
                    & (results["metric"] == "eaurc")]
    assert len(fails) == 2 and (fails["value"].abs() < 1e-12).all() and (fails["ci_low"] == fails["ci_high"]).all()
    assert not fails["supported"].any()
    dice = cases[(cases["scenario"] == "no_ood") & (cases["prediction_model"] == "all_background")]["dice"]
    assert dice.nunique() == 1  # the reason is real
    pe = rows(results, "no_ood", "all_background", "predictive_entropy", "eaurc", "iid")
    assert pe["support_note"] in ("every case has the same dice: nothing to rank",
                                  "all scores tied: the uncertainty ranks no case above another")
    # a supported row: enough cases, scores and risks that vary
    good = rows(results, "twelve", "deterministic", "predictive_entropy", "auroc", "all")
    assert good["supported"] and pd.isna(good["support_note"])


def test_the_report_marks_them_in_every_table_and_never_recommends_them(degenerate_run):
    run_dir, _ = degenerate_run
    report = (run_dir / "report.md").read_text()
    recommendation = " ".join(report.split("## Recommendation", 1)[1].split("\n## ", 1)[0].split())  # wrapped
    assert "- **OoD-D · pair · no supported result; 4 left out ⚠ · AUROC ↑**: Value: –;" in recommendation
    twelve = re.search(r"- \*\*OoD-D · twelve · (.*?) · AUROC ↑\*\*", recommendation).group(1)  # the best method
    assert "Const" not in twelve and "all_background" not in twelve
    downstream = report.split("## Downstream tasks", 1)[1].split("\n## ", 1)[0]
    assert "| Determ. | Const | PU | Patch | 50.00 [50.00, 50.00] ⚠ |" in downstream
    assert "⚠ not supported by the data" in downstream and "all scores tied" in downstream
    summary = pd.read_csv(run_dir / "tables" / "summary.csv")
    const = summary[(summary["measure"] == "constant_measure") & (summary["metric"] == "auroc")]
    assert len(const) and not const["supported"].any()
    assert "\\dagger" in (run_dir / "tables" / "downstream_twelve.tex").read_text()
    page = (run_dir / "report.html").read_text()
    assert ";⚠;" in page and "all scores tied: the uncertainty ranks no case above another" in page


def test_silent_gaps_are_said_in_the_run_summary_and_the_section(degenerate_run):
    run_dir, summary = degenerate_run
    said = summary.describe()
    assert "No value in 6 of 6 evaluation(s), the task returned NaN on all its 2 row(s): nan_task mean_score (all)" in said
    assert ("No value in 2 of 6 evaluation(s), no rows: 8 i.i.d. and 0 OoD test case(s) in split all; the metric needs at "
            "least 3 of each: ood_detection auroc, auprc, fpr_at_95_tpr (all)") in said
    assert ("No value in 2 of 6 evaluation(s), no rows: no test case in split ood: failure_detection aurc, eaurc, augrc, "
            "eaugrc (ood)") in said
    report = (run_dir / "report.md").read_text()
    no_ood = " ".join(re.split(r"\n(?!  )", report.split("- **no_ood**: ", 1)[1], maxsplit=1)[0].split())  # wrapped item
    assert "Not shown: the task returned NaN on all 4 rows: NaN task Mean score ↑." in no_ood
    assert ("Not shown: no rows, 8 i.i.d. and 0 OoD test case(s) where the metric needs at least 3 of each: OoD-D "
            "AUROC ↑.") in no_ood
    assert "Not shown: no rows, no OoD test case: Failure Detection AURC OoD ↓, " in no_ood
    results = pd.read_csv(run_dir / "results.csv")
    nan = results[results["task"] == "nan_task"]
    assert len(nan) == 12 and nan["value"].isna().all() and not nan["supported"].any()
    # a rerun that reuses the tables says the same
    again = run_experiment(load_config(base=FEW), run_dir, progress=False)
    assert again.tables_reused and again.gaps == summary.gaps and again.unsupported == summary.unsupported
    assert np.isfinite(summary.unsupported) and summary.unsupported > 0
