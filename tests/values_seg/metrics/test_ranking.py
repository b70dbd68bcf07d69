import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score, roc_auc_score, roc_curve

from values_seg.metrics import auprc, auroc, fpr_at_95_tpr


def _data(seed, n=60, ties=False):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    y[:2] = [0, 1]  # both classes present
    s = rng.normal(size=n) + 0.8 * y
    if ties:
        s = np.round(s, 0)  # few distinct values -> many ties within and across classes
    return y, s


def test_auroc_hand_computed_with_tie():
    # positive/negative pairs: (0.5 vs 0.1) 1, (0.5 vs 0.5) 1/2, (0.9 vs 0.1) 1, (0.9 vs 0.5) 1 -> 3.5 / 4
    assert auroc([0, 1, 0, 1], [0.1, 0.5, 0.5, 0.9]) == pytest.approx(0.875)
    assert auroc([0, 1], [0.0, 1.0]) == 1.0
    assert auroc([1, 0], [0.0, 1.0]) == 0.0
    assert auroc([1, 0, 1, 0], [2.0, 2.0, 2.0, 2.0]) == 0.5


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("ties", [False, True])
def test_match_sklearn(seed, ties):
    y, s = _data(seed, ties=ties)
    assert auroc(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert auprc(y, s) == pytest.approx(average_precision_score(y, s), abs=1e-12)
    fpr, tpr, _ = roc_curve(y, s, drop_intermediate=False)
    expected = fpr[np.flatnonzero(tpr >= 0.95 - 1e-12)[0]]
    assert fpr_at_95_tpr(y, s) == pytest.approx(expected, abs=1e-12)


def test_auprc_hand_computed():
    # scores descending 0.9 (OoD), 0.8 (iid), 0.7 (OoD), 0.1 (iid)
    # thresholds: P=1 R=1/2; P=1/2 R=1/2; P=2/3 R=1; P=1/2 R=1
    # AP = 1/2 * 1 + 0 * 1/2 + 1/2 * 2/3 + 0 = 5/6
    assert auprc([1, 0, 1, 0], [0.9, 0.8, 0.7, 0.1]) == pytest.approx(5 / 6)


def test_fpr_at_95_tpr_hand_computed():
    # 20 OoD cases with scores 1..20, iid cases with scores 0.5, 1.5, 2.5, 30
    # TPR >= 0.95 needs 19 of 20 OoD -> threshold 2 flags OoD 2..20 and iid 2.5, 30 -> FPR 2/4
    y = np.r_[np.ones(20), np.zeros(4)]
    s = np.r_[np.arange(1, 21), [0.5, 1.5, 2.5, 30]]
    assert fpr_at_95_tpr(y, s) == pytest.approx(0.5)


def test_torch_and_bool_inputs():
    y, s = _data(7)
    expected = roc_auc_score(y, s)
    assert auroc(torch.from_numpy(y).bool(), torch.from_numpy(s).float()) == pytest.approx(expected, abs=1e-6)
    assert auroc(list(y), list(s)) == pytest.approx(expected)
    assert isinstance(auroc(y, s), float)


@pytest.mark.parametrize("fn", [auroc, auprc, fpr_at_95_tpr])
def test_invalid_inputs(fn):
    with pytest.raises(ValueError, match="only"):
        fn([1, 1, 1], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="only"):
        fn([0, 0], [0.1, 0.2])
    with pytest.raises(ValueError, match="same length"):
        fn([0, 1, 1], [0.1, 0.2])
    with pytest.raises(ValueError, match="NaN"):
        fn([0, 1], [0.1, np.nan])
    with pytest.raises(ValueError, match="binary"):
        fn([0, 2], [0.1, 0.2])
    with pytest.raises(ValueError, match="empty"):
        fn([], [])
