"""Separation task (section 4.1, Q1-Q4): AU-minus-EU NCC and EU-minus-AU AUROC per measure pair."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from values_seg import registry

from ._records import (
    BAYESIAN_TYPES,
    DETERMINISTIC_TYPES,
    EE,
    MI,
    MS,
    NAN,
    PE,
    STANDARD_NCC,
    STANDARD_OOD,
    STANDARD_SCORES,
    by_key,
    make_result,
    standard,
    without_ood,
)

task = registry.create("task", "separation")
PAIR = (EE, MI)  # (AU measure, EU measure): a row's measure and versus


def pairs(rows):
    """Separation rows indexed by (metric, split, (measure, versus), aggregation)."""
    return by_key([{**r, "measure": (r["measure"], r["versus"])} for r in rows])


def test_by_hand():
    rows = pairs(task.score(standard()))
    # bayesian: ee = AU, mi = EU, pe = PU (not paired).
    # NCC iid: ee (0.6 + 0.4)/2 = 0.5, mi (0.1 + 0.2)/2 = 0.15 -> 0.35
    # AUROC image: mi 7.5/9, ee 6.5/9 -> 1/9 (hand counts in test_ood_detection)
    assert set(rows) == {
        ("ncc_au_minus_eu", "iid", PAIR, None),
        ("auroc_eu_minus_au", "all", PAIR, "image"),
        ("auroc_eu_minus_au", "all", PAIR, "patch"),
    }
    assert rows[("ncc_au_minus_eu", "iid", PAIR, None)] == pytest.approx(0.35)
    assert rows[("auroc_eu_minus_au", "all", PAIR, "image")] == pytest.approx(1 / 9)


@pytest.mark.parametrize("aggregation", ["image", "patch"])
def test_auroc_difference_against_sklearn(aggregation):
    rows = pairs(task.score(standard()))
    y = np.array(STANDARD_OOD, dtype=int)
    eu = roc_auc_score(y, STANDARD_SCORES[(MI, aggregation)])
    au = roc_auc_score(y, STANDARD_SCORES[(EE, aggregation)])
    expected = eu - au
    assert rows[("auroc_eu_minus_au", "all", PAIR, aggregation)] == pytest.approx(expected)


def test_ncc_difference_against_nanmean():
    rows = pairs(task.score(standard()))
    expected = np.nanmean(STANDARD_NCC[EE][:3]) - np.nanmean(STANDARD_NCC[MI][:3])
    assert rows[("ncc_au_minus_eu", "iid", PAIR, None)] == pytest.approx(expected)


def test_equals_difference_of_task_rows():
    result = standard()
    amb = by_key(registry.create("task", "ambiguity").score(result))
    ood = by_key(registry.create("task", "ood_detection").score(result))
    rows = pairs(task.score(result))
    assert rows[("ncc_au_minus_eu", "iid", PAIR, None)] == pytest.approx(
        amb[("ncc", "iid", EE, None)] - amb[("ncc", "iid", MI, None)]
    )
    assert rows[("auroc_eu_minus_au", "all", PAIR, "patch")] == pytest.approx(
        ood[("auroc", "all", MI, "patch")] - ood[("auroc", "all", EE, "patch")]
    )


def test_variability_family_swaps_roles():
    # stochastic segmentation network: expected entropy is EU, mutual information AU
    rows = pairs(task.score(standard(measure_types={PE: "PU", EE: "EU", MI: "AU"})))
    pair = (MI, EE)
    assert rows[("ncc_au_minus_eu", "iid", pair, None)] == pytest.approx(-0.35)
    assert rows[("auroc_eu_minus_au", "all", pair, "image")] == pytest.approx(-1 / 9)


def test_every_au_eu_pair():
    # two EU measures (pe typed EU only for the test): pairs ee|mi and ee|pe
    rows = pairs(task.score(standard(measure_types={PE: "EU", EE: "AU", MI: "EU"})))
    assert {m for (_, _, m, _) in rows} == {(EE, MI), (EE, PE)}
    # ee|pe NCC iid: 0.5 - 0.4; AUROC image: pe 1.0 - ee 6.5/9
    assert rows[("ncc_au_minus_eu", "iid", (EE, PE), None)] == pytest.approx(0.1)
    assert rows[("auroc_eu_minus_au", "all", (EE, PE), "image")] == pytest.approx(1 - 6.5 / 9)


def test_deterministic_no_rows():
    assert task.score(standard(measure_types=DETERMINISTIC_TYPES)) == []
    assert task.score(standard(measure_types={})) == []


def test_no_ood_cases_only_ncc():
    rows = pairs(task.score(without_ood()))
    assert rows == {("ncc_au_minus_eu", "iid", PAIR, None): pytest.approx(0.35)}


def test_all_nan_ncc_only_auroc():
    ncc = dict(STANDARD_NCC, **{EE: [NAN, NAN, NAN, 0.1, 0.2, 0.3]})  # AU measure undefined on iid
    rows = pairs(task.score(standard(ncc=ncc)))
    assert {m for (m, _, _, _) in rows} == {"auroc_eu_minus_au"}


def test_measure_without_scores_for_an_aggregation():
    scores = {k: v for k, v in STANDARD_SCORES.items() if k != (EE, "patch")}
    rows = pairs(task.score(standard(scores=scores)))
    assert ("auroc_eu_minus_au", "all", PAIR, "patch") not in rows
    assert ("auroc_eu_minus_au", "all", PAIR, "image") in rows


def test_typed_measures_missing_from_records():
    # max_softmax typed AU but without any score or finite NCC: no pair with it yields rows
    types = dict(BAYESIAN_TYPES, **{MS: "AU"})
    rows = pairs(task.score(standard(measure_types=types)))
    assert {m for (_, _, m, _) in rows} == {PAIR}


def test_pu_measures_not_paired():
    result = make_result(
        dice=[0.5, 0.6, 0.7, 0.8],
        ood=[False, False, True, True],
        scores={(PE, "image"): [0.1, 0.2, 0.3, 0.4]},
        ncc={PE: [0.1, 0.2, 0.3, 0.4]},
        measure_types={PE: "PU"},
    )
    assert task.score(result) == []
