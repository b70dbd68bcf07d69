"""Separation study answers (Q1-Q4) for constructed cases."""

from __future__ import annotations

import copy

import numpy as np
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
    assert "NCC AU 0.8" in q1.text() and "2 AU better, 0 EU better, 0 undecided of 2" in q1.text()
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
    assert "3 EU better, 0 AU better, 1 undecided of 4" in q4.text()
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
    assert q2.point_only == q2.total == 2 and "; 2 by point estimate (no resamples)" in q2.text()


def test_decide_three_ways():
    assert decide([True, True], [True, False]) == "undecided"
    assert decide([True, False], [True, True]) == "partial"
    assert decide([True, False], [True, False]) == "undecided"  # the decided units agree
    assert decide([False, False], [True, True]) == "no" and decide([True], [True]) == "yes"


def _rows(results, spec):
    return {(r.scenario.scenario, r.prediction_model): r for r in separation_table(results, spec)}


def test_a_unit_on_a_row_the_data_cannot_support_is_not_decided(spec, results_frame):
    """Issue 31.11: one seed's AUROC difference rests on tied scores: Q4 is undecided, and says why."""
    sep = results_frame["task"] == "separation"
    one = sep & (results_frame["scenario"] == "toy_3b") & (results_frame["prediction_model"] == "test_time_dropout") \
        & (results_frame["seed"] == 0) & (results_frame["aggregation"] == "patch")
    marked = results_frame.assign(supported=~one, support_note=one.map({True: "all scores tied", False: ""}))
    q4 = _rows(marked, spec)[("toy_3b", "test_time_dropout")].answers["Q4"]
    assert (q4.answer, q4.mark, q4.undecided, q4.unsupported, q4.total) == ("undecided", "?", 1, 1, 4)
    assert "1/4 undecided ⚠ (a row the data cannot support)" in q4.text()
    assert "; 3 EU better, 0 AU better, 1 undecided of 4;" in q4.text()  # the undecided unit on neither side
    assert "interval across the boundary" not in q4.text()
    # derived from two rows (no AU-EU/EU-AU rows): an unsupported AUROC leaves its pair undecided too
    derived = marked[~sep].copy()
    auroc = (derived["metric"] == "auroc") & (derived["scenario"] == "toy_3b") & (derived["seed"] == 0) \
        & (derived["prediction_model"] == "test_time_dropout") & (derived["aggregation"] == "patch") \
        & (derived["measure"] == "expected_entropy")
    derived["supported"] = ~auroc
    q4 = _rows(derived, spec)[("toy_3b", "test_time_dropout")].answers["Q4"]
    assert (q4.answer, q4.unsupported, q4.point_only, q4.total) == ("undecided", 1, 3, 4)


def test_the_measure_summary_leaves_out_values_the_data_cannot_support(spec, results_frame):
    """Figure 2b averages evidence only: a tied-score AUROC of 0.5 is not averaged in."""
    at = (results_frame["metric"] == "auroc") & (results_frame["scenario"] == "toy_3b") \
        & (results_frame["measure"] == "predictive_entropy") & (results_frame["aggregation"] == "patch")
    kept = results_frame[(results_frame["metric"] == "auroc") & (results_frame["scenario"] == "toy_3b")
                         & (results_frame["measure"] == "predictive_entropy") & ~at]
    marked = results_frame.assign(supported=~at, value=results_frame["value"].where(~at, 0.5))
    pe = measure_summary(marked, spec).set_index(["scenario", "metric", "measure"]).loc[
        ("toy_3b", "auroc", "predictive_entropy")]
    means = kept.groupby(["prediction_model", "aggregation"])["value"].mean()
    assert pe["n"] == 2 and pe["mean"] == pytest.approx(means.mean())


