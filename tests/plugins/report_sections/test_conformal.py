"""The conformal report section's claims, from constructed result rows: a tie is said as a tie, an
i.i.d. FNR that no guarantee covers is marked, and a selection refused for an in-sample score is named."""

from __future__ import annotations


import pandas as pd
import pytest

from values_seg.report.spec import ReportSpec
from values_seg_plugins.report_sections import conformal as section
from values_seg_plugins.report_sections._conformal_plot import family_label

COLUMNS = ["backbone", "prediction_model", "measure", "aggregation", "task", "metric", "split", "value", "ci_low",
           "ci_high"]


def _rows(entries) -> pd.DataFrame:
    """``entries``: (model, measure, aggregation, metric, split, value), one seed, a point interval."""
    return pd.DataFrame([("unet", model, measure, aggregation, "conformal", metric, split, value, value, value)
                         for model, measure, aggregation, metric, split, value in entries], columns=COLUMNS)


def _sizes(values: dict) -> pd.DataFrame:
    return _rows([(model, measure, None, "set_size" if measure else "set_size_probability", "iid", v)
                  for (model, measure), v in values.items()])


def test_set_size_ties_are_said_not_ranked():
    every = _sizes({("det", "pe"): 1.0, ("det", None): 1.0, ("ttd", "mi"): 1.0})
    assert "ties at 1.000 across every prediction model and set family" in section._size_ties(every, 0.1)
    # the probability sets differ, but 2 of 3 maps add no pixel: said, not ranked
    alone = _sizes({("det", "pe"): 1.0, ("det", None): 0.88, ("ttd", "mi"): 1.0, ("ttd", "ee"): 1.31})
    assert "For 2 of 3 uncertainty-map families the predicted foreground alone" in section._size_ties(alone, 0.1)
    assert section._size_ties(_sizes({("det", "pe"): 1.2, ("det", None): 0.88, ("ttd", "mi"): 1.0}), 0.1) is None


def test_selection_ranks_share_ties():
    cov = _rows([("det", "pe", "patch", "coverage", "iid", 0.5), ("det", "pe", "patch", "selective_risk", "iid", 0.1),
                 ("ttd", "pe", "patch", "coverage", "iid", 0.5), ("ttd", "pe", "patch", "selective_risk", "iid", 0.1),
                 ("ttd", "mi", "patch", "coverage", "iid", 0.5), ("ttd", "mi", "patch", "selective_risk", "iid", 0.2),
                 ("det", "mi", "patch", "coverage", "iid", 0.0), ("ttd", "ee", "patch", "coverage", "iid", 0.0)])
    table = section._selection_table(cov, ReportSpec())
    assert table["rank"].tolist() == [1, 1, 3, 4, 4]
    assert table["accepted i.i.d."].tolist() == ["0.500"] * 3 + ["0.000"] * 2


def test_iid_fnr_without_guarantee_is_marked():
    part = _rows([("det", "pe", None, "set_size", "iid", 1.2), ("det", "pe", None, "fnr", "iid", 0.05),
                  ("det", "pe", None, "fnr", "ood", 0.2), ("det", "pe", None, "resplit_fnr", "iid", 0.09)])
    spec = ReportSpec()
    covered = section._crc_table(part, spec, 0.1, family_label, covered=True)
    assert not covered["FNR i.i.d."].iloc[0].endswith("†") and covered["FNR OoD"].iloc[0].endswith("⚠")
    bare = section._crc_table(part[part["metric"] != "resplit_fnr"], spec, 0.1, family_label, covered=False)
    assert bare["FNR i.i.d."].iloc[0].endswith(" †") and bare["re-split FNR ± 3 s.e."].iloc[0] == "–"
    curves = pd.DataFrame({"split": ["iid", "iid", "ood"], "exchangeable": [True, False, False]})
    assert not section._iid_covered(curves)
    assert section._iid_covered(curves.assign(exchangeable=[True, True, False]))
    assert section._iid_covered(curves.drop(columns="exchangeable"))  # a run from before the declaration


def test_refused_selection_names_aggregations_fitted_on_validation():
    spec = ReportSpec({"aggregation": [{"label": "patch", "display": "Patch", "fit_needs": []},
                                       {"label": "learned_risk", "display": "Learned risk", "fit_needs": ["risks"]},
                                       {"label": "gmm_meta", "display": "GMM meta", "fit_needs": ["scores", "ood"]},
                                       {"label": "pairwise", "display": "Pairwise", "fit_needs": []}]})
    part = _rows([("det", "pe", "patch", "coverage", "iid", 0.5)])
    assert section._refused(part, spec) == ["Learned risk", "GMM meta"]
    assert section._refused(part, ReportSpec()) == []  # nothing declared: nothing claimed
