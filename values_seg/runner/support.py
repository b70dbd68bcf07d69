"""Whether the data support a metric row's value: claim no more than the data show.

A value the data cannot support is still written, marked ``supported = False`` with the reason in
``support_note``; when a row is not supported, the built-ins' case counts and :func:`gaps`:
docs/design-rationale.md, "What the data support".
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from values_seg.components.task import EvaluationResult, Metric, Task

SPLITS = ("iid", "ood", "all")
#: Below this many cases a zero-width interval says nothing: one or two cases show no spread to judge.
FEW_CASES = 3


def case_counts_note(metric: Metric, cases: pd.DataFrame, split: str) -> str:
    """Why ``cases`` (the test cases of ``split``) are too few for ``metric``; "" where enough."""
    n = len(cases)
    if n == 0:
        return f"no test case in split {split}"
    ood = int(cases["ood"].astype(bool).sum())
    counts = f"{n} test case(s)" if split != "all" else f"{n - ood} i.i.d. and {ood} OoD test case(s)"
    need = metric.support
    if n < need.min_cases:
        return f"{counts} in split {split}; the metric needs at least {need.min_cases}"
    if need.min_per_class and min(n - ood, ood) < need.min_per_class:
        return (f"{n - ood} i.i.d. and {ood} OoD test case(s) in split {split}; the metric needs at least "
                f"{need.min_per_class} of each")
    return ""


def exchangeable_note(cases: pd.DataFrame, split: str) -> str:
    """Why no guarantee covers the test cases ``cases`` of ``split`` (some are OoD, or declared not
    exchangeable with the validation split: column ``exchangeable`` False); "" where it does."""
    ood = cases["ood"].astype(bool).to_numpy()
    declared = cases["exchangeable"] if "exchangeable" in cases.columns else pd.Series(True, index=cases.index)
    declared = declared.astype(object).where(declared.notna(), True).astype(bool).to_numpy()
    outside = int((ood | ~declared).sum())
    if not outside:
        return ""
    why = [f"{k} {what}" for k, what in ((int(ood.sum()), "OoD"), (int((~ood & ~declared).sum()),
                                                                   "declared so by the dataset")) if k]
    return (f"no guarantee: {outside} of {len(cases)} test case(s) in split {split} not exchangeable with the "
            f"validation split ({', '.join(why)})")


class _Inputs:
    """The per-case inputs of one evaluation that metrics rank by, per split (built once)."""

    def __init__(self, result: EvaluationResult):
        self.result = result
        self._constant: dict[tuple, bool | None] = {}

    def constant(self, name: str, split: str, measure, aggregation) -> bool | None:
        """Whether input ``name`` is equal on every case of ``split`` (None where it is not known)."""
        key = (name, split, measure, aggregation) if name == "score" else (name, split)
        if key not in self._constant:
            self._constant[key] = self._is_constant(name, split, measure, aggregation)
        return self._constant[key]

    def _is_constant(self, name: str, split: str, measure, aggregation) -> bool | None:
        cases = self.result.test_cases(split)
        if name == "score":
            if not measure or not aggregation:
                return None
            scores = self.result.test_scores()
            scores = scores[(scores["measure"] == measure) & (scores["aggregation"] == aggregation)
                            & scores["case_id"].isin(cases["case_id"])]
            values = scores["score"].to_numpy(dtype=np.float64)
        elif name in cases.columns:
            values = pd.to_numeric(cases[name], errors="coerce").to_numpy(dtype=np.float64)
        else:
            return None
        values = values[np.isfinite(values)]
        return bool(values.size) and bool(values.max() == values.min())


def _varies_note(name: str) -> str:
    if name == "score":
        return "all scores tied: the uncertainty ranks no case above another"
    return f"every case has the same {name}: nothing to rank"


def assess(metric: Metric, row: dict, result: EvaluationResult, inputs: _Inputs | None = None) -> str:
    """Why the data cannot support ``row`` (a metric row of ``metric`` scored on ``result``); "" where they can."""
    value = row.get("value")
    if value is None or not math.isfinite(float(value)):
        return "no value: the task returned NaN"
    split = row.get("split")
    if split not in SPLITS:
        return ""
    cases = result.test_cases(split)
    note = case_counts_note(metric, cases, split)
    if note:
        return note
    if metric.support.exchangeable:
        note = exchangeable_note(cases, split)
        if note:
            return note
    inputs = inputs or _Inputs(result)
    for name in metric.support.varies:
        if inputs.constant(name, split, row.get("measure"), row.get("aggregation")):
            return _varies_note(name)
    low, high = row.get("ci_low"), row.get("ci_high")
    if (low is not None and high is not None and math.isfinite(low) and low == high and len(cases) < FEW_CASES):
        return f"zero-width interval from {len(cases)} test case(s)"
    return ""


def mark(task: Task, result: EvaluationResult, rows: list[dict]) -> list[dict]:
    """``rows`` (``task``'s score rows on ``result``, intervals attached) with ``supported`` and
    ``support_note`` (see the module docstring)."""
    declared = {m.name: m for m in task.metrics}
    inputs = _Inputs(result)
    for r in rows:
        metric = declared.get(r.get("metric")) or Metric(str(r.get("metric")), "higher")
        r["support_note"] = assess(metric, r, result, inputs)
        r["supported"] = not r["support_note"]
    return rows


def gaps(task: Task, result: EvaluationResult, rows: list[dict]) -> list[tuple[str, str, str]]:
    """``(metric, split, why)`` for each metric × split that ``task`` declares and for which
    ``rows`` (its score rows on ``result``) hold no finite value."""
    out = []
    for metric in task.metrics:
        for split in metric.splits:
            mine = [r for r in rows if r.get("metric") == metric.name and r.get("split") == split]
            if any(r.get("value") is not None and math.isfinite(float(r["value"])) for r in mine):
                continue
            if mine:
                out.append((metric.name, split, f"the task returned NaN on all its {len(mine)} row(s)"))
                continue
            note = case_counts_note(metric, result.test_cases(split), split) if split in SPLITS else ""
            out.append((metric.name, split, f"no rows: {note or 'the task returned none'}"))
    return out
