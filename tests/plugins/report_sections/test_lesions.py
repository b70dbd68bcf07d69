"""The lesion section's table: one row per model x measure x lesion aggregation with the tasks' values,
intervals and the random / ideal F1-AUC from the curves, sorted by FP-lesion AUROC within a model."""

from __future__ import annotations

import pandas as pd

from values_seg.report.spec import ReportSpec
from values_seg_plugins.report_sections.lesions import lesion_intro, lesion_table

TASKS = {"lesion_detection", "lesion_retention"}


def _row(task, metric, value, measure=None, aggregation=None, split="iid", model="ens"):
    return {"dataset": "toy", "scenario": "toy_lesions", "seed": 0, "backbone": "unet", "prediction_model": model,
            "task": task, "metric": metric, "split": split, "measure": measure, "aggregation": aggregation,
            "value": value, "ci_low": value - 0.1, "ci_high": value + 0.1}


def test_lesion_table():
    results = pd.DataFrame([
        _row("lesion_detection", "lesion_f1", 0.6),
        _row("lesion_detection", "lesion_fp_auroc", 0.7, "pe", "lesion_mean"),
        _row("lesion_detection", "lesion_fp_auroc", 0.9, "pe", "lesion_max"),
        _row("lesion_detection", "lesion_fp_auprc", 0.5, "pe", "lesion_max"),
        _row("lesion_retention", "lesion_f1_auc", 0.45, "pe", "lesion_max"),
        _row("lesion_retention", "case_f1_auc", 0.35, "pe", "lesion_max"),
        _row("lesion_detection", "lesion_fp_auroc", 0.2, "pe", "lesion_max", split="ood"),
    ])
    curves = pd.DataFrame([{"backbone": "unet", "prediction_model": "ens", "measure": "pe", "aggregation": "lesion_max",
                            "split": "iid", "random_area": 0.4, "ideal_area": 0.55}])
    cases = curves.assign(random_area=0.3, ideal_area=0.6)
    table = lesion_table(results, curves, ReportSpec({}), "iid", TASKS, cases)
    assert table["lesion aggregation"].tolist() == ["lesion_max", "lesion_mean"]  # AUROC 0.9 before 0.7
    top = table.iloc[0]
    assert top["FP-lesion AUROC"] == "0.900 [0.800, 1.000]" and top["FP-lesion AUPRC"] == "0.500"
    assert top["F1-AUC"] == "0.450 [0.350, 0.550]" and top["F1@95%"] == "–"
    assert (top["F1-AUC random"], top["F1-AUC ideal"]) == ("0.400", "0.550")
    assert top["lesion F1"] == "0.600 [0.500, 0.700]"
    assert top["case F1-AUC"] == "0.350 [0.250, 0.450]"
    assert (top["case F1-AUC random"], top["case F1-AUC ideal"]) == ("0.300", "0.600")
    assert table.iloc[1]["F1-AUC random"] == "–"
    assert lesion_table(results, None, ReportSpec({}), "ood", TASKS)["FP-lesion AUROC"].tolist() == ["0.200 [0.100, 0.300]"]
    assert lesion_table(results[results["metric"] == "lesion_f1"], None, ReportSpec({}), "iid", TASKS) is None


def test_the_section_states_the_iou_tie_rule():
    default = lesion_intro({"evaluation": {}})
    assert "above 0.5 (IoU > 0.5; at exactly 0.5 an FP, and the rater's lesion an FN" in default
    assert "`evaluation.lesion_iou_rule: at_least`" in default
    assert lesion_intro(None) == default
    shifts = lesion_intro({"evaluation": {"lesion_iou": 0.25, "lesion_iou_rule": "at_least"}})
    assert "at least 0.25 (IoU ≥ 0.25" in shifts and "at exactly 0.25 a TP" in shifts
