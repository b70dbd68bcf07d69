"""Lesion-scale segmentation metrics: lesion F1 (Shifts 2.0, appendix C.2.2), the lesion-F1
retention curve (Shifts 1.0: F1-AUC, F1@95 %) and the CRPS of an empirical distribution.

What a lesion, a TP, an FP and an FN are, and the two rules at an IoU of exactly the threshold:
docs/design-rationale.md, "Lesion scale".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LesionCounts", "LesionMatch", "components", "lesion_counts", "lesion_match", "lesion_f1",
           "LesionRetention", "lesion_f1_retention", "case_f1_retention", "retention_area", "crps_empirical"]

#: when a predicted lesion is a TP: its largest IoU above ``iou`` or at least at it (the evaluation
#: setting ``lesion_iou_rule``)
IOU_RULES = {"above": np.greater, "at_least": np.greater_equal}

#: connectivity name -> cc3d connectivity in 2D and 3D
CONNECTIVITY = {"face": {2: 4, 3: 6}, "edge": {2: 8, 3: 18}, "vertex": {2: 8, 3: 26}}


def components(mask, connectivity: str = "face") -> tuple[np.ndarray, int]:
    """The connected components of a binary 2D or 3D ``mask``: labels (0 = outside, 1..n) and ``n``."""
    import cc3d

    m = np.asarray(mask).astype(bool, copy=False)
    if m.ndim not in (2, 3):
        raise ValueError(f"lesion components: the mask must be 2D or 3D, got shape {m.shape}")
    if connectivity not in CONNECTIVITY:
        raise ValueError(f"lesion connectivity must be one of {', '.join(CONNECTIVITY)}, got {connectivity!r}")
    # as uint8: cc3d 4.1.1 labels a bool 2D mask wrongly under 8-connectivity (background voxels labelled)
    labels, n = cc3d.connected_components(m.view(np.uint8), connectivity=CONNECTIVITY[connectivity][m.ndim],
                                          return_N=True)
    return labels.astype(np.int64, copy=False), int(n)


def _check_iou(iou) -> float:
    if isinstance(iou, bool) or not 0.0 <= float(iou) < 1.0:
        raise ValueError(f"lesion iou threshold must lie in [0, 1), got {iou!r}")
    return float(iou)


def _max_iou(a: np.ndarray, n_a: int, b: np.ndarray, n_b: int, valid: np.ndarray | None):
    """Per component of ``a`` (``[n_a]``) and of ``b`` (``[n_b]``), the largest IoU with a component
    of the other, counted over the ``valid`` voxels; and each ``a`` component's valid size
    (:func:`values_seg.numerics.kernels.best_overlaps`: one pass for the joint histogram)."""
    from values_seg.numerics import kernels

    mask = np.zeros(0, bool) if valid is None else np.ascontiguousarray(valid, dtype=bool).reshape(-1)
    return kernels.best_overlaps(np.ascontiguousarray(a, dtype=np.int64).reshape(-1), int(n_a),
                                 np.ascontiguousarray(b, dtype=np.int64).reshape(-1), int(n_b), mask)


@dataclass(frozen=True)
class LesionMatch:
    """The predicted lesions of one case against each rater: the components (``labels``, ``n``),
    per rater ``r`` and predicted lesion ``i`` whether it is a TP (``tp [R, n]``) and whether it
    counts at all (``counted [R, n]``: not wholly in the rater's ignored voxels), and per rater the
    reference lesions (``n_reference [R]``) and the missed ones (``fn [R]``)."""

    labels: np.ndarray
    n: int
    tp: np.ndarray
    counted: np.ndarray
    n_reference: np.ndarray
    fn: np.ndarray


def _as_raters(reference, shape) -> np.ndarray:
    r = np.asarray(reference)
    if r.shape == tuple(shape):
        r = r[None]
    if r.shape[1:] != tuple(shape) or r.shape[0] < 1:
        raise ValueError(f"lesion counts: reference shape {r.shape} does not match prediction shape {tuple(shape)} "
                         f"(one mask, or one per rater stacked first)")
    return r


def lesion_match(prediction, reference, iou: float = 0.5, connectivity: str = "face",
                 ignore_index: int | None = None, rule: str = "above") -> LesionMatch:
    """Match the components of ``prediction`` (non-zero = lesion) with those of each rater's mask
    (``reference`` ``[*spatial]`` or ``[R, *spatial]``; non-zero and not ``ignore_index`` = lesion);
    ``rule``: a TP above ``iou`` or at least at it (:data:`IOU_RULES`, module docstring)."""
    iou = _check_iou(iou)
    if rule not in IOU_RULES:
        raise ValueError(f"lesion iou rule must be one of {', '.join(IOU_RULES)}, got {rule!r}")
    found = IOU_RULES[rule]
    p = np.asarray(prediction)
    raters = _as_raters(reference, p.shape)
    labels, n = components(p != 0, connectivity)
    R = raters.shape[0]
    tp, counted = np.zeros((R, n), bool), np.zeros((R, n), bool)
    n_reference, fn = np.zeros(R, np.int64), np.zeros(R, np.int64)
    for r, rater in enumerate(raters):
        valid = None if ignore_index is None else rater != ignore_index
        lesion = rater != 0 if valid is None else (rater != 0) & valid
        ref_labels, n_ref = components(lesion, connectivity)
        best_p, best_r, size_p = _max_iou(labels, n, ref_labels, n_ref, valid)
        counted[r] = size_p > 0
        tp[r] = counted[r] & found(best_p, iou)
        n_reference[r], fn[r] = n_ref, int((~found(best_r, iou)).sum())
    return LesionMatch(labels, n, tp, counted, n_reference, fn)


def lesion_f1(tp, fp, fn) -> float:
    """``TP / (TP + (FP + FN) / 2)`` (Shifts 2.0, eq. 1); 1 when there is no lesion anywhere."""
    denominator = tp + 0.5 * (fp + fn)
    return 1.0 if denominator == 0 else float(tp / denominator)


@dataclass(frozen=True)
class LesionCounts:
    """Lesion-scale counts and F1 of one case, each the mean over the raters."""

    tp: float
    fp: float
    fn: float
    f1: float


def counts_of(match: LesionMatch) -> LesionCounts:
    """Per rater TP, FP, FN and F1 of a :class:`LesionMatch`, then the mean over the raters."""
    tp = match.tp.sum(axis=1)
    fp = (match.counted & ~match.tp).sum(axis=1)
    f1 = [lesion_f1(int(t), int(f), int(m)) for t, f, m in zip(tp, fp, match.fn)]
    return LesionCounts(float(tp.mean()), float(fp.mean()), float(match.fn.mean()), float(np.mean(f1)))


def lesion_counts(prediction, reference, iou: float = 0.5, connectivity: str = "face",
                  ignore_index: int | None = None, rule: str = "above") -> LesionCounts:
    """Lesion-scale TP, FP, FN and F1 of ``prediction`` against ``reference`` (Shifts 2.0, C.2.2;
    one mask or one per rater, see :func:`lesion_match`)."""
    return counts_of(lesion_match(prediction, reference, iou, connectivity, ignore_index, rule))


@dataclass(frozen=True)
class LesionRetention:
    """A lesion-F1 retention curve: retained fractions ``k / N`` of the predicted lesions (the most
    certain kept), the lesion F1 of the kept lesions (``values``), of a random ranking (its
    expectation) and of the ideal ranking (every FP rejected before any TP)."""

    fractions: np.ndarray
    values: np.ndarray
    random: np.ndarray
    ideal: np.ndarray

    @property
    def f1_auc(self) -> float:
        """Area under the F1-retention curve (Shifts 1.0: F1-AUC; higher is better)."""
        return _trapezoid(self.values, self.fractions)

    def f1_at(self, fraction: float = 0.95) -> float:
        """The F1 at a retained fraction (Shifts 1.0: F1@95 %), linear between the curve's points."""
        return float(np.interp(fraction, self.fractions, self.values))


def retention_area(curve: LesionRetention, which: str = "values") -> float:
    """The area under one of a :class:`LesionRetention`'s curves ("values", "random", "ideal")."""
    return _trapezoid(getattr(curve, which), curve.fractions)


def _trapezoid(y: np.ndarray, x: np.ndarray) -> float:
    return float(np.sum((y[1:] + y[:-1]) * np.diff(x)) / 2.0) if len(x) > 1 else float(y[0])


def _f1_of_kept(kept_tp: np.ndarray, n_tp: float, n_fn: float) -> np.ndarray:
    """Lesion F1 when ``k`` lesions are kept of which ``kept_tp[k]`` are TPs: a rejected TP becomes
    a missed lesion, ``F1 = 2 TP_k / (k + TP + FN)``; 1 when nothing is kept and nothing is missed."""
    k = np.arange(len(kept_tp), dtype=np.float64)
    denominator = k + n_tp + n_fn
    return np.divide(2.0 * kept_tp, denominator, out=np.ones_like(k), where=denominator > 0)


def lesion_f1_retention(scores, tp, n_fn: float = 0.0) -> LesionRetention:
    """Lesion-F1 retention curve of predicted lesions ranked by ``scores`` (higher = more uncertain,
    rejected first), ``tp`` their TP flags and ``n_fn`` the reference lesions no prediction found.

    Shifts 1.0 (eq. 2-3) with the TP lesions as the acceptable predictions: keeping the ``k`` most
    certain lesions, precision ``TP_k / k``, recall ``TP_k / (TP + FN)``, F1 their harmonic mean,
    i.e. the lesion F1 of the kept lesions (a rejected TP is a missed lesion); at ``k = N`` it is the
    lesion F1 (Shifts 2.0), with ``n_fn = 0`` exactly Shifts 1.0's F1. Tied scores are kept in every
    order with equal probability: the curve is the expected F1 (exact: F1 is linear in ``TP_k``)."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    t = np.asarray(tp, dtype=bool).reshape(-1)
    if s.shape != t.shape or not np.isfinite(s).all():
        raise ValueError(f"lesion F1 retention: need finite scores and TP flags of one length, got {s.shape}, {t.shape}")
    N, n_tp = len(s), float(t.sum())
    order = np.argsort(s, kind="stable")  # most certain first
    s, t = s[order], t[order].astype(np.float64)
    kept = np.zeros(N + 1)
    if N:
        starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
        ends = np.r_[starts[1:], N]
        cum = np.r_[0.0, np.cumsum(t)]
        for a, b in zip(starts, ends):  # inside a tie group the kept TPs grow linearly in expectation
            kept[a + 1:b + 1] = cum[a] + (cum[b] - cum[a]) * np.arange(1, b - a + 1) / (b - a)
    k = np.arange(N + 1, dtype=np.float64)
    fractions = k / N if N else np.array([0.0, 1.0])
    random_kept = k * (n_tp / N) if N else np.zeros(1)
    ideal_kept = np.minimum(k, n_tp)
    curves = [_f1_of_kept(c, n_tp, n_fn) for c in (kept, random_kept, ideal_kept)]
    if not N:
        curves = [np.repeat(c, 2) for c in curves]
    return LesionRetention(fractions, *curves)


def case_f1_retention(scores, tp, n, fn) -> LesionRetention:
    """Lesion-F1 retention over whole cases: the cases ranked by ``scores`` (a patient-scale
    uncertainty, higher = rejected first), per case ``tp`` its TP lesions, ``n`` its predicted lesions
    and ``fn`` its missed reference lesions. Keeping the ``k`` most certain cases keeps their lesions
    (a rejected case's TPs become missed lesions): ``F1_k = 2 TP_k / (N_k + TP + FN)``, 1 when nothing
    is kept and nothing is to be found; at ``k = n`` the pooled lesion F1. Shifts 1.0's F1-retention
    (eq. 3) with the TP lesions as the acceptable predictions and whole cases rejected at once.

    Tied cases are rejected together pro rata: between a tie group's ends ``TP_k`` and ``N_k`` are
    linear in ``k`` (exact for alike cases, e.g. one drawn twice). Random: every case tied, i.e. the F1
    of the expected kept counts ``2 (k/n) TP / ((k/n) N + TP + FN)``. Ideal: at each ``k`` the best F1
    of any ``k`` cases (Dinkelbach's method: the top ``k`` of ``2 tp - lambda n`` until ``lambda`` is that F1)."""
    s, t, m, f = (np.asarray(v, dtype=np.float64).reshape(-1) for v in (scores, tp, n, fn))
    if not len(s) == len(t) == len(m) == len(f) or not np.isfinite(np.r_[s, t, m, f]).all():
        raise ValueError(f"case F1 retention: need finite scores, TP, lesion and FN counts of one length per case, "
                         f"got lengths {len(s)}, {len(t)}, {len(m)}, {len(f)}")
    if (t < 0).any() or (f < 0).any() or (t > m).any():
        raise ValueError("case F1 retention: need 0 <= tp <= n and fn >= 0 per case")
    N, C = len(s), float(t.sum() + f.sum())
    if not N:
        one = np.full(2, 1.0 if C == 0 else 0.0)
        return LesionRetention(np.array([0.0, 1.0]), one, one, one)
    order = np.argsort(s, kind="stable")  # most certain first
    s, t, m = s[order], t[order], m[order]
    k = np.arange(N + 1, dtype=np.float64)
    ends = np.r_[np.flatnonzero(s[1:] != s[:-1]) + 1, N]
    at = np.r_[0, ends]
    kept = [np.interp(k, at, np.r_[0.0, np.cumsum(v)][at]) for v in (t, m)]
    share = k / N
    best = np.array([_best_kept(t, m, C, int(j)) for j in range(N + 1)])
    return LesionRetention(share, _f1_of_cases(*kept, C), _f1_of_cases(share * t.sum(), share * m.sum(), C),
                           _f1_of_cases(best[:, 0], best[:, 1], C))


def _f1_of_cases(kept_tp, kept_n, C: float) -> np.ndarray:
    kept_tp, kept_n = np.asarray(kept_tp, np.float64), np.asarray(kept_n, np.float64)
    denominator = kept_n + C
    return np.divide(2.0 * kept_tp, denominator, out=np.ones_like(denominator), where=denominator > 0)


def _best_kept(t: np.ndarray, m: np.ndarray, C: float, k: int) -> tuple[float, float]:
    """(TP, N) of the ``k`` cases with the highest ``2 TP / (N + C)`` (Dinkelbach 1967: for the current
    ratio ``lam``, the top ``k`` of ``2 t - lam m``, the fewer lesions first among ties, until ``lam`` stays)."""
    lam, chosen = 0.0, (0.0, 0.0)
    for _ in range(len(t) + 2):
        pick = np.lexsort((m, -(2.0 * t - lam * m)))[:k]
        chosen = (float(t[pick].sum()), float(m[pick].sum()))
        ratio = float(_f1_of_cases(chosen[0], chosen[1], C))
        if ratio <= lam:
            break
        lam = ratio
    return chosen


def crps_empirical(samples, observation):
    """CRPS of the empirical distribution of ``samples`` at ``observation`` (lower is better):
    ``E|X - y| - E|X - X'| / 2`` (Gneiting & Raftery 2007, eq. 21), in float64. Several
    observations (an array): the CRPS at each, the samples sorted and their spread computed once."""
    x = np.sort(np.asarray(samples, dtype=np.float64).reshape(-1))
    y = np.asarray(observation, dtype=np.float64)
    if x.size == 0 or not np.isfinite(x).all() or not np.isfinite(y).all():
        raise ValueError("crps_empirical: need at least one finite sample and finite observations")
    n = x.size
    spread = 2.0 * np.sum(x * (2.0 * np.arange(1, n + 1) - n - 1)) / (n * n)  # E|X - X'|
    values = np.abs(x[None, :] - y.reshape(-1, 1)).mean(axis=1) - 0.5 * spread  # each row's mean as np.mean's
    return float(values[0]) if y.ndim == 0 else values.reshape(y.shape)
