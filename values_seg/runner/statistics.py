"""Bootstrap confidence intervals of the task metrics (the config's ``statistics`` section), on
resamples that every method of a data set shares (docs/statistics.md; docs/design-rationale.md,
"Shared resamples").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from values_seg.storage import run_directory
from values_seg.storage.run_files import BOOTSTRAP
from values_seg.statistics import CaseResamples, percentile_interval
from values_seg.components.task import ROW_KEY, EvaluationResult, Task

#: Columns of bootstrap.parquet besides the resampled values (``samples``, one list per row).
KEY_COLUMNS = ["dataset", "scenario", "seed", "backbone", "prediction_model", "family", "measure", "versus",
               "uncertainty_type", "aggregation", "task", "metric", "split", "value"]


class Bootstrap:
    """Draws the case resamples once per data set and turns a task's bootstrap into row intervals."""

    def __init__(self, n_resamples: int = 1000, level: float = 0.95, seed: int = 0):
        self.n_resamples, self.level, self.seed = int(n_resamples), float(level), int(seed)
        self._drawn: dict[tuple, CaseResamples] = {}

    @property
    def enabled(self) -> bool:
        return self.n_resamples > 0

    def resamples(self, result: EvaluationResult) -> CaseResamples | None:
        """The resamples of ``result``'s test cases (the same object for the same cases)."""
        test = result.test_cases("all")
        if not self.enabled or test.empty:
            return None
        ids = tuple(test["case_id"].astype(str))
        ood = tuple(test["ood"].astype(bool))
        key = tuple(sorted(zip(ids, ood)))
        if key not in self._drawn:
            self._drawn[key] = CaseResamples.draw(ids, ood, self.n_resamples, self.seed)
        return self._drawn[key]

    def attach(self, task: Task, result: EvaluationResult, rows: list[dict]) -> list[dict]:
        """``rows`` (the task's score rows) with ``ci_low``/``ci_high`` and, where the task resampled
        them, ``samples``; raises what the task's bootstrap raises (the rows stay without interval)."""
        for r in rows:
            r.setdefault("ci_low", None)
            r.setdefault("ci_high", None)
        resamples = self.resamples(result)
        if resamples is None:
            return rows
        by_key = {}
        for s in task.bootstrap(result, resamples) or []:
            samples = np.asarray(s["samples"], dtype=np.float64).reshape(-1)
            if samples.shape[0] != resamples.n_resamples:
                raise ValueError(f"task {task.name!r}: bootstrap row {s.get('metric')!r} has {samples.shape[0]} "
                                 f"values, expected one per resample ({resamples.n_resamples})")
            by_key[tuple(s.get(k) for k in ROW_KEY)] = samples
        for r in rows:
            samples = by_key.get(tuple(r.get(k) for k in ROW_KEY))
            if samples is None:
                continue
            r["samples"] = samples
            r["ci_low"], r["ci_high"] = percentile_interval(samples, self.level)
        return rows


def write(run_dir: Path, results: list[dict]) -> None:
    """``bootstrap.parquet``: one row per result row with samples (its key, value and ``samples``,
    float32: half the size, ample for differences, intervals and ranks); removed when there are
    none and the framework wrote it (no stale distributions from an earlier run)."""
    path = Path(run_dir) / BOOTSTRAP
    rows = [r for r in results if r.get("samples") is not None]
    if not rows:
        run_directory.remove_written(run_dir, [path])
        return
    frame = pd.DataFrame({c: [r.get(c) for r in rows] for c in KEY_COLUMNS})
    frame["samples"] = [np.asarray(r["samples"], dtype=np.float32) for r in rows]  # intervals are taken in float64
    run_directory.write_owned(run_dir, path, lambda tmp: frame.to_parquet(tmp, index=False))
    run_directory.record(run_dir, [path])
