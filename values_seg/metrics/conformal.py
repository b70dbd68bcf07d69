"""Guarantees with a finite-sample proof: conformal risk control of the false-negative rate
(Angelopoulos, Bates et al., ICLR 2024) and risk-controlled selection of cases (Bates et al. 2021;
Learn then Test, Angelopoulos et al. 2021, with the Hoeffding–Bentkus p-value).

The sets, their loss and the exact threshold: docs/design-rationale.md, "Conformal risk control".
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from values_seg.metrics._validation import to_numpy

#: Tolerance of the comparison ``bound <= α`` (float sums of rational losses; exact up to it).
_TOL = 1e-12


def check_level(value: float, name: str) -> float:
    """``value`` as a float in the open interval (0, 1), else a ``ValueError`` naming ``name``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}") from None
    if not 0.0 < v < 1.0:
        raise ValueError(f"{name} must lie in (0, 1), got {value!r}")
    return v


def min_calibration_cases(alpha: float) -> int:
    """The fewest calibration cases with which conformal risk control of a loss in [0, 1] can reach
    level ``alpha``: the smallest ``n`` with ``1/(n+1) <= alpha``."""
    alpha = check_level(alpha, "alpha")
    n = max(math.ceil(1.0 / alpha - 1.0 - _TOL), 1)
    return n


def crc_effective_level(alpha: float, n: int) -> float:
    """The level the calibrated threshold holds the ``n`` calibration cases' mean loss to:
    ``(α (n+1) − 1) / n`` (from ``n/(n+1)·L + 1/(n+1) <= α``), below ``α`` by ``(1 − α)/n``, the
    finite-sample correction; ``ValueError`` below :func:`min_calibration_cases`."""
    alpha = check_level(alpha, "alpha")
    if int(n) != n or n < min_calibration_cases(alpha):
        raise ValueError(f"crc_effective_level: n must be an integer >= {min_calibration_cases(alpha)} at alpha = "
                         f"{alpha:g}, got {n!r}")
    return max((alpha * (n + 1.0) - 1.0) / n, 0.0)


def crc_exact(values, weights, n: int, alpha: float) -> float:
    """The conformal-risk-control threshold from the losses' jumps: the mean loss of the ``n``
    calibration cases at threshold ``t`` is ``sum(weights[values < t]) / n`` (``weights``: what a
    pixel adds to its case's loss once it leaves the set). Returns the largest ``t`` whose bound
    ``n/(n+1)·L(t) + 1/(n+1)`` is at most ``alpha`` (``+inf`` where every ``t`` is; see the module
    docstring). ``ValueError`` where ``n`` is below :func:`min_calibration_cases`."""
    alpha = check_level(alpha, "alpha")
    n = int(n)
    need = min_calibration_cases(alpha)
    if n < need:
        raise ValueError(f"conformal risk control at alpha={alpha:g} needs at least {need} calibration cases "
                         f"(1/(n+1) <= alpha), got {n}")
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    weights = np.asarray(weights, dtype=np.float64).reshape(-1)
    if values.shape != weights.shape:
        raise ValueError(f"values and weights differ in length ({values.size} vs {weights.size})")
    order = np.argsort(values, kind="stable")
    values, weights = values[order], weights[order]
    unique, first = np.unique(values, return_index=True)
    below = np.concatenate([[0.0], np.cumsum(weights)])  # below[k]: the weight of the k smallest values
    return _largest_feasible(unique, below[first] / n, below[-1] / n, n, alpha)


def _largest_feasible(unique: np.ndarray, risk: np.ndarray, risk_above: float, n: int, alpha: float) -> float:
    """The largest candidate whose CRC bound holds (``risk`` non-decreasing); ``+inf`` where the risk
    above every candidate (``risk_above``) holds too."""
    scale, offset = n / (n + 1.0), 1.0 / (n + 1.0)
    if scale * risk_above + offset <= alpha + _TOL:
        return math.inf
    feasible = int(np.count_nonzero(scale * risk + offset <= alpha + _TOL))
    return float(unique[feasible - 1])  # risk[0] = 0 is feasible (n >= min_calibration_cases)


def _rater_masks(target, shape: tuple, where: str) -> np.ndarray:
    """A case's rater masks as booleans ``[R, *spatial]`` (one mask of the score's shape is one rater)."""
    t = to_numpy(target, where)
    if t.dtype != np.bool_:
        f = t.astype(np.float64)
        if not np.isin(f, (0.0, 1.0)).all():
            raise ValueError(f"{where}: rater masks must be binary (0/1 or bool)")
        t = f.astype(bool)
    if t.shape == shape:
        t = t[None]
    if t.ndim != len(shape) + 1 or tuple(t.shape[1:]) != shape or t.shape[0] == 0:
        raise ValueError(f"{where}: expected a mask of shape {shape} or masks [R, *{shape}], got {t.shape}")
    return t


