"""Helpers of the lesion tasks (not a plugin): statistics of predicted lesions pooled over test cases.

The lesions of a case are resampled with the case (the bootstrap draws cases, as every task's), so a
statistic of the cases ``indices [B, n]`` pools, per row, the lesions of the drawn cases. Several
raters: per rater, then the mean over the raters where the statistic is defined.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from values_seg.metrics.lesion import case_f1_retention, lesion_f1_retention, retention_area
from values_seg.components.task import EvaluationResult

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


def scored(result: EvaluationResult, lesions: LesionRecords):
    """``(subset, ids, measure, aggregation, cases)`` for every subset of ``result`` and every measure ×
    lesion aggregation that scored its lesions, in a fixed order (what each lesion task iterates)."""
    pairs = lesions.scores[["measure", "aggregation"]].drop_duplicates().sort_values(["measure", "aggregation"])
    for subset, ids in subsets(result):
        for measure, aggregation in pairs.itertuples(index=False):
            yield subset, ids, str(measure), str(aggregation), lesions.per_case(ids, measure, aggregation)


def _pool(cases: Sequence[CaseLesions], row: np.ndarray):
    chosen = [cases[i] for i in row]
    scores = np.concatenate([c.scores for c in chosen])
    tp = np.concatenate([c.tp for c in chosen], axis=1)
    counted = np.concatenate([c.counted for c in chosen], axis=1)
    return scores, tp, counted, np.sum([c.fn for c in chosen], axis=0)


class Pooled:
    """The predicted lesions of ``cases`` pooled, sorted by score, for statistics of case resamples:
    a resample weights each lesion by how often its case is drawn (a drawn-twice case's lesions are
    tied duplicates), so every statistic is computed for all resamples at once."""

    def __init__(self, cases: Sequence[CaseLesions]):
        self.n_cases = len(cases)
        scores = np.concatenate([c.scores for c in cases]) if cases else np.zeros(0)
        order = np.argsort(scores, kind="stable")  # ascending: the most certain first
        self.case = np.concatenate([np.full(c.scores.size, i) for i, c in enumerate(cases)]).astype(np.int64)[order] \
            if cases else np.zeros(0, np.int64)
        R = max((c.tp.shape[0] for c in cases), default=0)
        self.tp = np.concatenate([c.tp for c in cases], axis=1)[:, order] if cases else np.zeros((R, 0), bool)
        self.counted = np.concatenate([c.counted for c in cases], axis=1)[:, order] if cases else self.tp
        self.fn = np.stack([c.fn for c in cases]) if cases else np.zeros((0, R))  # [n, R]
        s = scores[order]
        self.starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]]) if s.size else np.zeros(0, np.int64)

    def _draws(self, indices: np.ndarray) -> np.ndarray:
        """``[B, n]``: how often each case is drawn in each resample."""
        indices = np.asarray(indices)
        counts = np.zeros((indices.shape[0], self.n_cases))
        np.add.at(counts, (np.repeat(np.arange(indices.shape[0]), indices.shape[1]), indices.reshape(-1)), 1.0)
        return counts

    def _groups(self, weights: np.ndarray) -> np.ndarray:
        """Sums of ``weights [B, L]`` over the groups of tied scores, ``[B, G]`` (ascending scores)."""
        return np.add.reduceat(weights, self.starts, axis=1) if self.starts.size else weights[:, :0]

    def per_rater(self, indices: np.ndarray, statistic: str) -> np.ndarray:
        """``[B]``: ``statistic`` ("fp_auroc", "fp_auprc", "f1_auc", "f1_at_95") of each resample, per rater
        on the lesions the rater counts, then the mean over the raters where defined."""
        draws = self._draws(indices)
        lesion_weight = draws[:, self.case]
        values = []
        for r in range(self.tp.shape[0]):
            w = lesion_weight * self.counted[r]
            tp = self._groups(w * self.tp[r])
            fp = self._groups(w * ~self.tp[r])
            values.append(STATISTICS[statistic](tp, fp, draws @ self.fn[:, r]))
        return _mean_where_defined(np.stack(values) if values else np.zeros((0, draws.shape[0])))


def _mean_where_defined(values: np.ndarray) -> np.ndarray:
    """Per column of ``values [R, B]``, the mean over the raters whose value is defined (not NaN); NaN
    where none is (no warning: a resample without, e.g., any FP lesion has no FP-lesion AUROC)."""
    defined = ~np.isnan(values)
    n = defined.sum(axis=0)
    total = np.where(defined, values, 0.0).sum(axis=0)
    return np.divide(total, n, out=np.full(n.shape, np.nan), where=n > 0)


def patient_scores(cases: Sequence[CaseLesions]) -> np.ndarray:
    """Each case's patient-scale score: the maximum of its lesions' scores, 0 without a predicted lesion
    (as :class:`~values_seg.components.lesion_scale.LesionAggregation` with ``patient="max"``)."""
    return np.array([float(c.scores.max()) if c.scores.size else 0.0 for c in cases])


class CasePooled:
    """The cases of ``cases`` sorted by their patient-scale score, with per rater their TP lesions,
    predicted (counted) lesions and missed lesions, for the case-level lesion-F1 retention of case
    resamples, all at once (:func:`values_seg.metrics.lesion.case_f1_retention` per resample)."""

    def __init__(self, cases: Sequence[CaseLesions]):
        self.n_cases = len(cases)
        score = patient_scores(cases)
        self.order = np.argsort(score, kind="stable")
        s = score[self.order]
        self.starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]]) if s.size else np.zeros(0, np.int64)
        R = max((c.tp.shape[0] for c in cases), default=0)
        count = lambda f: np.stack([f(c) for c in cases], axis=1)[:, self.order] if cases else np.zeros((R, 0))
        self.tp = count(lambda c: (c.tp & c.counted).sum(axis=1).astype(np.float64))  # [R, n]
        self.n = count(lambda c: c.counted.sum(axis=1).astype(np.float64))
        self.fn = count(lambda c: np.asarray(c.fn, np.float64))

    def per_rater(self, indices: np.ndarray, statistic: str) -> np.ndarray:
        """``[B]``: "f1_auc" or "f1_at_95" of the case-level curve of each resample, per rater, then the mean."""
        indices = np.asarray(indices)
        B, n = indices.shape
        draws = np.zeros((B, self.n_cases))
        np.add.at(draws, (np.repeat(np.arange(B), n), indices.reshape(-1)), 1.0)
        draws = draws[:, self.order]
        groups = lambda w: np.add.reduceat(w, self.starts, axis=1) if self.starts.size else w[:, :0]
        ends = np.concatenate([np.zeros((B, 1)), np.cumsum(groups(draws), axis=1)], axis=1)  # kept cases
        k = np.arange(n + 1, dtype=np.float64)
        offset = (np.arange(B) * (n + 2.0))[:, None]  # rows side by side: one np.interp for all of them
        values = []
        for r in range(self.tp.shape[0]):
            kept = [np.interp((k + offset).reshape(-1), (ends + offset).reshape(-1),
                              np.concatenate([np.zeros((B, 1)), np.cumsum(groups(draws * v[r]), axis=1)],
                                             axis=1).reshape(-1)).reshape(B, n + 1) for v in (self.tp, self.n)]
            C = draws @ (self.tp[r] + self.fn[r])
            with np.errstate(invalid="ignore", divide="ignore"):
                f1 = np.where(kept[1] + C[:, None] > 0, 2.0 * kept[0] / (kept[1] + C[:, None]), 1.0)
            if statistic == "f1_auc":
                values.append(((f1[:, 1:] + f1[:, :-1]).sum(axis=1) / 2.0 / n) if n else f1[:, 0])
            else:
                low = int(np.floor(0.95 * n))
                high = min(low + 1, n)
                values.append(f1[:, low] + (0.95 * n - low) * (f1[:, high] - f1[:, low]) if n else f1[:, 0])
        return _mean_where_defined(np.stack(values) if values else np.zeros((0, B)))


def _fp_auroc(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    """AUROC of the scores with the FP lesions positive: ``sum_g FP_g (TP below g + TP_g / 2) / (FP TP)``."""
    below = np.cumsum(tp, axis=1) - tp
    P, N = fp.sum(axis=1), tp.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (fp * (below + 0.5 * tp)).sum(axis=1) / (P * N)
    return np.where((P > 0) & (N > 0), out, np.nan)


def _fp_auprc(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    """Average precision with the FP lesions positive: ``sum_g (FP_g / FP) precision_g``, scores descending."""
    pos, neg = fp[:, ::-1], tp[:, ::-1]
    hits, total = np.cumsum(pos, axis=1), np.cumsum(pos + neg, axis=1)
    P, N = fp.sum(axis=1), tp.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(total > 0, hits / total, 0.0)
        out = (pos * precision).sum(axis=1) / P
    return np.where((P > 0) & (N > 0), out, np.nan)


def _retention(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray):
    """Per resample: the kept lesions at each group end ``M [B, G + 1]``, the expected kept TPs there
    ``T``, ``N`` (all lesions) and ``C`` (TP + FN)."""
    m = tp + fp
    M = np.concatenate([np.zeros((len(m), 1)), np.cumsum(m, axis=1)], axis=1)
    T = np.concatenate([np.zeros((len(m), 1)), np.cumsum(tp, axis=1)], axis=1)
    return m, M, T, M[:, -1], T[:, -1] + fn


def _f1_auc(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    """The area under :func:`values_seg.metrics.lesion.lesion_f1_retention`'s curve in closed form: inside
    a tie group the expected kept TPs grow linearly, ``E[TP_k] = alpha + beta k``, so the sum of
    ``2 E[TP_k] / (k + C)`` over the group is ``2 (beta m + (alpha - beta C)(psi(b + C + 1) - psi(a + C + 1)))``."""
    from scipy.special import digamma

    m, M, T, N, C = _retention(tp, fp, fn)
    a, b = M[:, :-1], M[:, 1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        beta = np.where(m > 0, tp / np.where(m > 0, m, 1.0), 0.0)
        alpha = T[:, :-1] - a * beta
        Cc = C[:, None]
        inner = beta * m + (alpha - beta * Cc) * np.where(m > 0, digamma(b + Cc + 1) - digamma(a + Cc + 1), 0.0)
        total = 2.0 * inner.sum(axis=1)  # sum of F1(k), k = 1 .. N
        first = np.where(C == 0, 1.0, 0.0)
        last = np.where(N + C > 0, 2.0 * T[:, -1] / (N + C), 1.0)
        area = (first / 2 + total - last / 2) / N
    return np.where(N > 0, area, np.where(C == 0, 1.0, 0.0))


def _kept_tp(x: np.ndarray, M: np.ndarray, T: np.ndarray) -> np.ndarray:
    """Per row, the expected kept TPs at ``x`` kept lesions: linear between the group ends ``(M, T)``."""
    j = (M <= x[:, None]).sum(axis=1) - 1
    j = np.clip(j, 0, M.shape[1] - 1)
    k = np.minimum(j + 1, M.shape[1] - 1)
    rows = np.arange(len(x))
    width = M[rows, k] - M[rows, j]
    step = np.where(width > 0, (T[rows, k] - T[rows, j]) / np.where(width > 0, width, 1.0), 0.0)
    return T[rows, j] + (x - M[rows, j]) * step


def _f1_at_95(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    """The F1 at 95 % of the lesions kept, linear between the neighbouring whole numbers of kept lesions."""
    m, M, T, N, C = _retention(tp, fp, fn)
    k = 0.95 * N
    low = np.floor(k)
    high = np.minimum(low + 1.0, N)
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = [np.where(x + C > 0, 2.0 * _kept_tp(x, M, T) / (x + C), 1.0) for x in (low, high)]
    out = f1[0] + (k - low) * (f1[1] - f1[0])
    return np.where(N > 0, out, np.where(C == 0, 1.0, 0.0))


STATISTICS = {"fp_auroc": _fp_auroc, "fp_auprc": _fp_auprc, "f1_auc": _f1_auc, "f1_at_95": _f1_at_95}


def pooled_statistic(pooled: Pooled, indices: np.ndarray, statistic: str) -> np.ndarray:
    """``[B]``: ``statistic`` of the pooled lesions of each resample (see :meth:`Pooled.per_rater`)."""
    return pooled.per_rater(indices, statistic)


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


def case_retention_rows(cases: Sequence[CaseLesions], measure: str, aggregation: str, subset: str) -> list[tuple]:
    """The case-level lesion-F1 retention curve (model, random, ideal; cases rejected by their
    :func:`patient_scores`) on :data:`GRID`: each rater's curve interpolated there, then the mean over
    the raters; the areas are the raters' mean F1-AUCs."""
    if not cases:
        return []
    pooled = CasePooled(cases)
    scores = patient_scores(cases)[pooled.order]
    curves = [case_f1_retention(scores, pooled.tp[r], pooled.n[r], pooled.fn[r]) for r in range(pooled.tp.shape[0])]
    mean = {k: np.mean([np.interp(GRID, c.fractions, getattr(c, k)) for c in curves], axis=0)
            for k in ("values", "random", "ideal")}
    areas = [float(np.mean([retention_area(c, k) for c in curves])) for k in ("values", "random", "ideal")]
    return [("case_f1_retention", measure, aggregation, subset, i, float(x), float(mean["values"][i]),
             float(mean["random"][i]), float(mean["ideal"][i]), *areas, len(cases)) for i, x in enumerate(GRID)]


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
