"""What the report knows about a run's components: read from the run directory, never hard-coded.

:class:`ReportSpec` is built from ``components.json`` (:mod:`values_seg.runner.declarations`); what it holds
and how an unknown component falls back: docs/design-rationale.md, "What the report knows of the components".
"""

from __future__ import annotations

import json
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from values_seg.orientation import LOWER_IS_UNCERTAIN
from values_seg.storage.run_files import COMPONENTS

HIGHER, LOWER = "higher", "lower"
ALL_TYPES = ("PU", "AU", "EU")
#: the framework's own vocabularies, in display order
FIXED_ORDERS = {"uncertainty_type": ALL_TYPES, "split": ("iid", "ood", "all"), "subset": ("iid", "ood")}
FIXED_LABELS = {"split": {"iid": "i.i.d.", "ood": "OoD", "all": ""}, "subset": {"iid": "i.i.d.", "ood": "OoD"}}
#: column / axis names of the components
COMPONENT_NAMES = {
    "backbone": "Backbone",
    "prediction_model": "Prediction model",
    "measure": "Uncertainty measure",
    "uncertainty_type": "Uncertainty type",
    "aggregation": "Aggregation",
}
#: Components of Figure 3 (the backbone joins when a scenario has more than one).
FIGURE3_COMPONENTS = ("uncertainty_type", "prediction_model", "aggregation", "backbone")
DECLARATIONS = COMPONENTS


def natural_key(value) -> tuple:
    """Sort key that orders "toy_2" before "toy_10" and numbers numerically."""
    return _natural_key(str(value))


@functools.lru_cache(maxsize=None)  # a report sorts the same few labels tens of thousands of times
def _natural_key(text: str) -> tuple:
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text))


@dataclass(frozen=True)
class MetricSpec:
    """A task metric as the report shows it: a column group of the downstream table (paper
    Tables 5-6) and a panel of Figure 3."""

    group: str  # the task's label
    task: str
    metric: str
    label: str
    direction: str | None = None
    per_measure: bool = True
    per_aggregation: bool = True

    @property
    def title(self) -> str:
        """E.g. "OoD-D: AUROC"."""
        return f"{self.group}: {self.label}" if self.group else self.label