def fnr_jumps(scores: Sequence, targets: Sequence, raters: str | int = "mean"):
    """Per case, where its FNR jumps: ``(values, weights, case_index)`` over the reference-foreground
    pixels of each rater (a pixel of rater ``r`` of case ``i`` weighs ``1/(R·|Y_ir|)``, or ``1/|Y_ik|``
    for ``raters=k`` alone). ``ValueError`` on non-finite scores, shape mismatches and when every
    rater mask of every case is empty."""
    if len(scores) != len(targets):
        raise ValueError(f"scores and targets differ in length ({len(scores)} vs {len(targets)} cases)")
    if len(scores) == 0:
        raise ValueError("no calibration cases")
    values, weights, index = [], [], []
    for i, (score, target) in enumerate(zip(scores, targets)):
        s = np.asarray(to_numpy(score, f"scores[{i}]"), dtype=np.float64)
        if not np.isfinite(s).all():
            raise ValueError(f"scores[{i}]: contains {int((~np.isfinite(s)).sum())} NaN or infinite value(s)")
        masks = _rater_masks(target, s.shape, f"targets[{i}]")
        if raters != "mean":
            if not isinstance(raters, (int, np.integer)) or not 0 <= raters < masks.shape[0]:
                raise ValueError(f"raters must be 'mean' or a rater index in [0, {masks.shape[0]}), got {raters!r}")
            masks = masks[[int(raters)]]
        counts = masks.reshape(masks.shape[0], -1).sum(axis=1)
        for mask, count in zip(masks, counts):
            if count:
                values.append(s[mask])
                weights.append(np.full(int(count), 1.0 / (masks.shape[0] * count)))
                index.append(np.full(int(count), i))
    if not values:
        raise ValueError("every rater mask of every calibration case is empty: the false-negative rate is 0 for "
                         "any set, there is nothing to calibrate")
    return np.concatenate(values), np.concatenate(weights), np.concatenate(index)


def crc_threshold(scores: Sequence, targets: Sequence, alpha: float, raters: str | int = "mean") -> float:
    """Conformal risk control of the false-negative rate, exact (module docstring): the largest
    threshold ``t`` such that the sets ``{score >= t}`` of new exchangeable cases miss, in
    expectation, at most a share ``alpha`` of the reference foreground.

    ``scores``: per calibration case a score map (higher = more surely foreground; e.g. the mean
    foreground probability, then ``λ̂ = 1 - t``); ``targets``: per case its rater mask (same shape)
    or masks ``[R, *spatial]``; ``raters``: "mean" (loss = mean FNR over the raters) or a rater index.
    """
    alpha = check_level(alpha, "alpha")
    need = min_calibration_cases(alpha)
    if len(scores) < need:
        raise ValueError(f"conformal risk control at alpha={alpha:g} needs at least {need} calibration cases "
                         f"(1/(n+1) <= alpha), got {len(scores)}")
    values, weights, _ = fnr_jumps(scores, targets, raters)
    return crc_exact(values, weights, len(scores), alpha)


def fnr(scores: Sequence, targets: Sequence, threshold: float, raters: str | int = "mean") -> np.ndarray:
    """Per case, the false-negative rate of the set ``{score >= threshold}`` (mean over the raters, or
    one rater's; 0 where the reference is empty)."""
    out = np.zeros(len(scores))
    for i, (score, target) in enumerate(zip(scores, targets)):
        s = np.asarray(to_numpy(score, f"scores[{i}]"), dtype=np.float64)
        masks = _rater_masks(target, s.shape, f"targets[{i}]")
        if raters != "mean":
            masks = masks[[int(raters)]]
        rates = [np.count_nonzero(m & (s < threshold)) / m.sum() if m.any() else 0.0 for m in masks]
        out[i] = float(np.mean(rates))
    return out


