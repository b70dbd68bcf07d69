"""Bootstrap over test cases: resampling indices, percentile intervals, paired comparisons (Efron &
Tibshirani 1993). What a statistic is: docs/design-rationale.md, "The bootstrap".
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

__all__ = [
    "bootstrap_indices",
    "resample_counts",
    "percentile_interval",
    "BootstrapResult",
    "bootstrap",
    "PairedBootstrapResult",
    "paired_bootstrap",
    "paired_result",
    "paired_p_value",
]

Statistic = Callable[[np.ndarray], np.ndarray]


def _check_count(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def bootstrap_indices(n_cases: int, n_resamples: int = 1000, seed: int = 0, strata=None) -> np.ndarray:
    """Case indices of ``n_resamples`` bootstrap resamples, ``[n_resamples, n_cases]`` int64.

    Each row draws ``n_cases`` cases with replacement. With ``strata`` (one label per case, e.g.
    the i.i.d./OoD flag) the draw is stratified: column ``j`` is drawn from the cases of case
    ``j``'s stratum, so every resample keeps the stratum sizes (and an AUROC both classes).
    Seeded (``numpy.random.default_rng(seed)``): the same arguments give the same indices.
    """
    n = _check_count(n_cases, "n_cases", 1)
    b = _check_count(n_resamples, "n_resamples", 1)
    rng = np.random.default_rng(seed)
    if strata is None:
        return rng.integers(0, n, size=(b, n), dtype=np.int64)
    labels = np.asarray(strata).reshape(-1)
    if labels.shape[0] != n:
        raise ValueError(f"strata must have one label per case ({n}), got {labels.shape[0]}")
    indices = np.empty((b, n), dtype=np.int64)
    for value in np.unique(labels):  # a few strata: the draw within each is vectorised
        members = np.flatnonzero(labels == value)
        indices[:, members] = members[rng.integers(0, members.shape[0], size=(b, members.shape[0]))]
    return indices


def check_indices(indices, n_cases: int) -> np.ndarray:
    """``indices`` as an int64 ``[B, n]`` array of case indices in ``[0, n_cases)``; ``ValueError`` otherwise."""
    idx = np.asarray(indices)
    if idx.ndim != 2 or idx.shape[1] == 0 or not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(f"indices must be a non-empty integer array [n_resamples, n], got {idx.dtype} {idx.shape}")
    if idx.min() < 0 or idx.max() >= n_cases:
        raise ValueError(f"indices must lie in [0, {n_cases}) (the number of cases), found {idx.min()}..{idx.max()}")
    return idx.astype(np.int64, copy=False)


def resample_counts(indices, n_cases: int) -> np.ndarray:
    """How often each case occurs in each resample, ``[B, n_cases]`` int64 (one ``bincount``)."""
    idx = check_indices(indices, n_cases)
    b = idx.shape[0]
    flat = (idx + (np.arange(b, dtype=np.int64) * n_cases)[:, None]).reshape(-1)
    return np.bincount(flat, minlength=b * n_cases).reshape(b, n_cases)


def percentile_interval(samples, level: float = 0.95) -> tuple:
    """The central ``level`` percentile interval of bootstrap ``samples`` along axis 0.

    Undefined resamples (NaN, e.g. an AUROC without both classes) are left out; where every
    resample is NaN the interval is ``(nan, nan)``. Returns floats for 1-D samples, arrays
    otherwise (linear interpolation between order statistics, ``numpy.nanquantile``).
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    s = np.asarray(samples, dtype=np.float64)
    tail = (1.0 - level) / 2.0
    if not np.isnan(s).any():  # the same numbers up to rounding; nanquantile goes column by column
        low, high = np.quantile(s, [tail, 1.0 - tail], axis=0)
    else:
        with warnings.catch_warnings():  # an all-NaN column gives NaN, which is the answer
            warnings.simplefilter("ignore", RuntimeWarning)
            low, high = np.nanquantile(s, [tail, 1.0 - tail], axis=0)
    if s.ndim == 1:
        return float(low), float(high)
    return low, high


