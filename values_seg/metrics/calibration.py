"""Calibration (paper appendix A.5): Platt scaling and the Average Calibration Error (eq. 11, and
with sparse bins merged, which is not eq. 11).

Platt's convention, the ACE's bins and why sparse bins are merged: docs/design-rationale.md,
"Calibration".
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from values_seg.metrics._validation import as_binary, as_float, as_real, same_shape

__all__ = [
    "platt_fit",
    "platt_apply",
    "CalibrationBins",
    "calibration_bins",
    "ace",
    "ace_from_bins",
    "ace_bin_groups",
    "MIN_BIN_MASS",
    "ReliabilityDiagram",
    "reliability_diagram",
]


# ----------------------------------------------------------------------------- Platt scaling


def platt_fit(uncertainty, correct, sample_weight=None) -> tuple[float, float]:
    """Fit Platt scaling on the negative uncertainty; returns ``(a, b)`` for :func:`platt_apply`.

    ``uncertainty`` and ``correct`` (pixel correctness, {0, 1}) have the same shape, e.g. all
    validation pixels flattened. ``sample_weight`` (non-negative, same shape) lets a caller pass
    histogram bin centres as ``uncertainty`` with their pixel counts as weights (one entry per bin
    and correctness), so the fit streams over any number of cases; ``N+``/``N-`` in Platt's
    targets are then the weighted counts. Minimises the weighted mean negative log-likelihood by
    Newton's method (:func:`_newton_logistic`), on a standardised score for conditioning (the
    result is mapped back). Constant uncertainty gives ``a = 0`` (the confidence is the prior).
    """
    u = as_float(uncertainty, "platt_fit: uncertainty")
    y = as_binary(correct, "platt_fit: correct")
    same_shape(u, y, "platt_fit: uncertainty", "platt_fit: correct")
    s = -u.reshape(-1)
    y = y.reshape(-1)
    if sample_weight is None:
        w = np.ones_like(s)
    else:
        w = as_float(sample_weight, "platt_fit: sample_weight")
        same_shape(w, u, "platt_fit: sample_weight", "platt_fit: uncertainty")
        w = w.reshape(-1)
        if (w < 0).any():
            raise ValueError("platt_fit: sample_weight must be non-negative")
    w_total = w.sum()
    if not w_total > 0:
        raise ValueError("platt_fit: the total sample weight is zero")
    n_pos = float(w[y].sum())
    n_neg = float(w_total - n_pos)
    t = np.where(y, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
    wn = w / w_total

    # standardise s: z = a' s' + b' with s' = (s - mu) / sd
    mu = float(wn @ s)
    sd = float(np.sqrt(wn @ (s - mu) ** 2))
    if not sd > 1e-12 * max(1.0, abs(mu)):
        sd = 1.0
    x = (s - mu) / sd
    one_minus_t = 1.0 - t

    a_std, b_std = _newton_logistic(x, one_minus_t, wn, np.array([0.0, np.log((n_neg + 1.0) / (n_pos + 1.0))]))
    a = a_std / sd
    b = b_std - a_std * mu / sd
    return float(a), float(b)


def _newton_logistic(x: np.ndarray, one_minus_t: np.ndarray, w: np.ndarray, ab: np.ndarray,
                     max_iter: int = 100) -> np.ndarray:
    """Minimise ``sum_i w_i [softplus(z_i) - (1 - t_i) z_i]``, ``z = a x + b``, by Newton's method
    with backtracking (the loss is strictly convex for targets in (0, 1); two parameters, so the
    exact Hessian is cheap and convergence quadratic, to the gradient's rounding level)."""

    def loss(ab):
        z = ab[0] * x + ab[1]
        return w @ (np.logaddexp(0.0, z) - one_minus_t * z)

    current = loss(ab)
    for _ in range(max_iter):
        z = ab[0] * x + ab[1]
        p = _logistic(z)
        dz = w * (p - one_minus_t)
        grad = np.array([dz @ x, dz.sum()])
        h = w * p * (1.0 - p)
        hess = np.array([[h @ (x * x), h @ x], [h @ x, h.sum()]])
        hess[np.diag_indices(2)] += 1e-12 * max(1.0, float(np.trace(hess)))  # stays invertible
        step = np.linalg.solve(hess, grad)
        if not np.all(np.isfinite(step)):
            warnings.warn("platt_fit: Newton's method met a non-finite step; keeping the last fit", RuntimeWarning,
                          stacklevel=3)
            return ab
        scale = 1.0
        while scale > 1e-10:  # backtracking: never accept a step that increases the loss
            trial = ab - scale * step
            value = loss(trial)
            if value <= current:
                break
            scale *= 0.5
        else:
            return ab  # no decrease is possible any more: at the minimum up to rounding
        done = np.max(np.abs(trial - ab)) <= 1e-12 * (1.0 + np.max(np.abs(ab)))
        ab, current = trial, value
        if done:
            return ab
    warnings.warn(f"platt_fit: Newton's method did not converge in {max_iter} iterations", RuntimeWarning,
                  stacklevel=3)
    return ab


def platt_apply(uncertainty, a: float, b: float) -> np.ndarray:
    """Confidence ``1 / (1 + exp(a * (-u) + b))`` in [0, 1] (float64, the input's shape)."""
    u = as_float(uncertainty, "platt_apply: uncertainty")
    if not (np.isfinite(a) and np.isfinite(b)):
        raise ValueError(f"platt_apply: a and b must be finite, got a={a!r}, b={b!r}")
    return _logistic(a * u - b)  # 1 / (1 + exp(-a u + b))


def _logistic(z: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-z))``, as ``(1 + tanh(z / 2)) / 2``: no overflow for large ``|z|``."""
    return 0.5 * (1.0 + np.tanh(0.5 * z))


# ----------------------------------------------------------------------------- ACE


@dataclass(frozen=True, eq=False)
class CalibrationBins:
    """Per-bin sufficient statistics of a calibration histogram (equal-width bins on [0, 1]).

    ``count`` (int64), ``confidence_sum`` and ``correct_sum`` (float64), each ``[n_bins]``.
    Bins of several cases merge with ``+`` (and ``sum(...)``, which starts from 0).
    """

    count: np.ndarray
    confidence_sum: np.ndarray
    correct_sum: np.ndarray

    @property
    def n_bins(self) -> int:
        return int(self.count.shape[0])

    @classmethod
    def empty(cls, n_bins: int = 20) -> "CalibrationBins":
        return cls(np.zeros(n_bins, np.int64), np.zeros(n_bins), np.zeros(n_bins))

    def __add__(self, other):
        if isinstance(other, (int, float)) and other == 0:
            return self
        if not isinstance(other, CalibrationBins):
            return NotImplemented
        if other.n_bins != self.n_bins:
            raise ValueError(f"cannot add CalibrationBins with {self.n_bins} and {other.n_bins} bins")
        return CalibrationBins(
            self.count + other.count,
            self.confidence_sum + other.confidence_sum,
            self.correct_sum + other.correct_sum,
        )

    __radd__ = __add__


def _check_n_bins(n_bins) -> int:
    if int(n_bins) != n_bins or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    return int(n_bins)


def calibration_bins(correct, confidence, n_bins: int = 20) -> CalibrationBins:
    """Histogram of one case (or any set of pixels): per bin, count, summed confidence and accuracy.

    ``correct`` ({0, 1}) and ``confidence`` (in [0, 1]) have the same shape; bin index
    ``min(floor(confidence * n_bins), n_bins - 1)``. A confidence broadcast along some axes (one
    map for every rater, ``np.broadcast_to``) is binned once, with ``correct`` counted over those
    axes. Each value gets one integer code (bin, number correct); one plain and one weighted
    ``bincount`` of the codes give every statistic.
    """
    n_bins = _check_n_bins(n_bins)
    y = as_binary(correct, "calibration_bins: correct")
    c = as_real(confidence, "calibration_bins: confidence")
    same_shape(y, c, "calibration_bins: correct", "calibration_bins: confidence")
    shared = tuple(i for i, (stride, n) in enumerate(zip(c.strides, c.shape)) if stride == 0 and n > 1)
    repeats = int(np.prod([c.shape[i] for i in shared]))
    if shared:  # the distinct confidences once, and per value how many of its copies are correct
        c = c[tuple(slice(0, 1) if i in shared else slice(None) for i in range(c.ndim))]
        y = y.sum(axis=shared, keepdims=True, dtype=np.int64)
    c, y = c.reshape(-1), y.reshape(-1)
    low, high = c.min(), c.max()
    if low < 0 or high > 1:
        raise ValueError(f"calibration_bins: confidence must lie in [0, 1], got range [{low}, {high}]")
    per_value = repeats + 1  # number correct per distinct value: 0 .. repeats
    code = np.minimum(np.multiply(c, n_bins, dtype=np.float64).astype(np.intp), n_bins - 1)  # floor: c >= 0
    code *= per_value
    code += y
    per_code = np.bincount(code, minlength=n_bins * per_value).reshape(n_bins, per_value)
    conf_sum = np.bincount(code, weights=c, minlength=n_bins * per_value).reshape(n_bins, per_value).sum(axis=1)
    return CalibrationBins(
        per_code.sum(axis=1).astype(np.int64) * repeats,
        conf_sum * repeats,
        (per_code * np.arange(per_value)).sum(axis=1).astype(np.float64),
    )


#: the smallest share of all counted items that one ACE bin holds (module docstring)
MIN_BIN_MASS = 0.001


def _check_min_bin_mass(min_bin_mass) -> float:
    if not 0.0 <= float(min_bin_mass) <= 1.0:
        raise ValueError(f"min_bin_mass must lie in [0, 1], got {min_bin_mass!r}")
    return float(min_bin_mass)


def ace_bin_groups(count, min_bin_mass: float = MIN_BIN_MASS) -> np.ndarray:
    """The ACE bin of each equal-width bin: ``count`` ``[n_bins]`` or ``[rows, n_bins]`` (one
    histogram per row, e.g. bootstrap resamples) -> int64 group ids of the same shape.

    Scanning from low to high confidence, consecutive bins join one group until it holds at least
    ``min_bin_mass`` of the row's total count; an empty bin met while no group is open is a group
    of its own (empty, ignored by the ACE); an open remainder below the minimum at the top joins
    the last group that reached it. With ``min_bin_mass=0`` every bin is its own group.
    """
    count = np.asarray(count, dtype=np.float64)
    flat = count.ndim == 1
    c = count.reshape(1, -1) if flat else count
    threshold = _check_min_bin_mass(min_bin_mass) * c.sum(axis=1)
    rows = c.shape[0]
    ids = np.empty(c.shape, dtype=np.int64)
    group, acc = np.zeros(rows, np.int64), np.zeros(rows)
    last_full = np.full(rows, -1, np.int64)  # the last group that reached the minimum
    for j in range(c.shape[1]):
        ids[:, j] = group
        acc += c[:, j]
        full = (acc > 0) & (acc >= threshold)
        last_full = np.where(full, group, last_full)
        close = full | (acc == 0)  # a full group, or an empty bin on its own
        group += close
        acc[close] = 0.0
    remainder = (acc > 0) & (last_full >= 0)
    if remainder.any():
        r = np.flatnonzero(remainder)
        tail = ids[r] > last_full[r, None]
        ids[r] = np.where(tail, last_full[r, None], ids[r])
    return ids[0] if flat else ids


def _merged(values: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Row-wise sums of ``values`` ``[rows, n_bins]`` per group id (``[rows, n_bins]``, unused ids 0)."""
    rows, n = values.shape
    flat = (ids + n * np.arange(rows)[:, None]).reshape(-1)
    return np.bincount(flat, weights=values.reshape(-1), minlength=rows * n).reshape(rows, n)


