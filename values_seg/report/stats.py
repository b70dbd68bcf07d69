"""Statistics over seeds and number formatting shared by tables and figures.

Convention (documented in the report): mean and SAMPLE standard deviation (``ddof=1``) over the
seeds of a combination; non-finite values (e.g. an NCC that is undefined on a constant map) are
left out. With one seed there is no spread: the std is NaN and a cell shows the mean alone.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def mean_std(values) -> tuple[float, float, int]:
    """``(mean, std, n)`` of the finite values; std with ``ddof=1`` (NaN for n < 2)."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    v = v[np.isfinite(v)]
    n = int(v.size)
    if n == 0:
        return math.nan, math.nan, 0
    std = float(np.std(v, ddof=1)) if n > 1 else math.nan
    return float(v.mean()), std, n


def summarise(df: pd.DataFrame, keys: list[str], value: str = "value") -> pd.DataFrame:
    """Group ``df`` by ``keys`` and return ``keys + [mean, std, n]`` (see :func:`mean_std`)."""
    if df.empty:
        return pd.DataFrame(columns=list(keys) + ["mean", "std", "n"])
    rows = []
    for key, group in df.groupby(list(keys), sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        rows.append((*key, *mean_std(group[value].to_numpy())))
    return pd.DataFrame(rows, columns=list(keys) + ["mean", "std", "n"])


def format_mean_std(mean: float, std: float, n: int, scale: float = 100.0, digits: int = 2,
                    pm: str = " ± ") -> str:
    """"81.42 ± 0.28" (values × ``scale``); the mean alone for one seed; "n/a" when undefined."""
    if n == 0 or not math.isfinite(mean):
        return "n/a"
    text = f"{mean * scale:.{digits}f}"
    if n > 1 and math.isfinite(std):
        text += f"{pm}{std * scale:.{digits}f}"
    return text


def format_signed(value: float, digits: int = 2) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:+.{digits}f}"


def format_plain(value: float, digits: int = 2) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.{digits}f}"


def format_value(mean: float, std: float, n: int, low: float = math.nan, high: float = math.nan,
                 scale: float = 100.0, digits: int = 2) -> str:
    """"81.42 [79.10, 83.50]" (values × ``scale``) where there is a confidence interval, else
    :func:`format_mean_std` ("81.42 ± 0.28", or the mean alone for one seed)."""
    if n == 0 or not math.isfinite(mean):
        return "n/a"
    if math.isfinite(low) and math.isfinite(high):
        return f"{mean * scale:.{digits}f} [{low * scale:.{digits}f}, {high * scale:.{digits}f}]"
    return format_mean_std(mean, std, n, scale, digits)
