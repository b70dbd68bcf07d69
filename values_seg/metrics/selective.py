"""Failure detection (paper appendix A.3, eq. 4-8, after Jaeger et al. 2023; Traub et al. 2024):
risk-coverage curves, AURC, E-AURC, AUGRC and E-AUGRC, as fd-shifts' ``rc_stats`` (commit c4467ae).

The definitions, ties, the derived bound on a negative E-AURC and the edge cases:
docs/design-rationale.md, "Failure detection".
"""

from __future__ import annotations

import numpy as np

from values_seg.metrics._validation import as_float, same_length

__all__ = [
    "risk_coverage_curve",
    "generalized_risk_coverage_curve",
    "aurc",
    "eaurc",
    "augrc",
    "eaugrc",
]


def _check(risks, confidences, where: str) -> tuple[np.ndarray, np.ndarray]:
    r = as_float(risks, f"{where}: risks")
    c = as_float(confidences, f"{where}: confidences")
    return same_length(r, c, f"{where}: risks", f"{where}: confidences")


def _curve(r: np.ndarray, c: np.ndarray, generalized: bool) -> tuple[np.ndarray, np.ndarray]:
    n = r.shape[0]
    order = np.argsort(c, kind="stable")
    _, first = np.unique(c[order], return_index=True)  # start of each tie group, ascending
    # sum of the risks kept at each threshold: suffix sums of the sorted risks
    kept_risk = np.cumsum(r[order][::-1])[::-1][first]
    kept = n - first
    coverage = np.r_[kept / n, 0.0]
    if generalized:
        return coverage, np.r_[kept_risk / n, 0.0]
    risk = kept_risk / kept
    return coverage, np.r_[risk, risk[-1]]


def risk_coverage_curve(risks, confidences) -> tuple[np.ndarray, np.ndarray]:
    """Risk-coverage curve (eq. 5-6): ``(coverage, selective_risk)``, coverage from 1 down to 0.

    One point per unique confidence value (ascending thresholds), then ``(0, last risk)``.
    """
    r, c = _check(risks, confidences, "risk_coverage_curve")
    return _curve(r, c, generalized=False)


def generalized_risk_coverage_curve(risks, confidences) -> tuple[np.ndarray, np.ndarray]:
    """Generalized-risk-coverage curve (Traub et al. 2024): ``(coverage, generalized_risk)``.

    One point per unique confidence value (ascending thresholds), then ``(0, 0)``; the
    generalized risk is the summed risk of the accepted cases divided by all N cases.
    """
    r, c = _check(risks, confidences, "generalized_risk_coverage_curve")
    return _curve(r, c, generalized=True)