def ace_rows(count, confidence_sum, correct_sum, min_bin_mass: float = MIN_BIN_MASS) -> np.ndarray:
    """ACE of each row of stacked histograms (``[rows, n_bins]`` each) over its ACE bins
    (:func:`ace_bin_groups`): ``[rows]``, NaN where a row is empty."""
    n, conf, corr = (np.atleast_2d(np.asarray(a, dtype=np.float64)) for a in (count, confidence_sum, correct_sum))
    ids = ace_bin_groups(n, min_bin_mass)
    n, conf, corr = _merged(n, ids), _merged(conf, ids), _merged(corr, ids)
    used = n > 0
    safe = np.where(used, n, 1.0)
    gap = np.where(used, np.abs(conf / safe - corr / safe), 0.0)
    k = used.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(k > 0, gap.sum(axis=1) / np.maximum(k, 1), np.nan)


def ace_from_bins(bins: CalibrationBins, min_bin_mass: float = MIN_BIN_MASS) -> float:
    """ACE from accumulated bins (``min_bin_mass=0``: the paper's eq. 11): mean over the ACE bins (equal-width bins merged to at
    least ``min_bin_mass`` of all items, :func:`ace_bin_groups`) of ``|confidence - accuracy|``."""
    if not (bins.count > 0).any():
        raise ValueError("ace_from_bins: all bins are empty")
    return float(ace_rows(bins.count, bins.confidence_sum, bins.correct_sum, min_bin_mass)[0])