def _one_model_with_resamples(results, spread):
    """toy_3b's test-time dropout, seed 0, without the separation task's rows: the NCC and AUROC rows
    with resamples ``value + shared + spread[measure] * own``: one resample effect shared by all
    measures (large: each row's own interval is wide) and a measure's own noise (``spread``)."""
    from values_seg.report.intervals import ROW, Distributions

    rows = results[(results["scenario"] == "toy_3b") & (results["prediction_model"] == "test_time_dropout")
                   & (results["seed"] == 0) & (results["task"] != "separation")
                   & (((results["metric"] == "ncc") & (results["split"] == "iid")) | (results["metric"] == "auroc"))]
    rows = rows.reset_index(drop=True)
    rng = np.random.default_rng(3)
    shared, own = rng.normal(0, 0.3, 400), rng.normal(0, 1, (len(rows), 400))
    samples = rows["value"].to_numpy()[:, None] + shared + np.array([spread[m] for m in rows["measure"]])[:, None] * own
    rows[ROW] = np.arange(len(rows))
    rows["ci_low"], rows["ci_high"] = np.percentile(samples, [2.5, 97.5], axis=1)
    return rows, Distributions(samples)


def test_derived_differences_are_decided_by_their_paired_intervals(spec, results_frame):
    """Without the separation task's rows, Q2 and Q4 are differences of rows: each unit is decided by
    the paired interval of the difference on the stored resamples, not by its point estimate."""
    tight = {"predictive_entropy": 0.002, "expected_entropy": 0.002, "mutual_information": 0.002}
    rows, dist = _one_model_with_resamples(results_frame, tight)
    (point,) = separation_table(rows, spec)
    assert (point.answers["Q4"].point_only, point.answers["Q2"].point_only) == (2, 1)  # without the resamples
    (paired,) = separation_table(rows, spec, dist)
    q2, q4 = paired.answers["Q2"], paired.answers["Q4"]
    assert (q4.answer, q4.point_only, q4.undecided) == ("no", 0, 0)  # EU − AU ≈ +0.3, paired: tight
    assert (q2.answer, q2.point_only, q2.undecided) == ("no", 0, 0)  # EU 0.47 below min(PU 0.80, AU 0.86)
    assert "2 EU better, 0 AU better, 0 undecided of 2" in q4.text() and "by point estimate" not in q4.text()


def test_a_paired_interval_across_zero_leaves_a_point_decision_undecided(spec, results_frame):
    """Each measure's own noise large (the paired difference ± ~0.6): the point estimates decide every
    unit, the paired intervals none."""
    loose = {"predictive_entropy": 0.3, "expected_entropy": 0.3, "mutual_information": 0.3}
    rows, dist = _one_model_with_resamples(results_frame, loose)
    (point,) = separation_table(rows, spec)
    assert point.answers["Q4"].answer == point.answers["Q2"].answer == "no"
    (paired,) = separation_table(rows, spec, dist)
    q2, q4 = paired.answers["Q2"], paired.answers["Q4"]
    assert (q4.answer, q4.undecided, q4.total) == ("undecided", 2, 2) and q4.mark == "?"
    assert (q2.answer, q2.undecided, q2.total) == ("undecided", 1, 1)
    assert q4.counts() == "0 EU better, 0 AU better, 2 undecided of 2"


def test_q2_takes_the_lower_of_pu_and_au_resample_by_resample(spec, results_frame):
    from values_seg_plugins.report_sections._separation import _paired_interval
    from values_seg.report.intervals import Distributions

    dist = Distributions(np.array([[0.5, 0.5, 0.5], [0.6, 0.4, 0.9], [0.7, 0.8, 0.3]]))
    # per resample: 0.5 − min(0.6, 0.7) = −0.1, 0.5 − min(0.4, 0.8) = 0.1, 0.5 − min(0.9, 0.3) = 0.2
    low, high = _paired_interval(dist, 0, [1, 2])
    assert low == pytest.approx(np.percentile([-0.1, 0.1, 0.2], 2.5))
    assert high == pytest.approx(np.percentile([-0.1, 0.1, 0.2], 97.5))
    assert all(np.isnan(_paired_interval(None, 0, [1]))) and all(np.isnan(_paired_interval(dist, 0, [-1])))
