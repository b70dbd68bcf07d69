"""Separation study answers (Q1-Q4) for constructed cases."""

from __future__ import annotations

import copy

import pytest
from values_seg.report.spec import ReportSpec
from values_seg_plugins.report_sections._separation import measure_summary, separation_summary, separation_table
from values_seg_plugins.report_sections._separation import decide


def _answers(results, spec):
    return {(r.scenario.scenario, r.prediction_model): {q: a.answer for q, a in r.answers.items()}
            for r in separation_table(results, spec)}


def test_constructed_answers(spec, results_frame, expected_answers):
    assert _answers(results_frame, spec) == expected_answers


def test_same_answers_without_separation_rows(spec, results_frame, expected_answers):
    assert _answers(results_frame[results_frame["task"] != "separation"], spec) == expected_answers


def test_separation_rows_alone_answer_q4(spec, results_frame):
    base_au_auroc = (results_frame["metric"] == "auroc") & (results_frame["uncertainty_type"] == "AU")
    got = _answers(results_frame[~base_au_auroc], spec)
    assert got[("toy_3b", "test_time_dropout")]["Q4"] == "no"
    assert got[("toy_3b", "ssn")]["Q4"] == "partial"


def test_numbers_and_agreement(spec, results_frame):
    rows = {(r.scenario.scenario, r.prediction_model): r for r in separation_table(results_frame, spec)}
    q1 = rows[("toy_1", "test_time_dropout")].answers["Q1"]
    assert q1.agrees is True and q1.support == q1.total == 2
    assert q1.value_mean == pytest.approx(0.86 - 0.47, abs=0.03)
    assert "NCC AU 0.8" in q1.text() and "2/2" in q1.text()
    q3 = rows[("toy_3b", "ssn")].answers["Q3"]
    assert (q3.support, q3.total, q3.agrees, q3.mark) == (2, 4, None, "~")
    assert rows[("toy_1", "ssn")].answers["Q1"].agrees is False
    assert rows[("toy_1", "ssn")].answers["Q3"].text() == "–"


def test_summary_pools_models(spec, results_frame):
    summary = {r.scenario.scenario: r.answers for r in separation_summary(results_frame, spec)}
    assert summary["toy_3b"]["Q3"].answer == "partial" and summary["toy_3b"]["Q3"].total == 8
    assert summary["toy_1"]["Q3"].answer == "n/a"


def test_measure_summary(spec, results_frame):
    s = measure_summary(results_frame, spec)
    ncc = s[(s["scenario"] == "toy_1") & (s["metric"] == "ncc")]
    assert list(zip(ncc["measure"], ncc["uncertainty_type"])) == [
        ("predictive_entropy", "PU"), ("expected_entropy", "AU"), ("mutual_information", "AU"),
        ("expected_entropy", "EU"), ("mutual_information", "EU")]
    auroc = s[(s["scenario"] == "toy_3b") & (s["metric"] == "auroc")].set_index(["measure", "uncertainty_type"])
    assert auroc.loc[("mutual_information", "EU"), "mean"] == pytest.approx(0.875, abs=0.02)
    assert auroc.loc[("predictive_entropy", "PU"), "n"] == 4  # 2 models x 2 aggregations
    assert s[s["metric"] == "auroc"]["scenario"].unique().tolist() == ["toy_3b"]


def test_decide():
    assert decide([]) == "n/a" and decide([True, True]) == "yes"
    assert decide([False]) == "no" and decide([True, False]) == "partial"


def _renamed(spec, results, names: dict[str, str]):
    """The run as if its tasks were called ``names[old]`` (registry name and label alike)."""
    components = copy.deepcopy(spec.components)
    for entry in components["task"]:
        entry["label"] = entry["name"] = names.get(entry["name"], entry["name"])
    return ReportSpec(components), results.assign(task=results["task"].replace(names))


def _without_role(spec, role: str):
    """``spec`` with no metric declaring the separation ``role``."""
    components = copy.deepcopy(spec.components)
    for entry in components["task"]:
        for metric in entry["metrics"]:
            if metric.get("separation_role") == role:
                metric["separation_role"] = ""
    return ReportSpec(components)


def test_the_evidence_is_what_the_tasks_declare_not_their_names(spec, results_frame, expected_answers):
    names = {"ambiguity": "rater_agreement", "ood_detection": "shift_ranking", "separation": "pairs"}
    renamed_spec, renamed = _renamed(spec, results_frame, names)
    assert _answers(renamed, renamed_spec) == expected_answers
    s = measure_summary(renamed, renamed_spec)
    assert s["metric"].unique().tolist() == ["ncc", "auroc"] and s["label"].unique().tolist() == ["NCC", "AUROC"]


