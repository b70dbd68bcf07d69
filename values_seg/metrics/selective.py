"""Failure detection (paper appendix A.3, eq. 4-8, after Jaeger et al. 2023): risk-coverage, AURC, E-AURC.

Inputs are per case: ``risks`` (e.g. ``1 - Dice``, eq. 4) and ``confidences`` (the confidence
scoring function, e.g. the negative aggregated uncertainty; higher confidence = keep).

The curve uses as thresholds the UNIQUE confidence values sorted ascending, so cases with tied
confidence enter or leave together (one step of the curve). For each threshold ``τ``:
``coverage(τ) = #{g >= τ} / N`` (eq. 6) and ``risk(τ) = mean risk of {g >= τ}`` (eq. 5). A final
point at coverage 0 carries the risk of the last (highest-threshold) point. AURC is the
trapezoidal sum over consecutive points (eq. 7).
"""

from __future__ import annotations

import numpy as np

from values_seg.metrics._validation import as_float, same_length

__all__ = ["risk_coverage_curve", "aurc", "eaurc"]


def _check(risks, confidences, where: str) -> tuple[np.ndarray, np.ndarray]:
    r = as_float(risks, f"{where}: risks")
    c = as_float(confidences, f"{where}: confidences")
    return same_length(r, c, f"{where}: risks", f"{where}: confidences")


def _curve(r: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = r.shape[0]
    order = np.argsort(c, kind="stable")
    r_sorted = r[order]
    _, first = np.unique(c[order], return_index=True)  # start of each tie group, ascending
    # sum of risks of the cases kept at each threshold: suffix sums of the sorted risks
    suffix = np.cumsum(r_sorted[::-1])[::-1]
    kept = n - first
    coverage = np.r_[kept / n, 0.0]
    risk = suffix[first] / kept
    return coverage, np.r_[risk, risk[-1]]


def risk_coverage_curve(risks, confidences) -> tuple[np.ndarray, np.ndarray]:
    """Risk-coverage curve (eq. 5-6): ``(coverage, selective_risk)``, coverage from 1 down to 0.

    One point per unique confidence value (ascending thresholds), then ``(0, last risk)``.
    """
    r, c = _check(risks, confidences, "risk_coverage_curve")
    return _curve(r, c)


def _aurc(r: np.ndarray, c: np.ndarray) -> float:
    coverage, risk = _curve(r, c)
    return float(np.sum(-np.diff(coverage) * (risk[1:] + risk[:-1]) / 2.0))


def aurc(risks, confidences) -> float:
    """Area under the risk-coverage curve (eq. 7), trapezoidal over the curve's points."""
    r, c = _check(risks, confidences, "aurc")
    return _aurc(r, c)


def eaurc(risks, confidences) -> float:
    """Excess AURC (eq. 8): ``AURC(risks, confidences) - AURC(risks, -risks)`` (the oracle CSF).

    Non-negative whenever the confidences are distinct. With tied confidences the trapezoid
    interpolates across a tie group, which can fall below the oracle's curve, so small negative
    values are possible there (a property of the eq. 7 definition, not a numerical error).
    """
    r, c = _check(risks, confidences, "eaurc")
    return _aurc(r, c) - _aurc(r, -r)
