"""The report's opening recommendation: best method per task, by hand-made results."""

import math

import numpy as np
import pandas as pd
import pytest

from values_seg import registry
from values_seg.report import build_report
from values_seg.report.recommendation import recommendation_section, recommendations
from values_seg.report.rundir import normalise_results
from values_seg.report.spec import ReportSpec

CONTEXT = {"dataset": "nnunet_raw", "scenario": "liver", "backbone": "unet", "family": "bayesian"}
TYPES = {"predictive_entropy": "PU", "mutual_information": "EU", "expected_entropy": "AU"}


def rows(task, metric, split, values, model="nnunet"):
    """``values``: {(measure, aggregation): [value per seed]}."""
    out = []
    for (measure, aggregation), per_seed in values.items():
        for seed, value in enumerate(per_seed):
            out.append({**CONTEXT, "seed": seed, "prediction_model": model, "measure": measure,
                        "uncertainty_type": TYPES.get(measure), "aggregation": aggregation, "task": task,
                        "metric": metric, "split": split, "value": value})
    return out


def table(*groups):
    return normalise_results(pd.DataFrame([r for g in groups for r in g]))


def _entries(kind, names):
    return [{"label": n, "name": n, "display": registry.get(kind, n).label} for n in names]


TASKS = ("segmentation", "ood_detection", "failure_detection", "calibration", "ambiguity", "separation")
#: what components.json would hold for these results (the built-ins' own declarations)
SPEC = ReportSpec({
    "task": [{**e, **registry.get("task", e["name"]).obj.declaration()} for e in _entries("task", TASKS)],
    "prediction_model": _entries("prediction_model", ["nnunet"]),
    "measure": _entries("measure", ["predictive_entropy", "expected_entropy", "mutual_information"]),
    "aggregation": _entries("aggregation", ["patch", "threshold"]),
})


def test_best_and_runner_up_per_task_in_the_metric_direction():
    results = table(
        rows("ood_detection", "auroc", "all", {("predictive_entropy", "patch"): [0.70, 0.74],   # mean 0.72
                                               ("mutual_information", "patch"): [0.80, 0.90],   # mean 0.85: best
                                               ("mutual_information", "threshold"): [0.84, 0.84]}),
        rows("failure_detection", "aurc", "iid", {("predictive_entropy", "patch"): [0.20, 0.30],  # 0.25: best (lower)
                                                  ("mutual_information", "patch"): [0.26, 0.28]}),
        rows("calibration", "ace", "iid", {("predictive_entropy", None): [0.10, 0.10],
                                           ("mutual_information", None): [0.05, 0.07]}),
        rows("segmentation", "dice", "iid", {(None, None): [0.81, 0.83]}),
        rows("separation", "auroc_eu_minus_au", "all", {("expected_entropy", "patch"): [0.1, 0.2]}),
    )
    recs = {(r.criterion.metric.task, r.criterion.split): r for r in recommendations(results, SPEC)}
    assert set(recs) == {("ood_detection", "all"), ("failure_detection", "iid"), ("calibration", "iid"),
                         ("segmentation", "iid")}
    ood = recs[("ood_detection", "all")]
    assert (ood.best.method["measure"], ood.best.method["aggregation"]) == ("mutual_information", "patch")
    assert ood.best.mean == pytest.approx(0.85) and ood.best.std == pytest.approx(math.sqrt(0.005)) and ood.best.n == 2
    assert (ood.runner_up.method["aggregation"], ood.runner_up.mean) == ("threshold", pytest.approx(0.84))
    fd = recs[("failure_detection", "iid")]
    assert fd.best.method["measure"] == "predictive_entropy" and fd.best.mean == pytest.approx(0.25)
    assert recs[("calibration", "iid")].best.method["measure"] == "mutual_information"
    assert recs[("segmentation", "iid")].best.mean == pytest.approx(0.82) and recs[("segmentation", "iid")].runner_up is None

    heading, note, markdown = recommendation_section(results, SPEC)
    assert heading == "## Recommendation" and "No confidence intervals" in note
    lines = markdown.splitlines()
    assert lines[0] == "| Task | Best method | Metric | Value | Runner-up | Picked from |"
    assert ("| OoD-D | nnU-Net · MI (EU) · Patch | AUROC ↑ | 85.00 ± 7.07 | nnU-Net · MI (EU) · Thresh: 84.00 ± 0.00 "
            "| 3 methods |") in lines
    assert "| Failure Detection (i.i.d.) | nnU-Net · PE (PU) · Patch | AURC ↓ | 25.00 ± 7.07 |" in markdown
    assert "| Seg. Performance (i.i.d.) | nnU-Net | Dice ↑ | 82.00 ± 1.41 | – | 1 method |" in lines


