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


def test_values_no_guarantee_covers_are_marked_and_never_ranked():
    """Issue 31: toy 3a's i.i.d. cases are not exchangeable with validation: its set sizes and accepted
    shares are unsupported (values_seg.runner.support), marked † with the reason, and take no rank."""
    why = "no guarantee: 6 of 6 test case(s) in split iid not exchangeable with the validation split"
    part = _rows([("det", "pe", None, "set_size", "iid", 1.2), ("det", "pe", None, "fnr", "iid", 0.05),
                  ("det", "pe", "patch", "coverage", "iid", 0.9), ("ttd", "pe", "patch", "coverage", "iid", 0.5),
                  ("ttd", "mi", "patch", "coverage", "iid", 0.7)])
    bad = part["metric"].isin(["set_size", "coverage"]) & ~((part["prediction_model"] == "ttd")
                                                            & (part["measure"] == "mi"))
    part = part.assign(supported=~bad, support_note=bad.map({True: why, False: ""}))
    spec = ReportSpec()
    crc = section._crc_table(part, spec, 0.1, family_label, covered=False)
    assert crc["set size (i.i.d.)"].iloc[0] == "1.200 †"
    selection = section._selection_table(part, spec)
    assert selection["rank"].tolist() == [1, "–", "–"]  # 0.9 is the largest share, but no certificate covers it
    assert selection["accepted i.i.d."].tolist() == ["0.700", "0.900 †", "0.500 †"]
    note = section._unsupported_note(part, spec)
    assert note.startswith("† after an i.i.d. set size or accepted share: the data cannot support it (")
    assert note.count(why) == 1 and "never ranked or recommended" in note  # one reason, said once for its metrics
    assert section._unsupported_note(part.assign(supported=True, support_note=""), spec) == ""


def test_the_effective_level_is_printed_beside_alpha():
    text = section.effective_level(0.02, 60)
    assert "effective level 0.0037 on the n = 60 calibration cases" in text and "takes 82% of α" in text
    assert section.effective_level(0.02, None) == "" and section.effective_level(0.02, 10) == ""
    cases = pd.DataFrame({"dataset": "toy", "scenario": "toy_2", "case_id": [f"v{i}" for i in range(60)] + ["t0"],
                          "split": ["val"] * 60 + ["test"]})
    from values_seg.report.common import scenarios
    assert section.n_calibration(cases, scenarios(cases)[0]) == 60


def test_a_ranking_of_methods_that_accept_everything_says_it_ranks_the_models():
    """Each method that accepts every i.i.d. case has its model's mean risk as accepted risk."""
    entries = []
    for model, risk in (("det", 0.2), ("ens", 0.1)):
        for measure in ("pe", "mi"):
            for aggregation in ("patch", "threshold"):
                entries += [(model, measure, aggregation, "coverage", "iid", 1.0),
                            (model, measure, aggregation, "selective_risk", "iid", risk)]
    entries += [("ens", "ee", "patch", "coverage", "iid", 0.5), ("ens", "ee", "patch", "selective_risk", "iid", 0.05)]
    selection = section._selection_table(_rows(entries), ReportSpec())
    note = section.accept_everything_note(selection)
    assert note.startswith("8 of 9 methods accept every i.i.d. test case")
    assert "ranks prediction models by mean risk, not uncertainty methods" in note
    few = section._selection_table(_rows([e for e in entries if e[0] == "ens" or e[1] != "pe"]), ReportSpec())
    assert section.accept_everything_note(section._selection_table(_rows(entries[-2:] + entries[:2]), ReportSpec())) == ""
    assert few is not None


def test_the_section_says_comparisons_are_conditional_on_the_calibration_draw():
    text = section.intro(0.02)
    assert "held fixed: they are conditional on the one calibration draw" in text
    assert "effective level on the calibration cases" in text