def selective_areas(r: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """AURC and AUGRC of each row of ``r``, ``c`` (float64 ``[B, N]``, validated), each ``[B]``.

    Rows sorted by confidence; position ``j`` starts a curve point when its confidence differs
    from position ``j - 1``. Each point's trapezoid reaches to the next point (or to coverage 0).
    """
    B, n = r.shape
    # the order inside a tie group does not matter: only sums over whole groups are used
    order = np.argsort(c, axis=1) + (np.arange(B) * n)[:, None]
    rs, cs = r.reshape(-1)[order], c.reshape(-1)[order]
    kept_risk = np.cumsum(rs[:, ::-1], axis=1)[:, ::-1]  # [B, n]: summed risk of positions >= j
    pos = np.arange(n)
    start = np.ones((B, n), dtype=bool)
    start[:, 1:] = cs[:, 1:] != cs[:, :-1]
    # the next point after j: the smallest start > j, or n (the coverage-0 end point)
    nxt = np.full((B, n), n, dtype=np.int64)
    nxt[:, :-1] = np.minimum.accumulate(np.where(start, pos, n)[:, :0:-1], axis=1)[:, ::-1]
    at_end = nxt == n
    flat_next = np.minimum(nxt, n - 1) + (np.arange(B) * n)[:, None]
    selective = kept_risk / (n - pos)
    generalized = kept_risk / n
    sel_next = np.where(at_end, selective, selective.reshape(-1)[flat_next])
    gen_next = np.where(at_end, 0.0, generalized.reshape(-1)[flat_next])
    width = np.where(start, (nxt - pos) / n, 0.0)  # coverage drop to the next point
    aurc_rows = np.sum(width * (selective + sel_next), axis=1) / 2.0
    augrc_rows = np.sum(width * (generalized + gen_next), axis=1) / 2.0
    return aurc_rows, augrc_rows


def oracle_areas(r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """AURC and AUGRC of the oracle CSF for each row of ``r`` (float64 ``[B, N]``), each ``[B]``.

    Strict ranking by risk (fd-shifts' ``aurc_optimal``/``augrc_optimal``): the trapezoid over
    coverages ``k / N`` of the ``k`` smallest risks; rows with binary risks use the closed forms
    ``e + (1 - e) ln(1 - e)`` and ``e² / 2`` of the error rate ``e``.
    """
    n = r.shape[1]
    prefix = np.cumsum(np.sort(r, axis=1), axis=1)  # summed risk of the k most confident, k = 1..n
    selective = prefix / np.arange(1, n + 1)
    generalized = prefix / n
    # points at coverage k/n, k = n..1, then (0, selective[0]) resp. (0, 0)
    aurc_rows = (np.sum(selective[:, 1:] + selective[:, :-1], axis=1) / 2.0 + selective[:, 0]) / n
    augrc_rows = (np.sum(generalized[:, 1:] + generalized[:, :-1], axis=1) + generalized[:, 0]) / (2.0 * n)
    binary = ((r == 0.0) | (r == 1.0)).all(axis=1)
    if binary.any():
        e = r.mean(axis=1)
        closed = np.where(e < 1.0, e + (1.0 - e) * np.log1p(-np.where(e < 1.0, e, 0.0)), 1.0)
        aurc_rows = np.where(binary, closed, aurc_rows)
        augrc_rows = np.where(binary, 0.5 * e * e, augrc_rows)
    return aurc_rows, augrc_rows


def _rows(risks, confidences, where: str) -> tuple[np.ndarray, np.ndarray]:
    r, c = _check(risks, confidences, where)
    return r[None], c[None]


def aurc(risks, confidences) -> float:
    """Area under the risk-coverage curve (eq. 7), trapezoidal; a tie group is one curve step."""
    r, c = _rows(risks, confidences, "aurc")
    return float(selective_areas(r, c)[0][0])


def eaurc(risks, confidences) -> float:
    """Excess AURC (eq. 8): ``AURC(risks, confidences) - AURC(oracle)``.

    The oracle ranks the cases strictly by risk (ties in risk broken arbitrarily, which changes
    none of its selective risks); for binary risks its AURC is ``e + (1 - e) ln(1 - e)`` with
    ``e`` the error rate (Geifman et al. 2019), as fd-shifts' ``aurc_optimal``. Can be negative
    when confidences tie (the trapezoid interpolates across the tie group), by at most
    ``w (mean risk - lowest risk) / 2`` with ``w`` the largest tie group's share of the cases,
    and, by O(1/N²), for a perfect ranking of binary risks (the closed form is the continuous
    limit). See the module docstring.
    """
    r, c = _rows(risks, confidences, "eaurc")
    return float(selective_areas(r, c)[0][0] - oracle_areas(r)[0][0])


def augrc(risks, confidences) -> float:
    """Area under the generalized-risk-coverage curve (Traub et al. 2024), trapezoidal.

    A tie group in confidence is one curve step, as in fd-shifts' ``rc_stats``.
    """
    r, c = _rows(risks, confidences, "augrc")
    return float(selective_areas(r, c)[1][0])


def eaugrc(risks, confidences) -> float:
    """Excess AUGRC: ``AUGRC(risks, confidences) - AUGRC(oracle)``, the oracle as in :func:`eaurc`.

    For binary risks the oracle's AUGRC is ``e² / 2`` (exact for any N). Never negative: the
    oracle's generalized risk is convex in the number of cases kept, so the chord across a tie
    group lies above it (module docstring).
    """
    r, c = _rows(risks, confidences, "eaugrc")
    return float(selective_areas(r, c)[1][0] - oracle_areas(r)[1][0])