@dataclass
class ReportSpec:
    """Labels, orders, metric directions and task suitability of one run (see the module docstring)."""

    components: dict[str, list[dict]] = field(default_factory=dict)
    recipe: dict = field(default_factory=dict)  # the resolved training recipe (empty: not recorded)

    @classmethod
    def load(cls, run_dir: str | Path, notes: list[str] | None = None) -> "ReportSpec":
        path = Path(run_dir) / DECLARATIONS
        if not path.exists():
            if notes is not None:
                notes.append(f"No `{DECLARATIONS}`: component names are shown as they are, metric directions are "
                             "unknown and Figure 3 is skipped.")
            return cls()
        try:
            data = json.loads(path.read_text())
            return cls(dict(data["components"]), dict(data.get("recipe") or {}))
        except Exception as e:  # an unreadable optional file must not stop the report
            if notes is not None:
                notes.append(f"`{DECLARATIONS}` could not be read ({type(e).__name__}: {e}); using names as they are.")
            return cls()

    # -- components ------------------------------------------------------------------------
    def _entries(self, kind: str) -> list[dict]:
        return self.components.get(kind, [])

    def entry(self, kind: str, label: str) -> dict | None:
        return next((e for e in self._entries(kind) if e.get("label") == label), None)

    def label(self, kind: str, value) -> str:
        """Display label of a component (its declared label), else the value itself."""
        if value is None:
            return ""
        if kind in FIXED_LABELS:
            return FIXED_LABELS[kind].get(value, str(value))
        e = self.entry(kind, value)
        return str(e.get("display") or value) if e else str(value)

    def class_name(self, dataset: str, index: int) -> str:
        """Class ``index`` of ``dataset`` by its name where the run recorded them, else its index."""
        names = (self.entry("dataset", dataset) or {}).get("class_names") or []
        return str(names[index]) if 0 <= index < len(names) else str(index)

    def order_key(self, kind: str, value) -> tuple:
        value = "" if value is None else value
        order = FIXED_ORDERS.get(kind) or [e.get("label") for e in self._entries(kind)]
        if value in order:
            return (0, list(order).index(value), ())
        return (1, 0, natural_key(value))

    def ordered(self, kind: str, values) -> list:
        """Unique values in the run's order of ``kind`` (the config's; unknown names after, natural order)."""
        return sorted(set(values), key=lambda v: self.order_key(kind, v))

    def inverted(self, aggregation: str) -> bool:
        """Whether the aggregation declares the inverted orientation (lower score = more uncertain,
        :mod:`values_seg.orientation`); an undeclared one (an older run) has the usual orientation."""
        e = self.entry("aggregation", aggregation)
        return bool(e) and e.get("orientation") == LOWER_IS_UNCERTAIN

    def glossary(self) -> str:
        """One line spelling out the display labels used in tables and figures."""
        parts = []
        for kind in ("prediction_model", "measure", "aggregation"):
            parts += [f"{e['display']} = {e['label']}" for e in self._entries(kind) if e.get("display") != e.get("label")]
        text = ", ".join(parts)
        return (text + "; " if text else "") + "PU/AU/EU = predictive/aleatoric/epistemic uncertainty."

    # -- tasks and metrics -------------------------------------------------------------------
    def _task(self, task: str) -> dict | None:
        return self.entry("task", task)

    def metric(self, task: str, metric: str) -> dict | None:
        t = self._task(task)
        return next((m for m in (t or {}).get("metrics", []) if m.get("name") == metric), None)

    def direction(self, task: str, metric: str) -> str | None:
        m = self.metric(task, metric)
        return m.get("direction") if m else None

    def arrow(self, task: str, metric: str) -> str:
        """"↑" (higher is better), "↓" (lower is better) or "" (unknown)."""
        return {HIGHER: "↑", LOWER: "↓"}.get(self.direction(task, metric), "")

    def task_labels(self, name: str) -> list[str]:
        """The labels (``task`` column values) of the configured tasks with registry ``name``."""
        labels = [e["label"] for e in self._entries("task") if e.get("name") == name]
        return labels or ([name] if not self._entries("task") else [])

    def metric_order_key(self, task: str, metric: str, split: str = "") -> tuple:
        """Sort key of a task's metric: the config's task order, the task's declaration order, the split."""
        tasks = [e.get("label") for e in self._entries("task")]
        t = self._task(task)
        names = [m.get("name") for m in (t or {}).get("metrics", [])]
        return (tasks.index(task) if task in tasks else len(tasks), natural_key(task),
                names.index(metric) if metric in names else len(names), natural_key(metric),
                self.order_key("split", split))

    def reference_metric(self, task: str, metric: str) -> str | None:
        """The metric of ``task`` declared as ``metric``'s reference value (``reference_of``), if any."""
        t = self._task(task)
        return next((m["name"] for m in (t or {}).get("metrics", []) if m.get("reference_of") == metric), None)

    def is_reference(self, task: str, metric: str) -> bool:
        """Whether ``metric`` is declared as another metric's reference value (left out of comparisons)."""
        m = self.metric(task, metric)
        return bool(m and m.get("reference_of"))

    def suited_types(self, task: str) -> tuple[str, ...]:
        t = self._task(task)
        return tuple(t.get("uncertainty_types") or ALL_TYPES) if t else ALL_TYPES

    def _spec(self, task: dict, m: dict) -> MetricSpec:
        return MetricSpec(task.get("display") or task.get("label") or task["label"], task["label"], m["name"],
                          m.get("label") or m["name"], m.get("direction"), bool(m.get("per_measure", True)),
                          bool(m.get("per_aggregation", True)))

    def metric_spec(self, task: str, metric: str) -> MetricSpec:
        """The :class:`MetricSpec` of a task's metric (names as they are where undeclared)."""
        t, m = self._task(task), self.metric(task, metric)
        return self._spec(t, m) if t and m else MetricSpec(task, task, metric, metric)

    def table_metrics(self, results: pd.DataFrame | None = None) -> list[MetricSpec]:
        """Columns of the downstream table: every declared table metric in task (config) order,
        then undeclared (task, metric) pairs found in ``results``."""
        out = [self._spec(t, m) for t in self._entries("task") for m in t.get("metrics", []) if m.get("table", True)]
        if results is not None and not results.empty:
            known = {(t["label"], m["name"]) for t in self._entries("task") for m in t.get("metrics", [])}
            pairs = results[["task", "metric"]].drop_duplicates().itertuples(index=False)
            out += [MetricSpec(task, task, metric, metric) for task, metric in
                    sorted(pairs, key=lambda p: (natural_key(p[0]), natural_key(p[1]))) if (task, metric) not in known]
        return out

    def separation_metrics(self, role: str) -> list[MetricSpec]:
        """The metrics whose declared ``separation_role`` is ``role`` ("AU", "EU", "AU-EU" or "EU-AU";
        :attr:`values_seg.components.task.Reading.separation_role`), in task (config) order."""
        return [self._spec(t, m) for t in self._entries("task") for m in t.get("metrics", [])
                if m.get("separation_role") == role]

    def predates(self, metric_field: str) -> bool:
        """Whether some declared metric lacks ``metric_field`` (``components.json`` written by an older version)."""
        return any(metric_field not in m for t in self._entries("task") for m in t.get("metrics", []))

    def figure3_metrics(self) -> list[MetricSpec]:
        """The panels of Figure 3: each task's primary metric where it depends on the measure."""
        return [self._spec(t, m) for t in self._entries("task") for m in t.get("metrics", [])
                if m.get("primary") and m.get("per_measure", True)]