def ace(correct, confidence, n_bins: int = 20, min_bin_mass: float = MIN_BIN_MASS) -> float:
    """Average Calibration Error in [0, 1]: ``n_bins`` equal-width bins, those holding
    less than ``min_bin_mass`` of the items merged with their neighbours (module docstring), every
    merged bin weighted equally. ``min_bin_mass=0``: the plain equal-width ACE, the paper's eq. 11."""
    return ace_from_bins(calibration_bins(correct, confidence, n_bins), min_bin_mass)


@dataclass(frozen=True, eq=False)
class ReliabilityDiagram:
    """Per ACE bin: edges ``[bins + 1]`` (on the equal-width grid), mean confidence, accuracy (NaN
    where empty), count."""

    bin_edges: np.ndarray
    confidence: np.ndarray
    accuracy: np.ndarray
    count: np.ndarray


def reliability_diagram(bins: CalibrationBins, min_bin_mass: float = MIN_BIN_MASS) -> ReliabilityDiagram:
    """The reliability diagram's data of accumulated bins (for plotting): one point per ACE bin
    (:func:`ace_bin_groups`), so the diagram shows the bins the ACE averages over, with their counts."""
    ids = ace_bin_groups(bins.count, min_bin_mass)
    groups, first = np.unique(ids, return_index=True)
    n = np.bincount(ids, weights=bins.count, minlength=ids.size)[groups]
    conf_sum = np.bincount(ids, weights=bins.confidence_sum, minlength=ids.size)[groups]
    corr_sum = np.bincount(ids, weights=bins.correct_sum, minlength=ids.size)[groups]
    with np.errstate(invalid="ignore", divide="ignore"):
        conf = np.where(n > 0, conf_sum / n, np.nan)
        acc = np.where(n > 0, corr_sum / n, np.nan)
    grid = np.linspace(0.0, 1.0, bins.n_bins + 1)
    edges = np.append(grid[first], 1.0)
    return ReliabilityDiagram(edges, conf, acc, np.rint(n).astype(np.int64))