def test_a_tie_across_every_method_names_no_winner():
    """Issue 31 item 3: a metric equal for every method (e.g. conformal set sizes all 1.000) decides nothing; the
    row says so instead of naming whichever method the canonical order lists first."""
    results = table(rows("ood_detection", "auroc", "all", {("mutual_information", "patch"): [0.8],
                                                           ("predictive_entropy", "threshold"): [0.8],
                                                           ("predictive_entropy", "patch"): [0.8]}))
    rec = recommendations(results, SPEC)[0]
    assert rec.no_winner and len(rec.tied) == 3 and rec.candidates == 3
    _, note, markdown = recommendation_section(results, SPEC)
    assert "| OoD-D | no winner: all 3 methods tie | AUROC ↑ | 80.00 | – | 3 methods |" in markdown
    assert "PE (PU) · Patch" not in markdown and "A tie goes to" not in note


def test_a_tie_at_the_top_names_the_tied_methods_not_one_winner():
    results = table(rows("ood_detection", "auroc", "all", {("mutual_information", "patch"): [0.8],
                                                           ("predictive_entropy", "threshold"): [0.7],
                                                           ("predictive_entropy", "patch"): [0.8]}))
    rec = recommendations(results, SPEC)[0]
    assert not rec.no_winner and [c.method["measure"] for c in rec.tied] == ["predictive_entropy", "mutual_information"]
    assert ("| OoD-D | no winner: 2 methods tie (nnU-Net · PE (PU) · Patch, nnU-Net · MI (EU) · Patch) | AUROC ↑ "
            "| 80.00 | – | 3 methods |") in recommendation_section(results, SPEC)[2]


def test_the_winners_curse_is_said_with_the_number_of_methods_compared():
    """Issue 31 item 9: the best of many methods, picked and scored on the same test cases, has an optimistic value."""
    results = pd.DataFrame(rows("ood_detection", "auroc", "all", {("mutual_information", "patch"): [0.85],
                                                                  ("predictive_entropy", "patch"): [0.80],
                                                                  ("expected_entropy", "patch"): [0.60]}))
    results["ci_low"], results["ci_high"] = [0.78, 0.70, 0.50], [0.92, 0.88, 0.70]
    _, note, markdown = recommendation_section(normalise_results(results), SPEC)
    assert "| nnU-Net · PE (PU) · Patch: 80.00 | 3 methods |" in markdown
    assert "selected winner: optimistic" in note and "winner's curse" in note and "same test cases" in note


def test_a_value_the_data_cannot_support_is_never_recommended():
    """Issue 31 item 11: a measure with constant scores has OoD AUROC 0.5 (every score tied); it is marked unsupported
    where the rows are scored and the recommendation passes over it, saying why."""
    results = pd.DataFrame(rows("ood_detection", "auroc", "all", {("predictive_entropy", "patch"): [0.5],  # constant
                                                                  ("mutual_information", "patch"): [0.45],
                                                                  ("expected_entropy", "patch"): [0.40]}))
    results["supported"] = [False, True, True]
    results["support_note"] = ["all scores tied: the uncertainty ranks no case above another", "", ""]
    rec = recommendations(normalise_results(results), SPEC)[0]
    assert rec.best.method["measure"] == "mutual_information" and rec.candidates == 2
    assert [m["measure"] for m, _ in rec.unsupported] == ["predictive_entropy"]
    _, note, markdown = recommendation_section(normalise_results(results), SPEC)
    assert "| OoD-D | nnU-Net · MI (EU) · Patch; 1 left out ⚠ | AUROC ↑ | 45.00 |" in markdown
    assert "1 × all scores tied: the uncertainty ranks no case above another" in note
    # nothing supported: no method is named
    results["supported"] = False
    results["support_note"] = "1 i.i.d. and 1 OoD test case(s) in split all; the metric needs at least 3 of each"
    _, _, markdown = recommendation_section(normalise_results(results), SPEC)
    assert "| OoD-D | no supported result; 3 left out ⚠ | AUROC ↑ | – | – | 0 methods |" in markdown


