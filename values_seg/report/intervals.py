"""Confidence intervals in the report: a method's value over seeds with its bootstrap interval.

One seed: the results row's interval; several: the two-level bootstrap of the mean over seeds; the same
pooled distributions keep comparisons and rank histograms paired (docs/design-rationale.md,
"Confidence intervals in the report").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from values_seg.report.stats import mean_std
from values_seg.statistics import mean_over_seeds, percentile_interval, seed_indices

#: The results columns that identify a row of bootstrap.parquet.
SAMPLE_KEYS = ["dataset", "scenario", "seed", "backbone", "prediction_model", "measure", "versus", "aggregation",
               "task", "metric", "split"]
ROW = "bootstrap_row"  # results column: the row of Distributions.samples, -1 where none


@dataclass(frozen=True, eq=False)
class Distributions:
    """The run's stored bootstrap distributions ``samples`` ``[rows, B]`` and how they were drawn."""

    samples: np.ndarray
    level: float = 0.95
    seed: int = 0

    @property
    def n_resamples(self) -> int:
        return int(self.samples.shape[1])

    def pooled(self, rows) -> np.ndarray:
        """The distribution of the mean over the seeds whose distributions are ``rows``: the rows
        themselves for one seed, else the two-level bootstrap (same seed draws for the same number
        of seeds, so two methods pooled over the same seeds stay paired)."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size == 1:
            return self.samples[rows[0]]
        return mean_over_seeds(self.samples[rows], seed_indices(rows.size, self.n_resamples, self.seed))


def attach_rows(results: pd.DataFrame, keys: pd.DataFrame) -> pd.DataFrame:
    """``results`` with :data:`ROW`: the row of ``keys`` (bootstrap.parquet's key columns, in the
    order of its samples) with the same key, -1 where none."""
    out = results.copy()
    if keys is None or keys.empty:
        out[ROW] = -1
        return out
    index = keys[SAMPLE_KEYS].copy()
    index[ROW] = np.arange(len(index))
    index = index.drop_duplicates(SAMPLE_KEYS)
    merged = out[SAMPLE_KEYS].merge(index, on=SAMPLE_KEYS, how="left")
    out[ROW] = merged[ROW].fillna(-1).astype(np.int64).to_numpy()
    return out


def interval(group: pd.DataFrame, dist: Distributions | None) -> tuple[float, float]:
    """The interval of the mean over the seeds of one method's ``group`` of results rows (see the
    module docstring); ``(nan, nan)`` where there is none."""
    return _interval(*_columns(group), dist)


def _columns(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``value``, ``ci_low``, ``ci_high`` (NaN where missing) and :data:`ROW` (-1 where missing) as arrays."""
    nan = np.full(len(df), math.nan)
    values, low, high = (df[c].to_numpy(dtype=np.float64) if c in df else nan for c in ("value", "ci_low", "ci_high"))
    return values, low, high, df[ROW].to_numpy() if ROW in df else np.full(len(df), -1)


def _interval(values: np.ndarray, low: np.ndarray, high: np.ndarray, rows: np.ndarray,
              dist: Distributions | None) -> tuple[float, float]:
    finite = np.isfinite(values)
    if finite.sum() == 1:
        i = int(np.flatnonzero(finite)[0])
        if math.isfinite(low[i]) and math.isfinite(high[i]):
            return float(low[i]), float(high[i])
        return math.nan, math.nan
    if dist is None or finite.sum() == 0 or (rows < 0).any() or not finite.all():
        return math.nan, math.nan
    return percentile_interval(dist.pooled(rows), dist.level)


def summarise(df: pd.DataFrame, keys: list[str], dist: Distributions | None) -> pd.DataFrame:
    """Group ``df`` by ``keys`` (in order of appearance): ``keys + [mean, std, n, ci_low, ci_high]``
    (mean/std/n over seeds as :func:`values_seg.report.stats.mean_std`, the interval as
    :func:`interval`), from numpy columns (no pandas per group)."""
    columns = list(keys) + ["mean", "std", "n", "ci_low", "ci_high"]
    if df.empty:
        return pd.DataFrame(columns=columns)
    out, groups = group_rows(df, keys)
    values, low, high, rows = _columns(df)
    stats = [(*mean_std(values[g]), *_interval(values[g], low[g], high[g], rows[g], dist)) for g in groups]
    return pd.concat([out, pd.DataFrame(stats, columns=columns[len(keys):])], axis=1)


def group_rows(df: pd.DataFrame, keys: list[str]) -> tuple[pd.DataFrame, list[np.ndarray]]:
    """The groups of ``df`` by ``keys`` in order of appearance: their keys (a frame, one row per
    group) and each group's row positions, for numpy work per group (pandas' per-group
    aggregation costs more than the arithmetic)."""
    if df.empty:
        return df[list(keys)].reset_index(drop=True), []
    ids = df.groupby(list(keys), sort=False, dropna=False).ngroup().to_numpy()
    order = np.argsort(ids, kind="stable")
    starts = np.concatenate([[0], np.cumsum(np.bincount(ids))[:-1]])
    return df.iloc[order[starts]][list(keys)].reset_index(drop=True), np.split(order, starts[1:])