def test_no_declared_role_no_evidence(spec, results_frame):
    no_au = _without_role(_without_role(spec, "AU"), "AU-EU")
    answers = _answers(results_frame, no_au)
    assert {a["Q1"] for a in answers.values()} == {a["Q2"] for a in answers.values()} == {"n/a"}
    assert answers[("toy_3b", "test_time_dropout")]["Q3"] == "yes"  # the EU evidence still answers
    assert measure_summary(results_frame, no_au)["role"].unique().tolist() == ["EU"]


def test_the_difference_rows_are_read_by_their_role(spec, results_frame):
    """Q4 from the "EU-AU" rows alone (no "EU" rows of AU-measures) needs their declared role."""
    base_au_auroc = (results_frame["metric"] == "auroc") & (results_frame["uncertainty_type"] == "AU")
    got = _answers(results_frame[~base_au_auroc], _without_role(spec, "EU-AU"))
    assert got[("toy_3b", "test_time_dropout")]["Q4"] == "n/a"


def test_an_older_declaration_file_is_recognised(spec):
    assert not spec.predates("separation_role")
    components = copy.deepcopy(spec.components)
    for entry in components["task"]:
        for metric in entry["metrics"]:
            metric.pop("separation_role")
    old = ReportSpec(components)
    assert old.predates("separation_role") and old.separation_metrics("AU") == []


def _with_intervals(results, rows, half_width):
    out = results.copy()
    out.loc[rows, "ci_low"] = out.loc[rows, "value"] - half_width
    out.loc[rows, "ci_high"] = out.loc[rows, "value"] + half_width
    return out


def test_an_interval_across_the_boundary_leaves_the_unit_undecided(spec, results_frame):
    """Issue 31.7: a ✓/✗ only where the 95 % intervals lie on one side of the boundary."""
    sep = results_frame["task"] == "separation"
    ttd_3b = (results_frame["scenario"] == "toy_3b") & (results_frame["prediction_model"] == "test_time_dropout")
    # narrow intervals (±0.01) around Δ AUROC ≈ +0.3: still decided, the answers do not change
    narrow = _rows(_with_intervals(results_frame, sep, 0.01), spec)[("toy_3b", "test_time_dropout")]
    assert narrow.answers["Q4"].answer == "no" and narrow.answers["Q4"].mark == "✓"
    assert narrow.answers["Q4"].undecided == 0 and narrow.answers["Q4"].point_only == 0
    # one unit's interval reaches across 0: Q4 is undecided, no ✓
    one = sep & ttd_3b & (results_frame["seed"] == 0) & (results_frame["aggregation"] == "patch")
    wide = _with_intervals(_with_intervals(results_frame, sep, 0.01), one, 1.0)
    q4 = _rows(wide, spec)[("toy_3b", "test_time_dropout")].answers["Q4"]
    assert (q4.answer, q4.mark, q4.undecided, q4.total) == ("undecided", "?", 1, 4)
    assert "1/4 undecided" in q4.text()
    # Q1 (Δ NCC) on toy_1: every interval across 0
    q1 = _rows(_with_intervals(results_frame, sep, 2.0), spec)[("toy_1", "test_time_dropout")].answers["Q1"]
    assert (q1.answer, q1.support, q1.undecided) == ("undecided", 0, 2) and q1.agrees is None


def test_auroc_interval_across_one_half_leaves_q3_undecided(spec, results_frame):
    auroc = (results_frame["metric"] == "auroc") & (results_frame["scenario"] == "toy_3b")
    ttd = results_frame["prediction_model"] == "test_time_dropout"
    decided = _rows(_with_intervals(results_frame, auroc, 0.02), spec)
    assert decided[("toy_3b", "test_time_dropout")].answers["Q3"].answer == "yes"  # MI ≈ 0.85-0.90
    crossing = _rows(_with_intervals(results_frame, auroc & ttd, 0.45), spec)
    assert crossing[("toy_3b", "test_time_dropout")].answers["Q3"].answer == "undecided"


def test_units_without_an_interval_are_counted_as_point_decisions(spec, results_frame):
    q2 = _rows(results_frame, spec)[("toy_1", "test_time_dropout")].answers["Q2"]
    assert q2.point_only == q2.total == 2 and "2/2 by point estimate" in q2.text()


def test_decide_three_ways():
    assert decide([True, True], [True, False]) == "undecided"
    assert decide([True, False], [True, True]) == "partial"
    assert decide([True, False], [True, False]) == "undecided"  # the decided units agree
    assert decide([False, False], [True, True]) == "no" and decide([True], [True]) == "yes"


def _rows(results, spec):
    return {(r.scenario.scenario, r.prediction_model): r for r in separation_table(results, spec)}