def test_intervals_are_shown_where_the_results_carry_them():
    results = pd.DataFrame(rows("ood_detection", "auroc", "all", {("mutual_information", "patch"): [0.85],
                                                                  ("predictive_entropy", "patch"): [0.80],
                                                                  ("expected_entropy", "patch"): [0.60]}))
    results["ci_low"] = [0.78, 0.70, 0.50]
    results["ci_high"] = [0.92, 0.88, 0.70]
    rec = recommendations(normalise_results(results), SPEC)[0]
    assert rec.best.has_interval and (rec.best.ci_low, rec.best.ci_high) == (0.78, 0.92)
    _, note, markdown = recommendation_section(normalise_results(results), SPEC)
    assert "Brackets: the best method's confidence interval" in note
    # no stored distributions: no paired test, so the runner-up is not judged (the best's interval is no test)
    assert "| 85.00 [78.00, 92.00] | nnU-Net · PE (PU) · Patch: 80.00 |" in markdown and "Runner-up:" not in note


def test_several_scenarios_get_a_column_and_nothing_without_task_metrics():
    a = rows("ood_detection", "auroc", "all", {("mutual_information", "patch"): [0.9]})
    b = [{**r, "scenario": "spleen"} for r in rows("ood_detection", "auroc", "all",
                                                   {("predictive_entropy", "patch"): [0.7]})]
    _, _, markdown = recommendation_section(table(a, b), SPEC)
    assert markdown.splitlines()[0] == "| Task | Scenario | Best method | Metric | Value | Runner-up | Picked from |"
    assert "| OoD-D | spleen | nnU-Net · PE (PU) · Patch | AUROC ↑ | 70.00 | – | 1 method |" in markdown
    assert recommendation_section(table(rows("separation", "ncc_au_minus_eu", "iid", {("expected_entropy", None): [0.1]})), SPEC) == []
    assert recommendation_section(pd.DataFrame(), SPEC) == []


def test_the_report_opens_with_the_recommendation(tmp_path):
    import json

    from values_seg.storage import run_directory

    run_directory.claim(tmp_path, "run")
    results = table(rows("ood_detection", "auroc", "all", {("mutual_information", "patch"): [0.9, 0.8]}))
    results.to_csv(tmp_path / "results.csv", index=False)
    (tmp_path / "components.json").write_text(json.dumps({"version": 1, "components": SPEC.components}))
    text = build_report(tmp_path).read_text()
    sections = [line for line in text.splitlines() if line.startswith("## ")]
    assert sections[:2] == ["## Recommendation", "## Run summary"]
    assert "nnU-Net · MI (EU) · Patch | AUROC ↑ | 85.00 ± 7.07" in text


