"""The conformal section's per-class table and its several-risks table, from constructed curves and
rows: a class with too few calibration cases says so, an interval above α is not covered, "none
valid" is said, and each risk is judged against its own level."""

from __future__ import annotations

import pandas as pd

from values_seg.report.spec import ReportSpec
from values_seg_plugins.report_sections import conformal as section
from values_seg_plugins.report_sections._conformal_plot import PROBABILITY_LABEL, family_label


def _class_rows():
    base = {"backbone": "unet", "prediction_model": "det", "curve": "crc_class", "sets": "probability",
            "measure": "", "alpha": 0.1, "exchangeable": True}
    rows = []
    for c, n_cal, supported, t, risk, low, high in ((1, 40, True, 0.3, 0.08, 0.05, 0.12),
                                                     (2, 30, True, 0.2, 0.2, 0.15, 0.25),
                                                     (3, 4, False, float("nan"), float("nan"), float("nan"),
                                                      float("nan"))):
        for split in ("iid", "ood"):
            rows.append({**base, "class_index": c, "n": 12, "n_calibration": n_cal, "supported": supported, "threshold": t,
                         "effective_level": (0.1 * (n_cal + 1) - 1) / n_cal if supported else float("nan"),
                         "split": split, "risk": risk, "ci_low": low, "ci_high": high,
                         "exchangeable": split == "iid"})
    return pd.DataFrame(rows)


def test_class_table_says_which_classes_the_guarantee_covers():
    table = section.class_table(_class_rows(), ReportSpec(), family_label)
    assert table["class"].tolist() == ["1", "2", "3"]  # no class names recorded: their indices
    assert table["set family"].unique().tolist() == [PROBABILITY_LABEL]
    assert table["λ̂"].tolist() == ["0.700", "0.800", "–"]  # 1 - t for the probability sets
    assert table["i.i.d. FNR ≤ α?"].tolist() == ["✓", "✗ (above α)", "no guarantee: 4 calibration cases < 9"]
    assert table["effective level"].iloc[0] == "0.0775" and table["n calibration"].tolist() == [40, 30, 4]
    assert table["FNR i.i.d. [95 %]"].iloc[0] == "0.080 [0.050, 0.120]" and table["FNR i.i.d. [95 %]"].iloc[2] == "–"
    assert table["n i.i.d."].tolist() == [12, 12, 12]
    text = "\n".join(section.class_blocks(table, 0.1))
    assert "E[FNR of class c | c present] ≤ α" in text and "(α (n + 1) − 1) / n" in text
    assert "Not covered (✗ or no guarantee): 2 of 3 class rows (det class 2, det class 3)" in text


def test_classes_are_named_by_the_names_the_run_recorded_for_their_dataset():
    spec = ReportSpec(components={"dataset": [{"label": "city", "name": "gta_cityscapes",
                                               "class_names": ["road", "sidewalk", "car", "truck"]}]})
    table = section.class_table(_class_rows().assign(dataset="city"), spec, family_label)
    assert table["class"].tolist() == ["sidewalk", "car", "truck"]
    assert "(det class car, det class truck)" in "\n".join(section.class_blocks(table, 0.1))
    other = section.class_table(_class_rows().assign(dataset="toy"), spec, family_label)  # another data set's names
    assert other["class"].tolist() == ["1", "2", "3"]


def test_class_present_in_no_case_is_left_out():
    rows = _class_rows()
    rows.loc[rows["class_index"] == 3, ["n_calibration", "n"]] = 0
    assert section.class_table(rows, ReportSpec(), family_label)["class"].tolist() == ["1", "2"]
    assert section.class_table(rows[rows["class_index"] == 3], ReportSpec(), family_label) is None


def test_class_table_not_exchangeable_claims_nothing():
    rows = _class_rows().assign(exchangeable=False)
    table = section.class_table(rows, ReportSpec(), family_label)
    assert table["i.i.d. FNR ≤ α?"].iloc[0] == "no guarantee: i.i.d. not exchangeable"


