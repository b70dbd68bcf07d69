"""Simulated reference values for the ACE (after Pernot 2024): the ACE a perfectly calibrated model
with the same confidences would get, simulated from the calibration histograms alone.

The simulation, its error bound and its assumption: docs/design-rationale.md, "The ACE reference".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from values_seg.metrics.calibration import MIN_BIN_MASS, CalibrationBins, _check_n_bins, ace_bin_groups, ace_from_bins

__all__ = ["coarsen_bins", "CalibrationReference", "ace_reference", "zeta_score"]


def coarsen_bins(bins: CalibrationBins, n_bins: int) -> CalibrationBins:
    """Merge consecutive bins of a finer histogram into ``n_bins`` equal-width bins.

    ``bins.n_bins`` must be a multiple of ``n_bins``; bin ``j`` of the result sums fine bins
    ``j f .. (j + 1) f - 1`` (``f`` the factor), which is the ``n_bins`` histogram of the same
    confidences (up to confidences within rounding of a bin edge).
    """
    n_bins = _check_n_bins(n_bins)
    if bins.n_bins % n_bins:
        raise ValueError(f"coarsen_bins: {bins.n_bins} bins cannot be merged into {n_bins} (not a multiple)")
    f = bins.n_bins // n_bins

    def merge(a):
        return a.reshape(n_bins, f).sum(axis=1)

    return CalibrationBins(merge(bins.count), merge(bins.confidence_sum), merge(bins.correct_sum))


@dataclass(frozen=True)
class CalibrationReference:
    """The observed ACE beside the ACE of a perfectly calibrated model with the same confidences.

    ``mean`` and ``std_error`` (standard deviation / sqrt(n_samples)) of the simulated ACE,
    ``ci_low``/``ci_high`` its central quantile interval, ``p_value`` the one-sided share
    ``(1 + #{simulated >= observed}) / (n_samples + 1)``; ``compatible`` when the observed ACE
    lies inside the interval (Pernot's interval test, eq. 19, on the simulated distribution).
    """

    observed: float
    mean: float
    std_error: float
    ci_low: float
    ci_high: float
    p_value: float
    n_samples: int

    @property
    def compatible(self) -> bool:
        return bool(self.ci_low <= self.observed <= self.ci_high)


def _integral_counts(count: np.ndarray) -> np.ndarray:
    rounded = np.rint(count)
    if (np.abs(count - rounded) > 1e-6 * np.maximum(1.0, rounded)).any() or (rounded < 0).any():
        raise ValueError("ace_reference: bin counts must be non-negative whole numbers (pixels counted, not weighted)")
    return rounded.astype(np.int64)


def ace_reference(
    bins: CalibrationBins, n_bins: int = 20, n_samples: int = 10000, level: float = 0.95, seed: int = 0,
    min_bin_mass: float = MIN_BIN_MASS,
) -> CalibrationReference:
    """The ACE (``n_bins`` bins merged to ``min_bin_mass``; ``0``: the paper's eq. 11) of ``bins`` and its simulated
    perfect-calibration reference, with the SAME binning as the ACE.

    ``bins``: accumulated :class:`CalibrationBins` with ``n_bins`` bins or a multiple of it (a
    finer histogram gives a closer reference; see the module docstring). Each non-empty fine bin
    draws its correct count from ``Binomial(count, confidence_sum / count)``; the draws are
    merged into the ACE bins (the ``n_bins`` equal-width bins merged to ``min_bin_mass``,
    :func:`~values_seg.metrics.ace_bin_groups`), whose counts and confidences are fixed, so the
    ACE bins are the observed ones. Seeded; vectorised over the ``n_samples`` draws.
    """
    if int(n_samples) != n_samples or n_samples < 2:
        raise ValueError(f"ace_reference: n_samples must be an integer >= 2, got {n_samples!r}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"ace_reference: level must lie in (0, 1), got {level!r}")
    coarse = coarsen_bins(bins, n_bins)
    observed = ace_from_bins(coarse, min_bin_mass)  # raises on an all-empty histogram
    count = _integral_counts(np.asarray(bins.count, dtype=np.float64))
    nonempty = np.flatnonzero(count > 0)
    n = count[nonempty]
    p = np.clip(np.asarray(bins.confidence_sum, dtype=np.float64)[nonempty] / n, 0.0, 1.0)
    rng = np.random.default_rng(seed)
    draws = rng.binomial(n, p, size=(int(n_samples), n.shape[0])).astype(np.float64)
    # merge the fine bins' draws into the ACE bins: one small matrix product
    factor = bins.n_bins // coarse.n_bins
    group = ace_bin_groups(coarse.count, min_bin_mass)  # the ACE bin of each coarse bin
    member = np.zeros((n.shape[0], coarse.n_bins))
    member[np.arange(n.shape[0]), group[nonempty // factor]] = 1.0
    correct = draws @ member  # [n_samples, ACE bins (by group id)]
    n_group = np.bincount(group, weights=coarse.count, minlength=coarse.n_bins)
    conf_group = np.bincount(group, weights=coarse.confidence_sum, minlength=coarse.n_bins)
    used = n_group > 0
    gaps = np.abs(conf_group[used] - correct[:, used]) / n_group[used]
    simulated = gaps.mean(axis=1)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(simulated, [tail, 1.0 - tail])
    return CalibrationReference(
        observed=observed,
        mean=float(simulated.mean()),
        std_error=float(simulated.std(ddof=1) / np.sqrt(n_samples)),
        ci_low=float(low),
        ci_high=float(high),
        p_value=float((1 + np.count_nonzero(simulated >= observed)) / (n_samples + 1)),
        n_samples=int(n_samples),
    )


def zeta_score(estimate: float, reference: float, interval: tuple[float, float]) -> float:
    """Pernot's standardised agreement score (eq. 20): ``|ζ| <= 1`` iff ``reference`` lies in ``interval``.

    ``(estimate - reference) / (high - estimate)`` when ``estimate <= reference``, else
    ``(estimate - reference) / (estimate - low)``; ``interval`` is a confidence interval of the
    estimate (e.g. a bootstrap interval of the observed ACE over cases, Pernot's eq. 23 with the
    simulated :attr:`CalibrationReference.mean` as reference).
    """
    low, high = (float(v) for v in interval)
    est, ref = float(estimate), float(reference)
    if not low <= est <= high:
        raise ValueError(f"zeta_score: the estimate {est} must lie inside its interval [{low}, {high}]")
    diff = est - ref
    if diff == 0:
        return 0.0
    width = (high - est) if diff < 0 else (est - low)
    return float(np.copysign(np.inf, diff)) if width == 0 else diff / width