def test_runner_up_is_judged_by_the_paired_test(tmp_path):
    """AURC i.i.d.: the runner-up (0.21) lies inside the best's (0.20) wide interval, but both move together over the
    case resamples, so the paired test separates them; AURC OoD: 0.300 vs 0.301 with independent noise does not."""
    from .conftest import write_stats_run
    from .test_intervals import rows as stats_rows
    from values_seg.report import load_run

    B = 400
    rng = np.random.default_rng(2)
    case = rng.normal(0, 0.05, B)
    values = {("iid", "mutual_information"): 0.20, ("iid", "predictive_entropy"): 0.21,
              ("ood", "mutual_information"): 0.300, ("ood", "predictive_entropy"): 0.301}
    samples = np.stack([v + case + rng.normal(0, 0.002 if split == "iid" else 0.03, B)
                        for (split, _), v in values.items()])
    low, high = np.percentile(samples, [2.5, 97.5], axis=1)
    res = pd.DataFrame([r for k, ((split, measure), v) in enumerate(values.items())
                        for r in stats_rows([v], measure=measure, split=split, ci=[(low[k], high[k])])])
    run = load_run(write_stats_run(tmp_path / "run", res, samples, tasks=("failure_detection",)))
    assert low[0] < 0.21 < high[0]  # the old rule ("inside the best's interval") would call it not clearly worse
    text = " ".join(build_report(run.run_dir).read_text().split())  # report.md wraps at 100 columns
    assert "PE (PU) · Patch: 21.00 (worse: p = " in text and "PE (PU) · Patch: 30.10 (not clearly worse: p = " in text
    recs = {r.criterion.split: r for r in recommendations(run.results, run.spec, run.distributions)}
    stored = samples.astype(np.float32).astype(np.float64)
    p = []
    for d in (stored[0] - stored[1], stored[2] - stored[3]):  # best - runner-up, resample by resample
        p.append(min(1.0, 2 * (1 + min((d <= 0).sum(), (d >= 0).sum())) / (B + 1)))
    assert [recs["iid"].p_value, recs["ood"].p_value] == pytest.approx(p)
    holm = np.maximum.accumulate(np.sort(p) * np.array([2, 1]))  # two rows: one family, Holm
    assert sorted([recs["iid"].p_adjusted, recs["ood"].p_adjusted]) == pytest.approx(list(np.minimum(holm, 1)))
    assert {r.correction for r in recs.values()} == {"holm"}
    assert f"PE (PU) · Patch: 21.00 (worse: p = {recs['iid'].p_adjusted:.3f})" in text
    assert recs["iid"].p_adjusted < 0.05
    assert f"PE (PU) · Patch: 30.10 (not clearly worse: p = {recs['ood'].p_adjusted:.3f})" in text
    assert "p adjusted over this table's 2 rows by Holm (family-wise error rate)" in text


def test_calibration_is_picked_by_the_merged_ace_and_says_where_eq11_differs():
    results = table(
        rows("calibration", "ace", "iid", {("predictive_entropy", None): [0.10], ("mutual_information", None): [0.05]}),
        rows("calibration", "ace_eq11", "iid", {("predictive_entropy", None): [0.20],
                                                ("mutual_information", None): [0.30]}),
        rows("calibration", "ace", "ood", {("predictive_entropy", None): [0.10], ("mutual_information", None): [0.05]}),
        rows("calibration", "ace_eq11", "ood", {("predictive_entropy", None): [0.20],
                                                ("mutual_information", None): [0.10]}),
    )
    _, note, markdown = recommendation_section(results, SPEC)
    assert "| Calibration (i.i.d.) | nnU-Net · MI (EU) | ACE (merged bins) ↓ |" in markdown
    assert ("Calibration is picked by ACE (merged bins), the task's primary metric, not by ACE (paper eq. 11)"
            in note)
    assert ("by ACE (paper eq. 11) the best method differs in 1 of 2 rows (liver (Calibration (i.i.d.)): "
            "nnU-Net · PE (PU))") in note


def test_rows_of_a_calibrated_guarantee_say_they_are_conditional_on_the_cases_it_was_fitted_on():
    """A conformal set size is scored with each method's threshold calibrated on the validation
    split and then held fixed: its rows say so; a task without such a metric says nothing."""
    spec = ReportSpec({**SPEC.components, "task": SPEC.components["task"] + [
        {**e, **registry.get("task", e["name"]).obj.declaration()} for e in _entries("task", ["conformal"])]})
    conformal = rows("conformal", "set_size", "iid", {("predictive_entropy", None): [0.30],
                                                      ("mutual_information", None): [0.20]})
    _, note, _ = recommendation_section(table(conformal), spec)
    assert ("The Conformal (i.i.d.) rows hold each method's threshold, calibrated on the validation split, fixed: "
            "their values, intervals and comparisons are conditional on the one draw of the cases it was fitted on") in note
    calibration = rows("calibration", "ace", "iid", {("predictive_entropy", None): [0.1], ("mutual_information", None): [0.2]})
    assert "fitted on" not in recommendation_section(table(calibration), spec)[1]
