"""Helpers of the lesion tasks (not a plugin): statistics of predicted lesions pooled over test cases.

The lesions of a case are resampled with the case (the bootstrap draws cases, as every task's), so a
statistic of the cases ``indices [B, n]`` pools, per row, the lesions of the drawn cases. Several
raters: per rater, then the mean over the raters where the statistic is defined.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from values_seg import metrics
from values_seg.metrics.lesion import lesion_f1_retention
from values_seg.task import EvaluationResult

from values_seg_plugins.quantities.lesions import CaseLesions, LesionRecords

from ._common import SUBSETS, case_ids


def records(result: EvaluationResult) -> LesionRecords | None:
    """The stored lesion records of ``result`` (quantity ``lesions``), ``None`` where not computed."""
    return result.output("lesions")


def subsets(result: EvaluationResult):
    """``(subset, case ids)`` of the non-empty test subsets (sorted ids)."""
    for subset in SUBSETS:
        cases = result.test_cases(subset)
        if not cases.empty:
            yield subset, sorted(case_ids(cases))


def _pool(cases: Sequence[CaseLesions], row: np.ndarray):
    chosen = [cases[i] for i in row]
    scores = np.concatenate([c.scores for c in chosen])
    tp = np.concatenate([c.tp for c in chosen], axis=1)
    counted = np.concatenate([c.counted for c in chosen], axis=1)
    return scores, tp, counted, np.sum([c.fn for c in chosen], axis=0)


def per_rater(cases: Sequence[CaseLesions], indices: np.ndarray,
              metric: Callable[[np.ndarray, np.ndarray, float], float]) -> np.ndarray:
    """``[B]``: per row of ``indices``, the mean over the raters of ``metric(scores, tp, fn)`` on the
    pooled lesions the rater counts (NaN where undefined for every rater)."""
    out = np.full(indices.shape[0], np.nan)
    for b, row in enumerate(np.asarray(indices)):
        scores, tp, counted, fn = _pool(cases, row)
        values = [metric(scores[c], t[c], f) for t, c, f in zip(tp, counted, fn)]
        values = [v for v in values if np.isfinite(v)]
        if values:
            out[b] = float(np.mean(values))
    return out


def fp_auroc(scores, tp, fn) -> float:
    """AUROC of the lesion scores detecting the FP lesions (NaN without both TP and FP lesions)."""
    fp = ~tp
    return metrics.auroc(fp, scores) if 0 < fp.sum() < fp.size else np.nan


def fp_auprc(scores, tp, fn) -> float:
    """AUPRC (average precision) of the lesion scores with the FP lesions as the positive class."""
    fp = ~tp
    return metrics.auprc(fp, scores) if 0 < fp.sum() < fp.size else np.nan


def f1_auc(scores, tp, fn) -> float:
    return lesion_f1_retention(scores, tp, fn).f1_auc


def f1_at_95(scores, tp, fn) -> float:
    return lesion_f1_retention(scores, tp, fn).f1_at(0.95)


def case_f1(cases: Sequence[CaseLesions], indices: np.ndarray) -> np.ndarray:
    """``[B]``: the mean per-case lesion F1 of the drawn cases."""
    values = np.array([c.f1() for c in cases])
    return values[np.asarray(indices)].mean(axis=1)
