"""Bootstrap resamples shared by every method evaluated on the same test cases, and the two-level
bootstrap over seeds (docs/design-rationale.md, "Shared resamples").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from values_seg.statistics.bootstrap import _check_count, bootstrap_indices

__all__ = ["CaseResamples", "seed_indices", "mean_over_seeds"]


@dataclass(frozen=True, eq=False)
class CaseResamples:
    """``indices[b, j]``: the case (position in ``case_ids``) drawn for column ``j`` of resample ``b``,
    always a case of case ``j``'s stratum (``ood[j]``)."""

    case_ids: tuple[str, ...]
    ood: np.ndarray  # bool per case
    indices: np.ndarray  # [B, N] int64
    _of: dict = field(default_factory=dict, init=False, repr=False)

    @classmethod
    def draw(cls, case_ids: Sequence[str], ood, n_resamples: int = 1000, seed: int = 0) -> "CaseResamples":
        """Resamples of the cases ``case_ids`` (any order; drawn in sorted order) stratified by ``ood``."""
        ids = [str(c) for c in case_ids]
        flags = np.asarray(ood, dtype=bool).reshape(-1)
        if len(ids) != flags.shape[0]:
            raise ValueError(f"CaseResamples: {len(ids)} case ids but {flags.shape[0]} OoD flags")
        if len(set(ids)) != len(ids):
            dupes = sorted({c for c in ids if ids.count(c) > 1})
            raise ValueError(f"CaseResamples: duplicate case ids {dupes[:5]}")
        order = np.argsort(np.array(ids, dtype=object), kind="stable")
        ids = tuple(ids[i] for i in order)
        flags = flags[order]
        return cls(ids, flags, bootstrap_indices(len(ids), n_resamples, seed, strata=flags))

    @property
    def n_resamples(self) -> int:
        return int(self.indices.shape[0])

    def of(self, case_ids: Sequence[str]) -> np.ndarray:
        """Resample indices ``[B, n]`` into ``case_ids`` (positions in the given order) for a metric on
        those cases; they must be whole strata (all i.i.d., all OoD, or all cases). The same cases
        give the same (read-only) array, so statistics of one subset can share work."""
        key = tuple(case_ids)
        if key not in self._of:
            out = self._local(key)
            out.flags.writeable = False
            self._of[key] = out
        return self._of[key]

    def _local(self, case_ids: tuple) -> np.ndarray:
        position = {c: i for i, c in enumerate(self.case_ids)}
        missing = [c for c in case_ids if c not in position]
        if missing:
            raise ValueError(f"CaseResamples: case(s) {missing[:5]} are not among the {len(position)} resampled test cases")
        columns = np.array([position[c] for c in case_ids], dtype=np.int64)
        if columns.size == 0:
            raise ValueError("CaseResamples: no cases given")
        local = np.full(len(self.case_ids), -1, dtype=np.int64)
        local[columns] = np.arange(columns.size)
        out = local[self.indices[:, columns]]
        if (out < 0).any():
            raise ValueError("CaseResamples: the cases must be whole strata of the resampling (all i.i.d., all OoD "
                             f"or all {len(self.case_ids)} test cases), got {columns.size} cases")
        return out


def seed_indices(n_seeds: int, n_resamples: int = 1000, seed: int = 0) -> np.ndarray:
    """``[B, S]`` seeds (positions) drawn with replacement per resample; all 0 for one seed. The same
    arguments give the same draws, so means over seeds of two methods stay paired."""
    s = _check_count(n_seeds, "n_seeds", 1)
    b = _check_count(n_resamples, "n_resamples", 1)
    if s == 1:
        return np.zeros((b, 1), dtype=np.int64)
    return np.random.default_rng([int(seed), s]).integers(0, s, size=(b, s), dtype=np.int64)


def mean_over_seeds(samples, seeds: np.ndarray) -> np.ndarray:
    """The two-level bootstrap of a mean over seeds: ``samples`` ``[S, B]`` (seed ``s``'s metric on the
    case resamples), ``seeds`` from :func:`seed_indices` ``[B, S]``; returns ``[B]``: resample ``b``
    averages the drawn seeds' values on case resample ``b`` (NaN where one is undefined)."""
    x = np.asarray(samples, dtype=np.float64)
    idx = np.asarray(seeds)
    if x.ndim != 2 or idx.ndim != 2 or idx.shape[0] != x.shape[1] or idx.shape[1] != x.shape[0]:
        raise ValueError(f"mean_over_seeds: samples [S, B] and seeds [B, S] do not match: {x.shape}, {idx.shape}")
    return np.take_along_axis(x.T, idx, axis=1).mean(axis=1)
