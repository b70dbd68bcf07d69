"""Out-of-distribution detection (paper appendix A.2): AUROC and companions on per-case scores.

Inputs: ``is_ood`` per-case labels (1 / True = OoD, the positive class) and ``uncertainty``
per-case scores (higher = more uncertain = more likely OoD). Both are flattened and must have the
same length, be finite, and contain both classes.
"""

from __future__ import annotations

import numpy as np

from values_seg.metrics._validation import as_binary, as_float, same_length

__all__ = ["auroc", "auprc", "fpr_at_95_tpr"]


def _check(is_ood, uncertainty, where: str) -> tuple[np.ndarray, np.ndarray]:
    y = as_binary(is_ood, f"{where}: is_ood")
    s = as_float(uncertainty, f"{where}: uncertainty")
    y, s = same_length(y, s, f"{where}: is_ood", f"{where}: uncertainty")
    n_pos = int(y.sum())
    if n_pos == 0 or n_pos == y.shape[0]:
        only = "OoD (1)" if n_pos else "i.i.d. (0)"
        raise ValueError(
            f"{where}: is_ood contains only {only} cases; both i.i.d. and OoD cases are needed"
        )
    return y, s


def _curve(y: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative true and false positives at each distinct threshold, scores descending.

    Threshold ``k`` flags as OoD every case with score >= the k-th largest distinct score; tied
    scores enter together (as in ``sklearn.metrics.roc_curve``).
    """
    order = np.argsort(-s, kind="stable")
    s_sorted, y_sorted = s[order], y[order]
    last_of_group = np.r_[np.flatnonzero(np.diff(s_sorted)), y_sorted.shape[0] - 1]
    tps = np.cumsum(y_sorted)[last_of_group]
    fps = last_of_group + 1 - tps
    return tps, fps


def auroc(is_ood, uncertainty) -> float:
    """Area under the ROC curve of OoD detection (appendix A.2), = ``sklearn.metrics.roc_auc_score``.

    Computed as the Mann-Whitney U statistic with average ranks, so tied scores count 1/2, exactly
    as the trapezoidal ROC area of scikit-learn.
    """
    from scipy.stats import rankdata  # scipy.stats costs ~0.4 s to import: only where it is used

    y, s = _check(is_ood, uncertainty, "auroc")
    ranks = rankdata(s)  # average ranks for ties
    n_pos = int(y.sum())
    n_neg = y.shape[0] - n_pos
    u = ranks[y].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def auprc(is_ood, uncertainty) -> float:
    """Average precision with OoD as the positive class, = ``sklearn.metrics.average_precision_score``.

    ``AP = sum_k (R_k - R_{k-1}) P_k`` over distinct score thresholds (no interpolation).
    """
    y, s = _check(is_ood, uncertainty, "auprc")
    tps, fps = _curve(y, s)
    precision = tps / (tps + fps)
    recall = tps / tps[-1]
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def fpr_at_95_tpr(is_ood, uncertainty) -> float:
    """False-positive rate at the first operating point reaching TPR >= 0.95.

    Lowering the threshold over the distinct scores, the first threshold (the highest one) at
    which at least 95 % of the OoD cases are flagged; this is the smallest FPR over all ROC points
    with TPR >= 0.95 (no interpolation between ROC points). TPR >= 0.95 is tested exactly in
    integers (``20 TP >= 19 P``).
    """
    y, s = _check(is_ood, uncertainty, "fpr_at_95_tpr")
    tps, fps = _curve(y, s)
    n_pos = tps[-1]
    n_neg = fps[-1]
    k = int(np.argmax(20 * tps >= 19 * n_pos))
    return float(fps[k] / n_neg)