def _h1(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bernoulli relative entropy ``a log(a/b) + (1-a) log((1-a)/(1-b))`` (``0 log 0 = 0``)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        first = np.where(a > 0, a * np.log(a / b), 0.0)
        second = np.where(a < 1, (1 - a) * np.log((1 - a) / (1 - b)), 0.0)
    return first + second


def hoeffding_bentkus_p_value(risk_hat, n, level: float) -> np.ndarray:
    """The Hoeffding–Bentkus p-value of the null "the risk exceeds ``level``" from a mean loss
    ``risk_hat`` in [0, 1] over ``n`` cases (Learn then Test, Angelopoulos et al. 2021, eq. 9):
    ``min(exp(-n·h1(min(R̂, level), level)), e·P(Bin(n, level) <= ceil(n·R̂)))``; 1 where ``n = 0``."""
    level = check_level(level, "risk level")
    r = np.asarray(risk_hat, dtype=np.float64)
    n = np.broadcast_to(np.asarray(n, dtype=np.float64), r.shape)
    hoeffding = np.exp(-n * _h1(np.minimum(r, level), np.full(r.shape, level)))
    from scipy.stats import binom  # here, not at import: scipy.stats is 0.4 s of every command's start

    bentkus = np.e * binom.cdf(np.ceil(n * r - 1e-9), n, level)
    return np.where(n > 0, np.minimum(np.minimum(hoeffding, bentkus), 1.0), 1.0)


def min_accepted_cases(max_risk: float, delta: float) -> int:
    """The fewest accepted calibration cases at which the Hoeffding–Bentkus p-value can reach ``delta``
    (all their losses 0): the smallest ``k`` with ``(1 - max_risk)^k <= delta``."""
    max_risk, delta = check_level(max_risk, "max_risk"), check_level(delta, "delta")
    return max(math.ceil(math.log(delta) / math.log(1.0 - max_risk) - 1e-9), 1)


def ltt_selection_threshold(risks, confidences, max_risk: float, delta: float, start: float = 0.5) -> float:
    """Risk-controlled selection (Learn then Test with the Hoeffding–Bentkus p-value, fixed-sequence
    testing; Bates et al. 2021, Angelopoulos et al. 2021): the lowest confidence threshold ``c`` such
    that the selective risk of the accepted cases (confidence >= c: the mean of their ``risks`` in
    [0, 1]) is at most ``max_risk`` with probability at least ``1 - delta``.

    Candidates are the distinct calibration confidences (ties accepted together); at ``c`` the null
    "selective risk > max_risk" gets the HB p-value of the mean risk of the ``k`` accepted cases (i.i.d.
    draws of the accepted distribution). The hypotheses are ordered by ``k`` before the data are seen:
    the sequence starts at the first candidate accepting at least ``start`` of the calibration cases
    (and at least :func:`min_accepted_cases`, below which no p-value reaches ``delta``), goes to more
    lenient thresholds and stops at the first p-value above ``delta`` (fixed-sequence testing controls
    the family-wise error at ``delta``). Starting at a share instead of the strictest threshold spends
    no test on a handful of cases, whose p-value cannot reach ``delta`` unless their risks are exactly 0;
    a method whose ``start`` most confident cases are already too risky accepts nothing. Returns
    ``+inf`` (accept nothing) where the first test fails."""
    max_risk, delta = check_level(max_risk, "max_risk"), check_level(delta, "delta")
    start = float(start)
    if not 0.0 <= start <= 1.0:
        raise ValueError(f"start must lie in [0, 1], got {start!r}")
    risks = np.asarray(to_numpy(risks, "risks"), dtype=np.float64).reshape(-1)
    confidences = np.asarray(to_numpy(confidences, "confidences"), dtype=np.float64).reshape(-1)
    if risks.shape != confidences.shape:
        raise ValueError(f"risks and confidences differ in length ({risks.size} vs {confidences.size})")
    if not (np.isfinite(risks).all() and np.isfinite(confidences).all()):
        raise ValueError("risks and confidences must be finite")
    if risks.size and (risks.min() < 0 or risks.max() > 1):
        raise ValueError("risks must lie in [0, 1] (the Hoeffding–Bentkus bound needs bounded losses)")
    order = np.argsort(-confidences, kind="stable")
    c, r = confidences[order], risks[order]
    # the last position of each distinct confidence (ties are accepted together)
    last = np.flatnonzero(np.r_[c[1:] != c[:-1], True]) if c.size else np.zeros(0, dtype=int)
    k = last + 1
    p = hoeffding_bentkus_p_value(np.cumsum(r)[last] / k, k, max_risk) if k.size else np.zeros(0)
    tested = k >= max(min_accepted_cases(max_risk, delta), math.ceil(start * risks.size - 1e-9))
    p, cand = p[tested], c[last][tested]
    rejected = np.cumprod(p <= delta).astype(bool)  # fixed sequence: stop at the first non-rejection
    return float(cand[rejected][-1]) if rejected.any() else math.inf


def ltt_multi_risk(losses, levels, delta: float, fwer: str = "bonferroni"):
    """Learn then Test for several risks at once over a grid of thresholds fixed before the data:
    ``losses`` ``[R, n, G]`` (per risk, calibration case and grid threshold, in [0, 1]), ``levels``
    ``[R]``. Threshold ``g`` is valid where every risk's Hoeffding–Bentkus p-value rejects "risk >
    level" (its p-value: the largest over the risks), with the family-wise error at ``delta``:
    ``fwer="bonferroni"`` (p <= delta / G) or ``"fixed_sequence"`` (grid order, stop at the first
    p > delta). Returns ``(p_values [R, G], p [G], valid [G] bool)``."""
    delta = check_level(delta, "delta")
    losses = np.asarray(losses, dtype=np.float64)
    if losses.ndim != 3 or losses.shape[1] == 0 or losses.shape[2] == 0:
        raise ValueError(f"losses must be [risks, cases, thresholds] with cases and thresholds, got {losses.shape}")
    if not np.isfinite(losses).all() or losses.min() < 0 or losses.max() > 1:
        raise ValueError("losses must be finite and lie in [0, 1] (the Hoeffding–Bentkus bound needs bounded losses)")
    levels = [check_level(a, "risk level") for a in np.atleast_1d(levels)]
    if len(levels) != losses.shape[0]:
        raise ValueError(f"{len(levels)} levels for {losses.shape[0]} risks")
    n = losses.shape[1]
    p_values = np.stack([hoeffding_bentkus_p_value(losses[r].mean(axis=0), n, a) for r, a in enumerate(levels)])
    p = p_values.max(axis=0)
    if fwer == "bonferroni":
        valid = p <= delta / p.size
    elif fwer == "fixed_sequence":
        valid = np.cumprod(p <= delta).astype(bool)
    else:
        raise ValueError(f"fwer must be 'bonferroni' or 'fixed_sequence', got {fwer!r}")
    return p_values, p, valid


class LossSteps:
    """Per case its loss at every candidate threshold, for many calibrations of the same cases at once
    (re-splits, several levels): ``losses[i, u]`` is case ``i``'s loss at ``t = candidates[u]``, the last
    column (``candidates[-1] = +inf``) its loss above every candidate. Built from the losses' jumps
    (:func:`fnr_jumps`: a case's loss at ``t`` is the sum of its ``weights`` of ``values < t``)."""

    def __init__(self, values, weights, case_index, n_cases: int):
        values = np.asarray(values, dtype=np.float64).reshape(-1)
        unique, position = np.unique(values, return_inverse=True)
        self.candidates = np.r_[unique, math.inf]
        size = self.candidates.size
        jumps = np.bincount(np.asarray(case_index, dtype=np.int64) * size + position.reshape(-1) + 1,
                            weights=np.asarray(weights, dtype=np.float64).reshape(-1), minlength=n_cases * size)
        # a jump at candidate u counts from candidate u + 1 on (values < t)
        self.losses = np.cumsum(jumps[: n_cases * size].reshape(n_cases, size), axis=1)
        self.n_cases = int(n_cases)

    def thresholds(self, calibration: np.ndarray, alpha: float) -> np.ndarray:
        """The CRC threshold's candidate index for each row of ``calibration`` (``[K, n_cases]`` booleans:
        which cases calibrate; the same count in every row); ``ValueError`` where too few cases."""
        alpha = check_level(alpha, "alpha")
        calibration = np.atleast_2d(np.asarray(calibration, dtype=bool))
        n = int(calibration[0].sum())
        need = min_calibration_cases(alpha)
        if n < need:
            raise ValueError(f"conformal risk control at alpha={alpha:g} needs at least {need} calibration cases "
                             f"(1/(n+1) <= alpha), got {n}")
        risk = calibration.astype(np.float64) @ self.losses / n  # [K, candidates], non-decreasing
        feasible = np.count_nonzero(n / (n + 1.0) * risk + 1.0 / (n + 1.0) <= alpha + _TOL, axis=1)
        return feasible - 1  # candidate 0 (risk 0) is always feasible

    def threshold(self, calibration, alpha: float) -> tuple[float, int]:
        """``(t̂, its candidate index)`` calibrated on the cases where ``calibration`` is true."""
        index = int(self.thresholds(np.asarray(calibration, dtype=bool)[None], alpha)[0])
        return float(self.candidates[index]), index

    def resplit_risks(self, pool, n_calibration: int, alpha: float, resplits: int, seed: int = 0) -> np.ndarray:
        """The realised mean loss on the held-out cases of ``pool`` (indices of exchangeable cases) over
        ``resplits`` random calibration/test splits with ``n_calibration`` calibration cases each."""
        pool = np.asarray(pool, dtype=np.int64)
        if not 0 < n_calibration < pool.size:
            raise ValueError(f"re-splits need 0 < calibration cases ({n_calibration}) < pooled cases ({pool.size})")
        rng = np.random.default_rng(seed)
        order = np.argsort(rng.random((int(resplits), pool.size)), axis=1)
        calibration = np.zeros((int(resplits), self.n_cases), dtype=bool)
        np.put_along_axis(calibration, pool[order[:, :n_calibration]], True, axis=1)
        test = np.zeros_like(calibration)
        np.put_along_axis(test, pool[order[:, n_calibration:]], True, axis=1)
        index = self.thresholds(calibration, alpha)
        at_threshold = self.losses[:, index].T  # [K, n_cases]: each case's loss at each split's threshold
        return (at_threshold * test).sum(axis=1) / test.sum(axis=1)
