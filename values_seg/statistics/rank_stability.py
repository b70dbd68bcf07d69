"""Ranking stability under bootstrap resampling (rank histograms), and Kendall's τ between two
rankings (docs/design-rationale.md, "Ranking stability").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

__all__ = ["ranks", "RankStability", "rank_stability", "kendall_tau"]


def ranks(values, higher_is_better: bool = True) -> np.ndarray:
    """Competition ranks (1 = best; ties share the best rank of their group, "1, 2, 2, 4") along
    the last axis: one plus the number of methods strictly better. NaN values rank last."""
    v = np.asarray(values, dtype=np.float64)
    if not higher_is_better:
        v = -v
    v = np.where(np.isnan(v), -np.inf, v)
    better = v[..., None, :] > v[..., :, None]  # [..., i, j]: j strictly better than i
    return 1 + better.sum(axis=-1)


@dataclass(frozen=True, eq=False)
class RankStability:
    """Per method (rows, in ``methods`` order): the observed rank and the rank histogram
    ``histogram[m, r - 1]`` = share of resamples in which method ``m`` has rank ``r``."""

    methods: tuple
    observed_rank: np.ndarray
    histogram: np.ndarray
    n_resamples: int

    @property
    def keep_rate(self) -> np.ndarray:
        """Share of resamples in which each method has its observed rank."""
        return self.histogram[np.arange(len(self.methods)), self.observed_rank - 1]

    def to_frame(self) -> pd.DataFrame:
        """Tidy histogram: one row per (method, rank) with ``share``, ``observed_rank`` and ``keep_rate``."""
        m = len(self.methods)
        return pd.DataFrame({
            "method": np.repeat(np.array(self.methods, dtype=object), m),
            "rank": np.tile(np.arange(1, m + 1), m),
            "share": self.histogram.reshape(-1),
            "observed_rank": np.repeat(self.observed_rank, m),
            "keep_rate": np.repeat(self.keep_rate, m),
        })


def rank_stability(samples, observed, methods: Sequence[str] | None = None, higher_is_better: bool = True) -> RankStability:
    """Rank histograms of ``M`` methods from their bootstrap distributions.

    ``samples``: ``[B, M]`` metric values, column ``m`` method ``m`` on the same ``B`` resamples;
    ``observed``: ``[M]`` values on all cases (defining the observed ranking). Resamples in
    which any method is undefined (NaN) are left out.
    """
    s = np.asarray(samples, dtype=np.float64)
    obs = np.asarray(observed, dtype=np.float64).reshape(-1)
    if s.ndim != 2 or s.shape[1] != obs.shape[0]:
        raise ValueError(f"samples must be [n_resamples, M] with M = len(observed) = {obs.shape[0]}, got {s.shape}")
    m = obs.shape[0]
    names = tuple(methods) if methods is not None else tuple(str(i) for i in range(m))
    if len(names) != m:
        raise ValueError(f"methods must name the {m} methods, got {len(names)} names")
    if np.isnan(obs).any():
        raise ValueError(f"observed values must be defined; NaN for {[n for n, v in zip(names, obs) if np.isnan(v)]}")
    s = s[~np.isnan(s).any(axis=1)]
    if s.shape[0] == 0:
        raise ValueError("rank_stability: no resample where every method is defined")
    r = ranks(s, higher_is_better)  # [B, M]
    hist = np.stack([np.bincount(r[:, j] - 1, minlength=m) for j in range(m)]) / s.shape[0]
    return RankStability(names, ranks(obs, higher_is_better), hist, int(s.shape[0]))


def _pair_signs(a: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """``sign(a[..., i] - a[..., j])`` as int8 (exact: compared, not subtracted)."""
    first, second = a[..., i], a[..., j]
    return (first > second).view(np.int8) - (first < second).view(np.int8)


def kendall_tau(x, y) -> np.ndarray | float:
    """Kendall's τ-b between two rankings (or scores) of the same methods, along the last axis.

    ``τ_b = (C - D) / sqrt((P - T_x)(P - T_y))`` over the ``P`` pairs (C concordant, D discordant,
    T tied pairs), = ``scipy.stats.kendalltau``; NaN where either ranking is constant. Leading
    axes broadcast (e.g. ``[B, M]`` bootstrap rankings against one ``[M]`` ranking). Orient both
    the same way (e.g. higher = better, or ranks).
    """
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.shape[-1] != b.shape[-1] or a.shape[-1] < 2:
        raise ValueError(f"kendall_tau: both rankings need the same number (>= 2) of methods, got {a.shape} and {b.shape}")
    if np.isnan(a).any() or np.isnan(b).any():
        raise ValueError("kendall_tau: rankings must not contain NaN")
    i, j = np.triu_indices(a.shape[-1], k=1)  # each pair once: i < j
    da, db = _pair_signs(a, i, j), _pair_signs(b, i, j)
    pairs = i.shape[0]
    s = np.einsum("...p,...p->...", da, db, dtype=np.int64)  # concordant - discordant
    untied_a, untied_b = (np.einsum("...p,...p->...", d, d, dtype=np.int64) for d in (da, db))  # d^2 = |d|
    denom = np.sqrt(untied_a.astype(np.float64) * untied_b)
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = np.where(denom > 0, s / np.where(denom > 0, denom, 1.0), np.nan)
    return float(tau) if tau.ndim == 0 else tau
