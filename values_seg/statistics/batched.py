"""The task metrics evaluated on many bootstrap resamples at once (statistics for
:mod:`.bootstrap`): row ``b`` of a result is the scalar metric on the cases ``indices[b]``.

The calling convention and the NaN rows: docs/design-rationale.md, "The bootstrap".
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from values_seg.metrics import CalibrationBins
from values_seg.metrics.calibration import MIN_BIN_MASS, ace_rows
from values_seg.metrics._validation import as_binary, as_float, to_numpy
from values_seg.metrics.selective import oracle_areas, selective_areas
from values_seg.statistics.bootstrap import check_indices, resample_counts

__all__ = ["mean", "auroc", "auprc", "fpr_at_95_tpr", "selective", "aurc", "eaurc", "augrc", "eaugrc", "ace",
           "al_improvement", "dice_rauc", "dice_rauc_oracle"]


#: Elements per chunk of resamples: small temporaries are reused by the allocator, while one
#: [B, n] temporary per step would be returned to the OS and page-faulted in again on every call.
CHUNK_ELEMENTS = 8192


def _by_chunks(compute, indices, n_cases: int) -> np.ndarray:
    """``compute(rows)`` over row chunks of the checked ``indices``, concatenated to ``[B]``."""
    idx = check_indices(indices, n_cases)
    step = max(1, CHUNK_ELEMENTS // idx.shape[1])
    return np.concatenate([compute(idx[i:i + step]) for i in range(0, idx.shape[0], step)])


def _values(values, name: str, allow_nan: bool = False) -> np.ndarray:
    a = to_numpy(values, name)
    if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
        raise ValueError(f"{name}: expected numbers, got dtype {a.dtype}")
    a = a.astype(np.float64, copy=False).reshape(-1)
    if a.size == 0:
        raise ValueError(f"{name}: input is empty")
    bad = np.isinf(a) if allow_nan else ~np.isfinite(a)
    if bad.any():
        raise ValueError(f"{name}: contains {int(bad.sum())} {'infinite' if allow_nan else 'NaN or infinite'} value(s)")
    return a


def _means(counts: np.ndarray, values: np.ndarray) -> np.ndarray:
    return counts @ values / counts.sum(axis=1)


def mean(indices, values, ignore_nan: bool = False) -> np.ndarray:
    """Mean of per-case values (Dice, GED; NCC with ``ignore_nan=True``, as the ambiguity task's
    NaN-ignoring mean) over each resample; a resample without any finite value gives NaN."""
    v = _values(values, "mean: values", allow_nan=ignore_nan)
    finite = np.isfinite(v)
    v0, w = np.where(finite, v, 0.0), finite.astype(np.float64)

    def compute(rows):
        counts = resample_counts(rows, v.shape[0]).astype(np.float64)
        if not ignore_nan:
            return _means(counts, v)
        total, n = counts @ v0, counts @ w
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, total / np.where(n > 0, n, 1.0), np.nan)

    return _by_chunks(compute, indices, v.shape[0])


def _group_bounds(sorted_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of sorted values: the first and last position of each element's tie group."""
    b, n = sorted_values.shape
    pos = np.broadcast_to(np.arange(n), (b, n))
    start = np.ones((b, n), dtype=bool)
    start[:, 1:] = sorted_values[:, 1:] != sorted_values[:, :-1]
    end = np.ones((b, n), dtype=bool)
    end[:, :-1] = start[:, 1:]
    first = np.maximum.accumulate(np.where(start, pos, 0), axis=1)
    last = np.minimum.accumulate(np.where(end, pos, n - 1)[:, ::-1], axis=1)[:, ::-1]
    return first, last


def auroc(indices, is_ood, uncertainty) -> np.ndarray:
    """AUROC of OoD detection (:func:`values_seg.metrics.auroc`) per resample: the Mann-Whitney U
    with average ranks for tied scores; NaN for a resample with one class only."""
    y, s = _ranking_inputs(is_ood, uncertainty, "auroc")

    def compute(rows):
        b, n = rows.shape
        order = np.argsort(s[rows], axis=1)  # tied scores share their average rank: any order
        sorted_rows = np.take_along_axis(rows, order, axis=1)
        first, last = _group_bounds(s[sorted_rows])
        ranks = (first + last) / 2.0 + 1.0  # average 1-based rank of the tie group
        ys = y[sorted_rows]
        n_pos = ys.sum(axis=1).astype(np.float64)
        n_neg = n - n_pos
        u = np.sum(ranks * ys, axis=1) - n_pos * (n_pos + 1.0) / 2.0
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where((n_pos > 0) & (n_neg > 0), u / (n_pos * n_neg), np.nan)

    return _by_chunks(compute, indices, s.shape[0])


def _ranking_inputs(is_ood, uncertainty, where: str) -> tuple[np.ndarray, np.ndarray]:
    y = as_binary(is_ood, f"{where}: is_ood").reshape(-1)
    s = as_float(uncertainty, f"{where}: uncertainty").reshape(-1)
    if y.shape[0] != s.shape[0]:
        raise ValueError(f"{where}: is_ood and uncertainty must have the same length, got {y.shape[0]} and {s.shape[0]}")
    return y, s


