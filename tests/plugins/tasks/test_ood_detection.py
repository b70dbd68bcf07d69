"""OoD-detection task: AUROC / AUPRC / FPR@95%TPR per (measure, aggregation) over all test cases."""

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score, roc_curve

from values_seg import registry

from ._records import EE, MI, PE, STANDARD_OOD, STANDARD_SCORES, by_key, make_result, standard, without_ood

task = registry.create("task", "ood_detection")


def sklearn_fpr_at_95(y, s):
    fpr, tpr, _ = roc_curve(y, s, drop_intermediate=False)
    return float(fpr[np.argmax(tpr >= 0.95)])


def test_one_row_per_metric_and_score():
    rows = by_key(task.score(standard()))
    expected = {(m.name, "all", meas, agg) for (meas, agg) in STANDARD_SCORES for m in task.metrics}
    assert set(rows) == expected  # AU measures (expected_entropy) too: the report decides exclusion


@pytest.mark.parametrize("key", sorted(STANDARD_SCORES))
def test_against_sklearn(key):
    rows = by_key(task.score(standard()))
    y = np.array(STANDARD_OOD, dtype=int)
    s = np.array(STANDARD_SCORES[key])
    measure, aggregation = key
    assert rows[("auroc", "all", measure, aggregation)] == pytest.approx(roc_auc_score(y, s))
    assert rows[("auprc", "all", measure, aggregation)] == pytest.approx(average_precision_score(y, s))
    assert rows[("fpr_at_95_tpr", "all", measure, aggregation)] == pytest.approx(sklearn_fpr_at_95(y, s))


def test_by_hand():
    rows = by_key(task.score(standard()))
    # pe/image: every OoD score (0.6, 0.5, 0.4) above every iid score (0.1, 0.3, 0.2): perfect
    assert rows[("auroc", "all", PE, "image")] == pytest.approx(1.0)
    assert rows[("auprc", "all", PE, "image")] == pytest.approx(1.0)
    assert rows[("fpr_at_95_tpr", "all", PE, "image")] == pytest.approx(0.0)
    # pe/patch: iid (0.5, 0.1, 0.4), OoD (0.2, 0.6, 0.3). Pairs OoD > iid: 0.2>0.1, 0.6>all 3,
    # 0.3>0.1 -> 5 of 9. Ranked descending 0.6o 0.5i 0.4i 0.3o 0.2o 0.1i: AP = (1/1 + 2/4 + 3/5)/3
    # = 0.7. All 3 OoD flagged at threshold 0.2, where iid 0.5 and 0.4 are flagged too: FPR 2/3.
    assert rows[("auroc", "all", PE, "patch")] == pytest.approx(5 / 9)
    assert rows[("auprc", "all", PE, "patch")] == pytest.approx(0.7)
    assert rows[("fpr_at_95_tpr", "all", PE, "patch")] == pytest.approx(2 / 3)


def test_ties_count_half():
    rows = by_key(task.score(standard()))
    # ee/image: iid (0.2, 0.2, 0.5), OoD (0.5, 0.2, 0.9).
    # OoD 0.5: beats 0.2, 0.2, ties 0.5 -> 2.5; OoD 0.2: ties 0.2, 0.2 -> 1; OoD 0.9: 3 -> 6.5 / 9
    assert rows[("auroc", "all", EE, "image")] == pytest.approx(6.5 / 9)
    # mi/image: iid (0.3, 0.1, 0.2), OoD (0.9, 0.8, 0.2): 3 + 3 + (1 + 0.5) = 7.5 / 9
    assert rows[("auroc", "all", MI, "image")] == pytest.approx(7.5 / 9)


def test_all_scores_tied():
    result = make_result(dice=[0.5] * 4, ood=[False, True, False, True], scores={(PE, "image"): [0.3] * 4})
    rows = by_key(task.score(result))
    assert rows[("auroc", "all", PE, "image")] == pytest.approx(0.5)
    assert rows[("fpr_at_95_tpr", "all", PE, "image")] == pytest.approx(1.0)


def test_no_ood_cases_no_rows():
    assert task.score(without_ood()) == []


def test_only_ood_cases_no_rows():
    result = make_result(dice=[0.5, 0.6], ood=[True, True], scores={(PE, "image"): [0.1, 0.2]})
    assert task.score(result) == []


def test_one_case_per_class():
    result = make_result(dice=[0.5, 0.6], ood=[False, True], scores={(PE, "image"): [0.4, 0.2]})
    rows = by_key(task.score(result))
    assert rows[("auroc", "all", PE, "image")] == pytest.approx(0.0)
    assert rows[("auprc", "all", PE, "image")] == pytest.approx(0.5)
