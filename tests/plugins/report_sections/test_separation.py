"""Separation study answers (Q1-Q4) for constructed cases."""

from __future__ import annotations

import pytest
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