@dataclass(frozen=True, eq=False)
class BootstrapResult:
    """A metric on all cases (``value``), its percentile interval and the resampled values ``[B]``."""

    value: float
    ci_low: float
    ci_high: float
    samples: np.ndarray = field(repr=False)


def _point(statistic: Statistic, n: int) -> float:
    return float(np.asarray(statistic(np.arange(n, dtype=np.int64)[None]), dtype=np.float64).reshape(-1)[0])


def _run(statistic: Statistic, indices: np.ndarray, name: str) -> np.ndarray:
    out = np.asarray(statistic(indices), dtype=np.float64).reshape(-1)
    if out.shape[0] != indices.shape[0]:
        raise ValueError(f"{name} must return one value per resample ({indices.shape[0]}), got {out.shape[0]}")
    return out


def bootstrap(
    statistic: Statistic,
    n_cases: int,
    *,
    strata=None,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> BootstrapResult:
    """Percentile bootstrap interval of ``statistic`` over ``n_cases`` cases (stratified by ``strata``)."""
    idx = bootstrap_indices(n_cases, n_resamples, seed, strata)
    samples = _run(statistic, idx, "statistic")
    low, high = percentile_interval(samples, level)
    return BootstrapResult(_point(statistic, idx.shape[1]), low, high, samples)


@dataclass(frozen=True, eq=False)
class PairedBootstrapResult:
    """``difference = a - b`` on all cases, its percentile interval, the two-sided ``p_value``
    and the resampled differences ``[B]``."""

    difference: float
    ci_low: float
    ci_high: float
    p_value: float
    samples: np.ndarray = field(repr=False)

    def significant(self, alpha: float = 0.05) -> bool:
        return bool(self.p_value < alpha)


def paired_bootstrap(
    statistic_a: Statistic,
    statistic_b: Statistic,
    n_cases: int,
    *,
    strata=None,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> PairedBootstrapResult:
    """Paired bootstrap of ``statistic_a - statistic_b`` (two methods on the SAME cases and resamples).

    Two-sided p-value by inverting the percentile interval (Efron & Tibshirani 1993, ch. 16):
    twice the smaller share of resampled differences on either side of 0,
    ``min(1, 2 (1 + min(#{d <= 0}, #{d >= 0})) / (B + 1))``, so that ``p < 1 - level`` where the
    interval excludes 0 (up to one order statistic). Undefined (NaN) resamples are left out.
    """
    idx = bootstrap_indices(n_cases, n_resamples, seed, strata)
    diff = _run(statistic_a, idx, "statistic_a") - _run(statistic_b, idx, "statistic_b")
    point = _point(statistic_a, idx.shape[1]) - _point(statistic_b, idx.shape[1])
    return paired_result(point, diff, level)


def paired_result(difference: float, samples, level: float = 0.95) -> PairedBootstrapResult:
    """The :class:`PairedBootstrapResult` of resampled differences ``samples`` ``[B]`` (``a - b`` on
    the same resamples, e.g. read back from stored bootstrap distributions) and the difference on
    all cases: percentile interval and the two-sided p-value of :func:`paired_bootstrap`."""
    diff = np.asarray(samples, dtype=np.float64).reshape(-1)
    low, high = percentile_interval(diff, level)
    return PairedBootstrapResult(float(difference), low, high, float(paired_p_value(diff)), diff)


def paired_p_value(samples) -> np.ndarray:
    """The two-sided p-value of :func:`paired_bootstrap` from resampled differences along the last
    axis (``[..., B]``: many pairs at once), NaN resamples left out (NaN where all are):
    ``min(1, 2 (1 + min(#{d <= 0}, #{d >= 0})) / (B + 1))``."""
    d = np.asarray(samples, dtype=np.float64)
    n = np.count_nonzero(~np.isnan(d), axis=-1)
    tail = np.minimum(np.count_nonzero(d <= 0, axis=-1), np.count_nonzero(d >= 0, axis=-1))  # NaN counts in neither
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, np.minimum(1.0, 2.0 * (1 + tail) / (n + 1)), np.nan)
