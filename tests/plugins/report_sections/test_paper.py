"""The report's "Comparison with the paper": the paper's values as data, matched to a hand-made run
directory through its ``components.json``, differences checked by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from values_seg.report import build_report, load_run
from values_seg_plugins.report_sections._paper import (
    DATA,
    comparison,
    comparison_section,
    comparison_tables,
    load_settings,
    load_values,
    match_settings,
)

SETTINGS = """setting,dataset,match,paper_params,paper_setup
Toy 1,toy,"{""scenario"": ""1""}","{""dims"": 3, ""size"": 64}",3D 64^3
Toy 3b,toy,"{""scenario"": ""3b""}","{""dims"": 3}",3D
LIDC TEX,lidc,"{""shift"": ""texture""}",{},
"""
VALUES = """table,column,setting,pm,um,ut,agg,prediction_model,measure,aggregation,task,metric,split,value,note
Table 4a,Toy 1,Toy 1,SSN,MI,AU,,ssn,mutual_information,,ambiguity,ncc,iid,0.96,
Table 4a,Toy 1,Toy 1,SSN,EE,EU,,ssn,expected_entropy,,ambiguity,ncc,iid,0.80,
Table 4a,Toy 1,Toy 1,Determ.,MSR,PU,,deterministic,max_softmax,,ambiguity,ncc,iid,0.68,
Table 4a,LIDC TEX,LIDC TEX,SSN,MI,AU,,ssn,mutual_information,,ambiguity,ncc,iid,0.59,
Table 4b,Toy 3b,Toy 3b,SSN,MI,AU,Patch,ssn,mutual_information,patch,ood_detection,auroc,all,0.32,uncertain cell
Table 4b,Toy 3b,Toy 3b,SSN,MI,AU,Thresh,ssn,mutual_information,threshold,ood_detection,auroc,all,0.25,
"""

#: the run: two toy datasets (labels are the results' scenarios), SSN under label "ssn_r2", its
#: measures and aggregations under labels of their own, tasks under custom labels
COMPONENTS = {"version": 1, "components": {
    "dataset": [
        {"label": "small_toy_1", "name": "toy", "params": {"scenario": "1", "dims": 2, "size": 32, "train_cases": 60}},
        {"label": "toy_3b", "name": "toy", "params": {"scenario": "3b", "dims": 3, "size": 64}},
        {"label": "toy_2", "name": "toy", "params": {"scenario": "2", "dims": 2, "size": 32, "train_cases": 60}},
    ],
    "prediction_model": [{"label": "ssn_r2", "name": "ssn", "display": "SSN r2", "params": {"rank": 2}}],
    "measure": [{"label": "MI", "name": "mutual_information", "display": "MI"},
                {"label": "EE", "name": "expected_entropy", "display": "EE"}],
    "aggregation": [{"label": "p10", "name": "patch", "display": "p10"},
                    {"label": "thr", "name": "threshold", "display": "thr"}],
    "task": [{"label": "Amb", "name": "ambiguity", "display": "Amb", "metrics": []},
             {"label": "OoD", "name": "ood_detection", "display": "OoD", "metrics": []}],
}}


def _row(scenario, seed, measure, task, metric, split, value, aggregation=""):
    return dict(dataset="toy", scenario=scenario, seed=seed, backbone="unet", prediction_model="ssn_r2",
                family="variability", measure=measure, versus="", uncertainty_type="", aggregation=aggregation,
                task=task, metric=metric, split=split, value=value)


def _results() -> pd.DataFrame:
    rows = [
        _row("small_toy_1", 0, "MI", "Amb", "ncc", "iid", 0.70),
        _row("small_toy_1", 1, "MI", "Amb", "ncc", "iid", 0.80),
        _row("small_toy_1", 2, "MI", "Amb", "ncc", "iid", 0.90),   # mean 0.80, std 0.10
        _row("small_toy_1", 0, "MI", "Amb", "ncc", "ood", 0.10),   # other split: ignored
        _row("small_toy_1", 0, "EE", "Amb", "ncc", "iid", 0.85),
        _row("small_toy_1", 1, "EE", "Amb", "ncc", "iid", 0.95),   # mean 0.90
        _row("toy_3b", 0, "MI", "OoD", "auroc", "all", 0.40, "p10"),
        _row("toy_3b", 1, "MI", "OoD", "auroc", "all", 0.50, "p10"),  # mean 0.45
        _row("toy_2", 0, "MI", "OoD", "auroc", "all", 0.99, "p10"),   # no paper value for toy 2 here
        _row("toy_3b", 0, "", "Seg", "dice", "iid", 0.9),
    ]
    return pd.DataFrame(rows)


@pytest.fixture()
def paper_dir(tmp_path) -> Path:
    d = tmp_path / "paper"
    d.mkdir()
    (d / "paper_settings.csv").write_text(SETTINGS)
    (d / "paper_toy.csv").write_text(VALUES)
    return d


@pytest.fixture()
def run_dir(tmp_path) -> Path:
    from values_seg.storage import run_directory

    d = run_directory.claim(tmp_path / "run", "handmade")
    (d / "config.yaml").write_text("name: handmade\n")
    (d / "components.json").write_text(json.dumps(COMPONENTS))
    _results().to_csv(d / "results.csv", index=False)
    return d


def _frame(run_dir, paper_dir):
    run = load_run(run_dir)
    return comparison(run.results, run.spec, load_values(paper_dir), load_settings(paper_dir))


def test_settings_match_the_runs_datasets_by_name_and_parameters(run_dir, paper_dir):
    matched = match_settings(load_run(run_dir).spec, load_settings(paper_dir))
    assert [(m.setting, m.scenario) for m in matched] == [("Toy 1", "small_toy_1"), ("Toy 3b", "toy_3b")]
    assert matched[0].differences == (("dims", 2, 3), ("size", 32, 64))  # train_cases: not in the paper's params here
    assert matched[1].differences == ()


def test_cells_differences_and_missing_cells(run_dir, paper_dir):
    f = _frame(run_dir, paper_dir).set_index(["table", "column", "um", "agg"])
    mi = f.loc[("Table 4a", "Toy 1", "MI", "")]
    assert (mi["scenario"], mi["prediction_model"], mi["measure"], mi["aggregation"]) == ("small_toy_1", "ssn_r2", "MI", "")
    assert mi["n"] == 3 and mi["run"] == pytest.approx(0.80) and mi["run_std"] == pytest.approx(0.10)
    assert mi["diff"] == pytest.approx(0.80 - 0.96)
    ee = f.loc[("Table 4a", "Toy 1", "EE", "")]
    assert ee["n"] == 2 and ee["diff"] == pytest.approx(0.90 - 0.80)
    patch = f.loc[("Table 4b", "Toy 3b", "MI", "Patch")]
    assert patch["aggregation"] == "p10" and patch["diff"] == pytest.approx(0.45 - 0.32) and patch["note"] == "uncertain cell"
    # the run has no deterministic model and no threshold row: the paper's cell stays, without a run value
    for key in [("Table 4a", "Toy 1", "MSR", ""), ("Table 4b", "Toy 3b", "MI", "Thresh")]:
        assert f.loc[key]["n"] == 0 and math.isnan(f.loc[key]["diff"])
    # LIDC TEX is no dataset of this run: its cells are left out
    assert "LIDC TEX" not in set(f.reset_index()["column"])
    assert len(f) == 5


def test_table_rendering_keeps_the_papers_layout(run_dir, paper_dir):
    tables = comparison_tables(_frame(run_dir, paper_dir))
    assert [t.table for t in tables] == ["Table 4a", "Table 4b"]
    headers, rows, notes = tables[1].body(lambda kind, value: value)
    assert headers == ["PM", "UM", "UT", "AGG", "Toy 3b: paper", "Toy 3b: run", "Toy 3b: Δ"]
    assert rows == [["SSN", "MI", "AU", "Patch", "0.32 *1", "0.45 ± 0.07", "+0.13"],
                    ["SSN", "MI", "AU", "Thresh", "0.25", "–", "–"]]
    assert notes == ["Toy 3b, SSN MI AU Patch: uncertain cell"]
    assert tables[0].summary().startswith("2 of 3 paper cells in the run; mean |Δ| 0.13, mean Δ -0.03")


def test_a_paper_row_matching_two_run_configurations_gets_a_row_each(run_dir, paper_dir):
    run = load_run(run_dir)
    run.spec.components["prediction_model"].append({"label": "ssn_r8", "name": "ssn", "display": "SSN r8"})
    extra = pd.DataFrame([_row("small_toy_1", 0, "MI", "Amb", "ncc", "iid", 0.5)]).assign(prediction_model="ssn_r8")
    results = pd.concat([run.results, extra], ignore_index=True)
    f = comparison(results, run.spec, load_values(paper_dir), load_settings(paper_dir))
    (t4a,) = [t for t in comparison_tables(f) if t.table == "Table 4a"]
    _, rows, _ = t4a.body(run.spec.label)
    assert [r[0] for r in rows] == ["SSN (SSN r2 / MI)", "SSN (SSN r8 / MI)", "SSN (SSN r2 / EE)", "SSN (SSN r8 / EE)",
                                    "Determ."]
    assert rows[1][3:] == ["0.96", "0.50", "-0.46"] and rows[3][3:] == ["0.80", "–", "–"]


def test_the_section_in_the_built_report(run_dir):
    """With the packaged values: Table 4a's SSN cells for Toy 1 (MI 0.96, EE 0.80) and Table 4b's
    Toy 3b SSN MI patch cell (0.32); LaTeX and the long CSV are written."""
    report = build_report(run_dir).read_text()
    section = report[report.index("## Comparison with the paper"):]
    section = section[: section.index("\n## ", 5)] if "\n## " in section[5:] else section
    section = " ".join(section.split())  # report.md wraps at 100 columns
    assert ("**Toy 1, Toy 2** ↔ run datasets `small_toy_1`, `toy_2`; the run differs in dims=2 (paper 3), "
            "size=32 (paper 64), train_cases=60 (paper: the dataset's default)") in section
    # the packaged paper_training against this run: its SSN's rank differs; its config.yaml has no seeds nor recipe
    assert ("**Toy 3b** ↔ run dataset `toy_3b`; the run differs in prediction_model.ssn.rank=2 (paper 5); "
            "not recorded in the run: seeds (paper 3), recipe.optimizer (paper 'adam'), recipe.lr (paper 0.0003)") in section
    assert "| SSN | MI | AU | 0.96 | 0.80 ± 0.10 | -0.16 |" in section
    assert "| SSN | EE | EU | 0.80 | 0.90 ± 0.07 | +0.10 |" in section
    assert "| Determ. | MSR | PU | 0.68 | – | – |" in section
    assert "| SSN | MI | AU | Patch |" in section and "0.45 ± 0.07 | +0.13 |" in section
    csv = pd.read_csv(run_dir / "tables" / "paper_comparison.csv")
    assert set(csv["setting"]) == {"Toy 1", "Toy 2", "Toy 3b"}  # the run has no toy 3a
    tex = (run_dir / "tables" / "paper_table_4a.tex").read_text()
    assert r"\begin{tabular}" in tex and "$0.96$" in tex


def test_no_matching_dataset_says_which_settings_exist(run_dir):
    run = load_run(run_dir)
    run.spec.components["dataset"] = [{"label": "x", "name": "lidc", "params": {"shift": "malignancy"}}]
    blocks = comparison_section(run.results, run.spec)
    assert "No dataset of this run is one of the paper's settings" in blocks[1] and "Toy 1 (toy" in blocks[1]


def test_bad_data_files_are_named(tmp_path, paper_dir):
    (paper_dir / "paper_bad.csv").write_text(VALUES.replace("0.96", "n/a"))
    with pytest.raises(ValueError, match=r"paper_bad.csv, row\(s\) \[2\]: 'value' must be a number"):
        load_values(paper_dir)
    (paper_dir / "paper_bad.csv").write_text(VALUES.replace("Toy 3b,Toy 3b", "Toy 3b,Toy 9"))
    with pytest.raises(ValueError, match=r"paper_bad.csv: setting\(s\) \['Toy 9'\] are not in paper_settings.csv"):
        load_values(paper_dir)
    (paper_dir / "paper_bad.csv").write_text(VALUES.replace(",note", ""))
    with pytest.raises(ValueError, match="missing column"):
        load_values(paper_dir)
    (paper_dir / "paper_bad.csv").unlink()
    (paper_dir / "paper_settings.csv").write_text(SETTINGS.replace('"{""scenario"": ""1""}"', "{scenario"))
    with pytest.raises(ValueError, match=r"row 2 \(setting 'Toy 1'\), column 'match': not valid JSON"):
        load_settings(paper_dir)


def test_the_packaged_values_are_the_papers_table_4_for_the_toy_data():
    """Spot checks against the paper (Table 4a column Toy 1, Table 4b columns Toy 2/3a/3b)."""
    v = load_values(DATA).set_index(["table", "column", "pm", "um", "agg"])["value"]
    assert len(v) == 13 + 13 * 2 * 3
    assert v[("Table 4a", "Toy 1", "SSN", "MI", "")] == 0.96 and v[("Table 4a", "Toy 1", "TTD", "MI", "")] == 0.47
    assert v[("Table 4b", "Toy 2", "Determ.", "MSR", "Patch")] == 0.84
    assert v[("Table 4b", "Toy 3b", "Ensemble", "EE", "Thresh")] == 0.12
    assert v[("Table 4b", "Toy 3a", "SSN", "EE", "Patch")] == 0.90
    assert ((v > 0) & (v <= 1)).all()
    assert (DATA / "paper_settings.csv").exists()


# ----------------------------------------------------------------------------- issue 31.10: intervals and settings


def test_each_cell_shows_its_interval_and_marks_paper_values_outside_it(run_dir, paper_dir):
    """One seed: the cell's interval is its results row's; a paper value outside it is marked."""
    results = _results()
    results = results[results["seed"] == 0].copy()
    results["ci_low"], results["ci_high"] = math.nan, math.nan
    ci = {("small_toy_1", "MI", "ncc", "iid"): (0.60, 0.97),   # paper 0.96: inside
          ("small_toy_1", "EE", "ncc", "iid"): (0.82, 0.88)}   # paper 0.80: below the interval
    for (scenario, measure, metric, split), (low, high) in ci.items():
        at = ((results["scenario"] == scenario) & (results["measure"] == measure) & (results["metric"] == metric)
              & (results["split"] == split))
        results.loc[at, ["ci_low", "ci_high"]] = low, high
    results.to_csv(run_dir / "results.csv", index=False)
    frame = _frame(run_dir, paper_dir).set_index(["scenario", "um", "agg"])
    mi, ee = frame.loc[("small_toy_1", "MI", "")], frame.loc[("small_toy_1", "EE", "")]
    assert (mi["ci_low"], mi["ci_high"], mi["outside"]) == (0.60, 0.97, False)
    assert (ee["ci_low"], ee["ci_high"], ee["outside"]) == (0.82, 0.88, True)
    patch = frame.loc[("toy_3b", "MI", "Patch")]  # no interval: never marked
    assert math.isnan(patch["ci_low"]) and not patch["outside"]
    table = next(t for t in comparison_tables(frame.reset_index()) if t.table == "Table 4a")
    headers, rows, _ = table.body(lambda kind, v: v)
    cells = {r[1]: r for r in rows}
    assert cells["MI"][-2:] == ["0.70 [0.60, 0.97]", "-0.26"]
    assert cells["EE"][-2:] == ["0.85 [0.82, 0.88]", "+0.05 †"]
    assert "outside the run's 95 % interval (†) in 1 of the 2 cells with an interval" in table.summary()


SETTINGS_TRAINING = """setting,dataset,match,paper_params,paper_training,paper_setup
Toy 1,toy,"{""scenario"": ""1""}","{""dims"": 3}","{""seeds"": 3, ""recipe.lr"": 3e-4, ""recipe.epochs"": 150, ""recipe.batch_size"": 8, ""recipe.weight_decay"": 1e-5, ""backbone.unet.base_width"": 8, ""prediction_model.ssn.rank"": 2, ""prediction_model.ensemble.members"": 5, ""prediction_model.test_time_dropout.p"": 0.5, ""prediction_model.ssn.pretrain_epochs"": 5}",3D
"""


def test_the_settings_that_differ_come_from_the_runs_resolved_config(run_dir, tmp_path):
    """Every declared paper setting is compared with the run's resolved config: the recipe the runner
    records in components.json, resolved from its preset and fields (batch 8 and weight decay 1e-5
    come from the preset, so they match), the seeds counted, the components' parameters; a
    component the run lacks (TTD) is no difference."""
    import yaml

    from values_seg.config.loading import load_config
    from values_seg.runner import declarations
    from values_seg_plugins.report_sections._paper import run_settings

    config = {"name": "handmade", "seeds": [0], "device": "cpu",
              "recipe": {"preset": "unet", "lr": 3.0e-3, "epochs": 15},
              "datasets": [{"name": "toy", "params": {"scenario": "1"}}], "backbones": ["unet"],
              "prediction_models": ["ssn"], "measures": ["mutual_information"], "aggregations": ["patch"],
              "tasks": ["ambiguity"]}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    components = json.loads(json.dumps(COMPONENTS))
    components["recipe"] = declarations.declarations(load_config(base=config))["recipe"]  # as the runner records it
    components["components"]["backbone"] = [{"label": "unet", "name": "unet", "params": {"base_width": 8}}]
    components["components"]["prediction_model"].append(
        {"label": "ensemble", "name": "ensemble", "display": "Ensemble", "params": {"members": 3}})
    (run_dir / "components.json").write_text(json.dumps(components))
    paper = tmp_path / "paper_t"
    paper.mkdir()
    (paper / "paper_settings.csv").write_text(SETTINGS_TRAINING)
    (paper / "paper_toy.csv").write_text(VALUES)
    run = load_run(run_dir)
    settings = run_settings(run.config, run.spec)
    assert settings["seeds"] == 1 and settings["recipe.lr"] == 3.0e-3 and settings["recipe.batch_size"] == 8
    matched = match_settings(run.spec, load_settings(paper), settings)
    assert matched[0].differences == (("dims", 2, 3),)
    assert set(matched[0].training_differences) == {
        ("seeds", 1, 3), ("recipe.lr", 3.0e-3, 3e-4), ("recipe.epochs", 15, 150),
        ("prediction_model.ensemble.members", 3, 5), ("prediction_model.ssn.pretrain_epochs", "not recorded", 5)}


def test_a_run_value_the_data_cannot_support_is_marked_and_never_judged(run_dir, paper_dir):
    """Issue 31.11: an unsupported cell is marked ⚠ and never called outside (†) the run's interval."""
    results = _results()
    results = results[results["seed"] == 0].copy()
    ee = (results["measure"] == "EE") & (results["metric"] == "ncc") & (results["split"] == "iid")
    results["ci_low"], results["ci_high"] = np.where(ee, 0.85, math.nan), np.where(ee, 0.85, math.nan)
    results["supported"] = ~ee
    results["support_note"] = np.where(ee, "zero-width interval from 2 test case(s)", "")
    results.to_csv(run_dir / "results.csv", index=False)
    frame = _frame(run_dir, paper_dir)
    cell = frame.set_index(["scenario", "um", "agg"]).loc[("small_toy_1", "EE", "")]
    assert not cell["outside"] and cell["support_note"] == "zero-width interval from 2 test case(s)"  # 0.80 ∉ [0.85]
    table = next(t for t in comparison_tables(frame) if t.table == "Table 4a")
    cells = {r[1]: r for r in table.body(lambda kind, v: v)[1]}
    assert cells["EE"][-2:] == ["0.85 [0.85, 0.85] ⚠", "+0.05"]
    assert "⚠ 1 run value(s) the data cannot support (zero-width interval from 2 test case(s)): shown, never marked †" \
        in table.summary()
