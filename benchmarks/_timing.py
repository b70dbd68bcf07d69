"""Wall-time helpers shared by the benchmarks (each script runs from this folder, so ``import
_timing`` finds this module)."""

from __future__ import annotations

import time
from typing import Callable

import numpy as np


def times(fn: Callable[[], object], repeats: int) -> list[float]:
    """Wall seconds of ``repeats`` calls of ``fn``."""
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def median_time(fn: Callable[[], object], repeats: int) -> float:
    return float(np.median(times(fn, repeats)))


def best_time(fn: Callable[[], object], repeats: int) -> float:
    """The least disturbed by other load, for both sides of a comparison alike."""
    return min(times(fn, repeats))
