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


def score_all(combos, folders: dict, tasks: dict, bootstrap) -> dict[str, float]:
    """Seconds per task label to score (with its bootstrap) and draw the curves of a run's evaluations
    (``folders``: combination name -> evaluation folder), as the runner's scoring stage does."""
    from values_seg.runner.evaluation_store import load_evaluation

    seconds = {label: 0.0 for label in tasks}
    for c in combos:
        result = load_evaluation(folders[c.name], c)
        for label, task in tasks.items():
            start = time.perf_counter()
            bootstrap.attach(task, result, task.score(result))
            task.curves(result) if hasattr(task, "curves") else None
            seconds[label] += time.perf_counter() - start
    return seconds
