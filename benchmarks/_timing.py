"""Wall-time helpers shared by the benchmarks (each script runs from this folder, so ``import
_timing`` finds this module)."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
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


def evaluate_all(combos, cache: Path, eval_cfg, quantities: list[str]) -> tuple[tuple[float, float], dict]:
    """Evaluate every combination afresh (its predictions reused from ``cache``): ((wall seconds, this
    process's CPU seconds), {combination name: evaluation folder})."""
    from values_seg.evaluation.combination import run_evaluation

    shutil.rmtree(cache / "evaluations", ignore_errors=True)
    start, cpu = time.perf_counter(), time.process_time()
    folders = {c.name: run_evaluation(c, cache, eval_cfg, quantities, progress=False) for c in combos}
    return (time.perf_counter() - start, time.process_time() - cpu), folders


def score_all(combos, folders: dict, tasks: dict, bootstrap) -> dict[str, float]:
    """Seconds per task label to score (with its bootstrap) and draw the curves of a run's evaluations
    (``folders``: combination name -> evaluation folder), as the runner's scoring stage does."""
    from values_seg.evaluation.folder import load_evaluation

    seconds = {label: 0.0 for label in tasks}
    for c in combos:
        result = load_evaluation(folders[c.name], c)
        for label, task in tasks.items():
            start = time.perf_counter()
            bootstrap.attach(task, result, task.score(result))
            task.curves(result) if hasattr(task, "curves") else None
            seconds[label] += time.perf_counter() - start
    return seconds


def as_the_workers_allocate(small_pages: bool) -> None:
    """Start this script again with glibc's huge-page tunable, as the run's worker processes get it
    (:func:`values_seg.runtime.allocator.huge_pages`; glibc reads it at start-up only), unless it is set or
    ``small_pages`` asks to measure without it."""
    from values_seg.runtime.allocator import with_huge_pages

    tunables = os.environ.get("GLIBC_TUNABLES")
    if not small_pages and tunables != with_huge_pages(tunables):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "GLIBC_TUNABLES": with_huge_pages(tunables)})