def _grid(valid):
    return pd.DataFrame([{"backbone": "unet", "prediction_model": "det", "seed": 0, "curve": "ltt_grid",
                          "threshold": t, "valid": v, "chosen": t == 0.5 and v, "fnr_level": 0.2, "fdr_level": 0.4,
                          "delta": 0.1, "fwer": "bonferroni", "n_calibration": 60}
                         for t, v in zip((0.3, 0.4, 0.5, 0.6, 0.7), valid)])


def test_multi_table_valid_set_chosen_and_each_risk_against_its_level():
    part = pd.DataFrame([("unet", "det", "conformal", m, s, v, lo, hi) for m, s, v, lo, hi in (
        ("multi_fnr", "iid", 0.15, 0.1, 0.21), ("multi_fdr", "iid", 0.45, 0.41, 0.5),
        ("multi_fnr", "ood", 0.5, 0.4, 0.6))],
        columns=["backbone", "prediction_model", "task", "metric", "split", "value", "ci_low", "ci_high"])
    table, levels = section.multi_table(_grid([False, True, True, False, True]), part, ReportSpec())
    row = table.iloc[0]
    assert row["valid thresholds t"] == "3: 0.40–0.50, 0.70" and row["chosen t"] == "0.500"
    assert row["FNR i.i.d."] == "0.150 [0.100, 0.210] ✓" and row["FDR i.i.d."] == "0.450 [0.410, 0.500] ✗"
    assert row["FNR OoD"] == "0.500 [0.400, 0.600]" and row["FDR OoD"] == "–"
    assert "FNR ≤ 0.2 and FDR ≤ 0.4 together, δ = 0.1 (bonferroni over 5 thresholds" in levels
    none, _ = section.multi_table(_grid([False] * 5), part.iloc[:0], ReportSpec())
    assert none["valid thresholds t"].iloc[0] == "none valid" and none["chosen t"].iloc[0] == "–"
    assert "\"none valid\"" in "\n".join(section.multi_blocks(none, levels))


def test_bin_table_per_bin_verdicts():
    base = {"backbone": "unet", "prediction_model": "det", "curve": "crc_bins", "measure": "predictive_entropy",
            "aggregation": "image", "sets": "probability", "alpha": 0.1}
    rows = []
    for b, lo, hi, n_cal, supported, risk, low, high in ((0, float("-inf"), 0.5, 20, True, 0.06, 0.03, 0.09),
                                                          (1, 0.5, float("inf"), 5, False, float("nan"),
                                                           float("nan"), float("nan"))):
        for split in ("iid", "ood"):
            rows.append({**base, "bin": b, "score_low": lo, "score_high": hi, "n_calibration": n_cal,
                         "supported": supported, "effective_level": 0.0550 if supported else float("nan"),
                         "split": split, "risk": risk, "ci_low": low, "ci_high": high, "n": 10,
                         "exchangeable": split == "iid"})
    own = [{**r, "sets": "uncertainty", "risk": 0.15, "ci_low": 0.12, "ci_high": 0.18} for r in rows[:2]]
    table = section.bin_table(pd.DataFrame(own + rows), ReportSpec(), family_label)
    assert table["sets"].tolist() == ["prob.", "prob.", "pred. + predictive_entropy"]
    assert table["image score"].iloc[0] == "predictive_entropy · image"
    assert table["bin: score"].tolist() == ["1: [–, 0.500)", "2: [0.500, –)", "1: [–, 0.500)"]
    assert table["i.i.d. FNR ≤ α?"].tolist() == ["✓", "no guarantee: 5 calibration cases < 9", "✗ (above α)"]
    text = "\n".join(section.bin_blocks(table, 0.1))
    assert "E[FNR | bin] ≤ α" in text and "Not covered (✗ or no guarantee): 2 of 3 bins." in text
