"""Helpers of the lesion tasks (not a plugin): statistics of predicted lesions pooled over test cases.

The lesions of a case are resampled with the case (the bootstrap draws cases, as every task's), so a
statistic of the cases ``indices [B, n]`` pools, per row, the lesions of the drawn cases. Several
raters: per rater, then the mean over the raters where the statistic is defined.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from values_seg import metrics
from values_seg.metrics.lesion import lesion_f1_retention, retention_area
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


#: the common grid of retained fractions the lesion-F1 retention curves are stored on
GRID = np.linspace(0.0, 1.0, 101)
RETENTION_COLUMNS = ["curve", "measure", "aggregation", "split", "point", "fraction", "f1", "random", "ideal",
                     "area", "random_area", "ideal_area", "n"]
SCORE_COLUMNS = ["curve", "measure", "aggregation", "split", "point", "score", "tp_fraction"]


def retention_rows(cases: Sequence[CaseLesions], measure: str, aggregation: str, subset: str) -> list[tuple]:
    """The pooled lesion-F1 retention curve (model, random, ideal) on :data:`GRID`: each rater's curve
    interpolated there, then the mean over the raters; the areas are the raters' mean F1-AUCs."""
    scores, tp, counted, fn = _pool(cases, np.arange(len(cases)))
    curves = [lesion_f1_retention(scores[c], t[c], f) for t, c, f in zip(tp, counted, fn)]
    if not curves or not scores.size:
        return []
    mean = {k: np.mean([np.interp(GRID, c.fractions, getattr(c, k)) for c in curves], axis=0)
            for k in ("values", "random", "ideal")}
    areas = [float(np.mean([retention_area(c, k) for c in curves])) for k in ("values", "random", "ideal")]
    return [("lesion_f1_retention", measure, aggregation, subset, i, float(x), float(mean["values"][i]),
             float(mean["random"][i]), float(mean["ideal"][i]), *areas, int(scores.size)) for i, x in enumerate(GRID)]


def score_rows(cases: Sequence[CaseLesions], measure: str, aggregation: str, subset: str) -> list[tuple]:
    """Per pooled predicted lesion, its score and the share of the raters (who count it) for whom it is a TP."""
    scores, tp, counted, _ = _pool(cases, np.arange(len(cases)))
    n = counted.sum(axis=0)
    share = np.divide((tp & counted).sum(axis=0), n, out=np.full(len(scores), np.nan), where=n > 0)
    return [("lesion_scores", measure, aggregation, subset, i, float(s), float(f))
            for i, (s, f) in enumerate(zip(scores, share))]


def case_f1(cases: Sequence[CaseLesions], indices: np.ndarray) -> np.ndarray:
    """``[B]``: the mean per-case lesion F1 of the drawn cases."""
    values = np.array([c.f1() for c in cases])
    return values[np.asarray(indices)].mean(axis=1)
