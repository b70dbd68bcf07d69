"""The downstream table (paper Tables 5-6) against values computed by hand from the results."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from values_seg.report import downstream_tables, latex
from values_seg.report.rundir import normalise_results
from values_seg.report.tables import downstream_table


def _table(results, scenario, spec):
    return next(t for t in downstream_tables(results, spec) if t.scenario.scenario == scenario)


def _expected(results, **where) -> str:
    sel = results
    for k, v in where.items():
        sel = sel[sel[k] == v]
    values = sel["value"].to_numpy()
    assert len(values) == 2  # two seeds
    return f"{np.mean(values) * 100:.2f} ± {np.std(values, ddof=1) * 100:.2f}"


def test_cell_is_mean_and_sample_std_over_seeds_times_100(spec, results_frame):
    t = _table(results_frame, "toy_3b", spec)
    want = _expected(results_frame, scenario="toy_3b", prediction_model="test_time_dropout",
                     measure="mutual_information", aggregation="patch", metric="aurc", split="iid")
    assert t.value("test_time_dropout", "aurc", "iid", "mutual_information", "patch") == want
    want = _expected(results_frame, scenario="toy_3b", prediction_model="ssn", measure="expected_entropy",
                     aggregation="threshold", metric="auroc", split="all")
    assert t.value("ssn", "auroc", "all", "expected_entropy", "threshold") == want


def test_model_and_measure_level_metrics_repeat(spec, results_frame):
    t = _table(results_frame, "toy_3b", spec)
    dice = _expected(results_frame, scenario="toy_3b", prediction_model="ssn", metric="dice", split="ood")
    rows = [i for i, r in enumerate(t.rows) if r["prediction_model"] == "ssn"]
    j = t.column_index("dice", "ood")
    assert len(rows) == 6 and {t.cell(i, j) for i in rows} == {dice}
    ace = _expected(results_frame, scenario="toy_3b", prediction_model="ssn", measure="expected_entropy",
                    metric="ace", split="iid")
    for agg in ("patch", "threshold"):
        assert t.value("ssn", "ace", "iid", "expected_entropy", agg) == ace
    # active learning ran with PU and EU measures only: AU rows stay empty
    assert t.value("test_time_dropout", "improvement", "ood", "expected_entropy", "patch") == ""
    assert t.value("test_time_dropout", "improvement", "ood", "mutual_information", "patch") != ""


def test_rows_columns_and_headers(spec, results_frame):
    t = _table(results_frame, "toy_3b", spec)
    assert [(r["prediction_model"], r["measure"], r["uncertainty_type"], r["aggregation"]) for r in t.rows[:3]] == [
        ("test_time_dropout", "predictive_entropy", "PU", "patch"),
        ("test_time_dropout", "predictive_entropy", "PU", "threshold"),
        ("test_time_dropout", "expected_entropy", "AU", "patch"),
    ]
    headers = [c.header for c in t.columns]
    assert headers[:3] == ["Dice i.i.d. ↑", "Dice OoD ↑", "AUROC ↑"]
    assert "AURC i.i.d. ↓" in headers and "E-AURC OoD ↓" in headers and "Improvement OoD ↑" in headers
    assert "GED OoD ↓" in headers and "NCC i.i.d. ↑" in headers and "ACE (merged bins) OoD ↓" in headers
    frame = t.frame()
    assert list(frame.columns[:4]) == ["PM", "UM", "UT", "AGG"] and frame.iloc[0, 0] == "TTD"
    # toy_1 has neither a shift nor OoD cases: no AUROC, AL or OoD columns
    t1 = _table(results_frame, "toy_1", spec)
    assert all(c.split == "iid" for c in t1.columns)
    assert {c.metric for c in t1.columns} == {"dice", "aurc", "eaurc", "ace", "ncc", "ged"}


def test_one_seed_shows_mean_only(spec, results_frame):
    one = results_frame[results_frame["seed"] == 0]
    t = _table(one, "toy_3b", spec)
    value = one[(one["scenario"] == "toy_3b") & (one["prediction_model"] == "ssn") & (one["metric"] == "dice")
                & (one["split"] == "iid")]["value"].item()
    assert t.value("ssn", "dice", "iid", "predictive_entropy", "patch") == f"{value * 100:.2f}"


def test_nan_values_are_left_out_and_empty_strings_read_as_missing(spec):
    raw = pd.DataFrame([
        dict(dataset="d", scenario="s", seed=s, backbone="b", prediction_model="ensemble", family="bayesian",
             measure=m, uncertainty_type=t, aggregation=a, task=task, metric=metric, split="iid", value=v)
        for s, v in ((0, 0.5), (1, np.nan), (2, 0.7))
        for m, t, a, task, metric in (("", "", "", "segmentation", "dice"),
                                      ("mutual_information", "EU", "patch", "failure_detection", "aurc"))
    ])
    t = downstream_table(normalise_results(raw), next(iter(downstream_tables(normalise_results(raw), spec))).scenario, spec)
    assert t.value("ensemble", "dice", "iid", "mutual_information", "patch") == \
        f"{60:.2f} ± {np.std([0.5, 0.7], ddof=1) * 100:.2f}"


def test_latex_escape_and_numbers():
    assert latex.escape("toy_1 & 50%") == r"toy\_1 \& 50\%"
    assert latex.escape("-0.73 ± 1.27") == r"$-0.73 \pm 1.27$"
    assert latex.escape("AURC ↓") == r"AURC $\downarrow$"
    tex = latex.tabular(["a", "b"], [["x", "1.00"], ["x", "2.00"]], groups=[("", 1), ("G", 1)], blank_repeats=1)
    assert r"\begin{tabular}{ll}" in tex and r"\toprule" in tex and r"\bottomrule" in tex
    assert "\n & $2.00$ \\\\" in tex  # the repeated label is blanked


@pytest.mark.parametrize("scenario", ["toy_1", "toy_3b"])
def test_every_method_has_a_row(spec, results_frame, scenario):
    t = _table(results_frame, scenario, spec)
    assert len(t.rows) == 2 * 3 * 2  # models x measures x aggregations


def test_identical_metrics_are_one_downstream_column_named_together(tmp_path):
    from values_seg.report import load_run
    from values_seg.report.identical import identical_metrics
    from values_seg.report.tables import downstream_tables

    from .conftest import write_stats_run
    from .test_intervals import rows

    res = pd.DataFrame([r for metric, task, v in (("aurc", "failure_detection", 0.3), ("augrc", "failure_detection", 0.1),
                                                  ("rauc", "dice_retention", 0.1 + 3e-16), ("eaurc", "failure_detection",
                                                                                             0.1 + 1e-6))
                        for m in ("predictive_entropy", "mutual_information")
                        for r in rows([v + (m == "mutual_information") * 0.01], metric=metric, task=task, measure=m)])
    run = load_run(write_stats_run(tmp_path / "run", res, np.full((len(res), 20), 0.1),
                                   tasks=("failure_detection", "dice_retention")))
    same = identical_metrics(run.results, run.spec)
    assert same.groups == ((("failure_detection", "augrc"), ("dice_retention", "rauc")),)  # not E-AURC: 1e-6 apart
    assert same.text() == "AUGRC = Dice R-AUC"
    (table,) = downstream_tables(run.results, run.spec, run.distributions)
    headers = [c.header for c in table.columns]
    assert "AUGRC = Dice R-AUC i.i.d. ↓" in headers and not any(h.startswith("Dice R-AUC") for h in headers)
    assert [c.metric for c in table.columns] == ["aurc", "eaurc", "augrc"]


def test_each_methods_cost_beside_its_metrics_mean_over_seeds(spec, results_frame):
    from values_seg.report.rich import Metric
    from values_seg.report.tables import rich_table

    combos = results_frame[["dataset", "scenario", "seed", "backbone", "prediction_model"]].drop_duplicates()
    costs = combos.assign(family="x", trainings=1, steps=10, train_device="cpu", peak_memory_bytes=None,
                          inference_device="cpu", measured_cases=5)
    costs["train_seconds"] = 10.0 + costs["seed"]  # two seeds: 10 and 11, mean 10.5
    costs["forward_passes"] = np.where(costs["prediction_model"] == "ssn", 1.0, 10.0)
    costs["flops_per_case"] = 2.5e9
    costs["inference_seconds_per_case"] = 0.004 * (1 + costs["seed"])  # 4 and 8 ms, mean 6 ms
    costs = costs[~((costs["scenario"] == "toy_3b") & (costs["prediction_model"] == "test_time_dropout"))]
    t = next(t for t in downstream_tables(results_frame, spec, costs=costs) if t.scenario.scenario == "toy_3b")
    assert [c.header for c in t.cost_columns] == ["Train s", "Passes", "GFLOPs", "ms"]
    frame = t.frame()
    ssn = frame[frame["PM"] == t.spec.label("prediction_model", "ssn")].iloc[0]
    assert ssn[["Train s", "Passes", "GFLOPs", "ms"]].tolist() == ["10.5", "1", "2.5", "6"]
    ttd = frame[frame["PM"] == t.spec.label("prediction_model", "test_time_dropout")].iloc[0]
    assert ttd[["Train s", "Passes", "GFLOPs", "ms"]].tolist() == ["", "", "", ""]  # no cost recorded: empty
    assert t.value("ssn", "auroc", "all", "expected_entropy", "threshold") == _table(
        results_frame, "toy_3b", spec).value("ssn", "auroc", "all", "expected_entropy", "threshold")  # no metric moves
    from values_seg_plugins.report_sections.downstream import _downstream_tex

    tex = _downstream_tex(t)  # the LaTeX and the page carry the same columns
    assert "\\multicolumn{4}{c}{Cost}" in tex and "Train s & Passes & GFLOPs & ms" in tex
    page = rich_table([t])
    assert Metric("Passes", "Cost", "lower") in page.metrics
    i = next(i for i, r in enumerate(t.rows) if r["prediction_model"] == "ssn")
    assert page.frame["ms"].iloc[i][0] == pytest.approx(6.0) and page.frame["ms"].iloc[i][1] is None
    assert not downstream_tables(results_frame, spec)[0].cost_columns  # without costs.csv: no cost columns