def _descending(rows: np.ndarray, y: np.ndarray, s: np.ndarray):
    """Per row, scores descending: OoD labels, cumulative true positives, the last position of each
    element's tie group (thresholds at distinct scores), and the number of positives."""
    order = np.argsort(-s[rows], axis=1)  # tie groups enter together: any order inside them
    sorted_rows = np.take_along_axis(rows, order, axis=1)
    _, last = _group_bounds(s[sorted_rows])
    ys = y[sorted_rows]
    cum_tp = np.cumsum(ys, axis=1)
    return ys, cum_tp, last, cum_tp[:, -1].astype(np.float64)


def auprc(indices, is_ood, uncertainty) -> np.ndarray:
    """Average precision (:func:`values_seg.metrics.auprc`) per resample: each OoD case adds the
    precision at its tie group's threshold, ``AP = (1/P) sum_pos P(threshold)``; NaN with one class."""
    y, s = _ranking_inputs(is_ood, uncertainty, "auprc")

    def compute(rows):
        ys, cum_tp, last, n_pos = _descending(rows, y, s)
        precision = np.take_along_axis(cum_tp, last, axis=1) / (last + 1.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            ap = np.sum(precision * ys, axis=1) / n_pos
        return np.where((n_pos > 0) & (n_pos < rows.shape[1]), ap, np.nan)

    return _by_chunks(compute, indices, s.shape[0])


def fpr_at_95_tpr(indices, is_ood, uncertainty) -> np.ndarray:
    """FPR at the first threshold with TPR >= 0.95 (:func:`values_seg.metrics.fpr_at_95_tpr`) per
    resample (thresholds at distinct scores, ``20 TP >= 19 P`` in integers); NaN with one class."""
    y, s = _ranking_inputs(is_ood, uncertainty, "fpr_at_95_tpr")

    def compute(rows):
        _, cum_tp, last, n_pos = _descending(rows, y, s)
        b, n = rows.shape
        pos = np.arange(n)
        reached = (last == pos) & (20 * cum_tp >= 19 * n_pos[:, None])  # only at a threshold (group end)
        k = np.argmax(reached, axis=1)
        fps = k + 1 - cum_tp[np.arange(b), k]
        n_neg = n - n_pos
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where((n_pos > 0) & (n_neg > 0), fps / n_neg, np.nan)

    return _by_chunks(compute, indices, s.shape[0])


def _selective(indices, risks, confidences, where: str, area: int, excess: bool) -> np.ndarray:
    r = as_float(risks, f"{where}: risks").reshape(-1)
    c = as_float(confidences, f"{where}: confidences").reshape(-1)
    if r.shape[0] != c.shape[0]:
        raise ValueError(f"{where}: risks and confidences must have the same length, got {r.shape[0]} and {c.shape[0]}")

    def compute(rows):
        rr = r[rows]
        value = selective_areas(rr, c[rows])[area]
        return value - oracle_areas(rr)[area] if excess else value

    return _by_chunks(compute, indices, r.shape[0])


def selective(indices, risks, confidences) -> dict[str, np.ndarray]:
    """AURC, E-AURC, AUGRC and E-AUGRC per resample, ``{name: [B]}``, from one sort of each resample
    (the four functions below each sort again); equal to them."""
    r = as_float(risks, "selective: risks").reshape(-1)
    c = as_float(confidences, "selective: confidences").reshape(-1)
    if r.shape[0] != c.shape[0]:
        raise ValueError(f"selective: risks and confidences must have the same length, got {r.shape[0]} and {c.shape[0]}")

    def compute(rows):
        rr = r[rows]
        return np.stack(selective_areas(rr, c[rows]) + oracle_areas(rr), axis=1)  # [b, 4]

    idx = check_indices(indices, r.shape[0])
    step = max(1, CHUNK_ELEMENTS // idx.shape[1])
    areas = np.concatenate([compute(idx[i:i + step]) for i in range(0, idx.shape[0], step)])
    return {"aurc": areas[:, 0], "eaurc": areas[:, 0] - areas[:, 2], "augrc": areas[:, 1],
            "eaugrc": areas[:, 1] - areas[:, 3]}


def aurc(indices, risks, confidences) -> np.ndarray:
    """AURC (:func:`values_seg.metrics.aurc`) per resample; a confidence tie group is one curve step."""
    return _selective(indices, risks, confidences, "aurc", 0, excess=False)


def eaurc(indices, risks, confidences) -> np.ndarray:
    """E-AURC (:func:`values_seg.metrics.eaurc`, the strict oracle) per resample."""
    return _selective(indices, risks, confidences, "eaurc", 0, excess=True)


def augrc(indices, risks, confidences) -> np.ndarray:
    """AUGRC (:func:`values_seg.metrics.augrc`) per resample."""
    return _selective(indices, risks, confidences, "augrc", 1, excess=False)


def eaugrc(indices, risks, confidences) -> np.ndarray:
    """E-AUGRC (:func:`values_seg.metrics.eaugrc`) per resample."""
    return _selective(indices, risks, confidences, "eaugrc", 1, excess=True)


def _stacked_bins(bins) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if isinstance(bins, CalibrationBins) or not isinstance(bins, Sequence) or len(bins) == 0:
        raise ValueError("ace: bins must be a non-empty sequence of per-case CalibrationBins")
    sizes = {b.n_bins for b in bins}
    if len(sizes) != 1:
        raise ValueError(f"ace: all cases' bins must have the same number of bins, got {sorted(sizes)}")
    return tuple(np.stack([np.asarray(getattr(b, f), dtype=np.float64) for b in bins]) for f in
                 ("count", "confidence_sum", "correct_sum"))


def ace(indices, bins: Sequence[CalibrationBins], min_bin_mass: float = MIN_BIN_MASS) -> np.ndarray:
    """ACE (:func:`values_seg.metrics.ace_from_bins`) of the summed per-case calibration bins of
    each resample (each resample's own ACE bins, every non-empty one weighted equally;
    ``min_bin_mass=0``: the paper's eq. 11); NaN where all bins are empty."""
    count, conf, correct = _stacked_bins(bins)

    def compute(rows):
        w = resample_counts(rows, count.shape[0]).astype(np.float64)
        return ace_rows(w @ count, w @ conf, w @ correct, min_bin_mass)  # the summed bins of each resample

    return _by_chunks(compute, indices, count.shape[0])


def al_improvement(indices, dice_first, dice_method, dice_random) -> np.ndarray:
    """Active-learning improvement (eq. 9-10, :func:`values_seg.metrics.al_improvement`) per
    resample, from per-case Dice of the same OoD test cases after the first cycle, after
    querying with the method and after random querying; NaN where the first-cycle mean is 0."""
    first = _values(dice_first, "al_improvement: dice_first")
    method = _values(dice_method, "al_improvement: dice_method")
    random = _values(dice_random, "al_improvement: dice_random")
    if not first.shape == method.shape == random.shape:
        raise ValueError(
            "al_improvement: per-case Dice of the three cycles must have the same length, got "
            f"{first.shape[0]}, {method.shape[0]}, {random.shape[0]}"
        )

    def compute(rows):
        w = resample_counts(rows, first.shape[0]).astype(np.float64)
        df, dm, dr = _means(w, first), _means(w, method), _means(w, random)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(df != 0, (dm - df) / df - (dr - df) / df, np.nan)

    return _by_chunks(compute, indices, first.shape[0])


def _retention_area(sorted_dice: np.ndarray, kept_times: np.ndarray, n: int) -> np.ndarray:
    """``1 - area`` of the image-level retention curve ``v_k = (S_k + n - k) / n``, k = 0..n, from
    how many of the n + 1 points each case is retained at (its ``kept_times``)."""
    summed = np.sum(sorted_dice * kept_times, axis=1)  # sum over k of S_k, the retained Dice
    all_points = summed / n + (n + 1) / 2.0  # sum over k of v_k
    mean = sorted_dice.mean(axis=1)
    return 1.0 - (all_points - (1.0 + mean) / 2.0) / n  # trapezoid: end points count half


def dice_rauc(indices, dice, uncertainty) -> np.ndarray:
    """R-AUC of the image-level Dice retention curve (:func:`values_seg.metrics.dice_retention_curve`,
    ``.rauc``) per resample. A case at (0-based) position ``j`` of the certainty order is retained at
    the ``n - j`` points ``k > j``; a tie group shares its mean position, which is the expectation
    over orders that the curve's interpolation inside tie groups computes."""
    d = _values(dice, "dice_rauc: dice")
    u = as_float(uncertainty, "dice_rauc: uncertainty").reshape(-1)
    if d.shape[0] != u.shape[0]:
        raise ValueError(f"dice_rauc: dice and uncertainty must have the same length, got {d.shape[0]} and {u.shape[0]}")
    if d.min() < 0 or d.max() > 1:
        raise ValueError(f"dice_rauc: dice must lie in [0, 1], got range [{d.min()}, {d.max()}]")

    def compute(rows):
        n = rows.shape[1]
        order = np.argsort(u[rows], axis=1)  # most certain first
        sorted_rows = np.take_along_axis(rows, order, axis=1)
        first, last = _group_bounds(u[sorted_rows])
        return _retention_area(d[sorted_rows], n - (first + last) / 2.0, n)

    return _by_chunks(compute, indices, d.shape[0])


def dice_rauc_oracle(indices, dice) -> np.ndarray:
    """R-AUC of the oracle retention curve (the best cases retained first, ``.oracle_rauc``) per resample."""
    d = _values(dice, "dice_rauc_oracle: dice")

    def compute(rows):
        n = rows.shape[1]
        best_first = -np.sort(-d[rows], axis=1)
        return _retention_area(best_first, n - np.arange(n, dtype=np.float64), n)

    return _by_chunks(compute, indices, d.shape[0])
