"""Metrics with the same value in every row of a run: shown once, named together ("AUGRC = Dice R-AUC").

Decided from the run's values (same methods, splits, seeds and direction; values equal to a relative
1e-9), never from the metrics' names (docs/design-rationale.md, "Identical metrics"; docs/statistics.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

#: The columns that identify a metric's row apart from its task and name.
ROW = ["dataset", "scenario", "seed", "backbone", "prediction_model", "measure", "versus", "aggregation", "split"]
RTOL, ATOL = 1e-9, 1e-12


@dataclass(frozen=True)
class IdenticalMetrics:
    """The groups of identical metrics, each ``((task, metric), ...)`` with its first in the run's
    task and declaration order (the one shown) and the labels to name them by."""

    groups: tuple[tuple[tuple[str, str], ...], ...] = ()
    labels: dict = field(default_factory=dict)  # (task, metric) -> its display label

    def hidden(self, task: str, metric: str) -> bool:
        """Whether the metric is shown under another of its group (not first)."""
        return any((task, metric) in g[1:] for g in self.groups)

    def group(self, task: str, metric: str) -> tuple[tuple[str, str], ...]:
        return next((g for g in self.groups if (task, metric) in g), ((task, metric),))

    def label(self, task: str, metric: str, own: str | None = None) -> str:
        """E.g. "AUGRC = Dice R-AUC": the labels of the metric's group; without one, ``own`` (default:
        its label as found)."""
        group = self.group(task, metric)
        if len(group) == 1 and own is not None:
            return own
        return " = ".join(dict.fromkeys(self.labels.get(k, k[1]) for k in group))

    def same(self, first: tuple[str, str], second: tuple[str, str]) -> bool:
        return first != second and second in self.group(*first)

    def text(self) -> str:
        """E.g. "AUGRC = Dice R-AUC"; "" without any group."""
        return "; ".join(self.label(*g[0]) for g in self.groups)


def identical_metrics(results: pd.DataFrame, spec) -> IdenticalMetrics:
    """The metrics of ``results`` identical on the run (see the module docstring)."""
    if results.empty:
        return IdenticalMetrics()
    order = {(t["label"], m["name"]): i for i, (t, m) in enumerate(
        (t, m) for t in spec.components.get("task", []) for m in t.get("metrics", []))}
    keyed = results.assign(**{c: results[c] if c in results else "" for c in ROW})
    series: dict[tuple[str, str], pd.Series] = {}
    for (task, metric), rows in keyed.groupby(["task", "metric"], sort=False):
        s = rows.set_index(ROW)["value"].astype(float)
        if s.index.is_unique and np.isfinite(s.to_numpy()).any():
            series[(task, metric)] = s.sort_index()
    by_rows: dict[tuple, list] = {}
    for key, s in series.items():  # candidates: the same rows
        by_rows.setdefault((len(s), hash(tuple(s.index))), []).append(key)
    groups = []
    for keys in by_rows.values():
        keys = sorted(keys, key=lambda k: (order.get(k, len(order)), k))
        while len(keys) > 1:
            first, rest = keys[0], keys[1:]
            a = series[first]
            same = [k for k in rest if series[k].index.equals(a.index)
                    and spec.direction(*k) == spec.direction(*first)
                    and np.allclose(series[k].to_numpy(), a.to_numpy(), rtol=RTOL, atol=ATOL, equal_nan=True)]
            if same:
                groups.append((first, *same))
            keys = [k for k in rest if k not in same]
    labels = {k: spec.metric_spec(*k).label for k in series}
    return IdenticalMetrics(tuple(groups), labels)
