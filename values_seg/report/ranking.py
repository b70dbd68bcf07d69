"""Ranking stability and the agreement between a task's metrics.

Rank histograms over matched combinations (:func:`rank_histograms`, :func:`matched_blocks`) and Kendall's
τ between the method rankings of two metrics (:func:`metric_agreement`): docs/design-rationale.md,
"Rank histograms and metric agreement".
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from values_seg.report.common import left_out_text, scenarios, support_notes, supported_only
from values_seg.report.identical import IdenticalMetrics, identical_metrics
from values_seg.report.intervals import ROW, group_rows
from values_seg.report.rundir import RunData
from values_seg.report.spec import HIGHER, LOWER
from values_seg.statistics import kendall_tau, percentile_interval, rank_stability

COMPONENTS = ("prediction_model", "measure", "aggregation")
METHOD = ["backbone", "prediction_model", "measure", "aggregation"]
PART = ["dataset", "scenario", "task", "metric", "split"]  # one ranking's results: a Methods part


class Methods:
    """Per (scenario, task, metric, split): its methods (backbone, model, measure, aggregation) with
    the mean over seeds (``value``) and the index of their pooled distribution (``pooled``, into the
    list beside it; -1 without one). One pass over the results, shared by both analyses."""

    def __init__(self, run: RunData):
        self.run = run
        res = run.results
        res = res[(res["versus"] == "") & np.isfinite(res["value"].to_numpy(dtype=float))]
        if ROW not in res:
            res = res.assign(**{ROW: -1})
        res, self.left_out = supported_only(res, PART + METHOD)
        self.parts = dict(iter(res.groupby(PART, sort=False)))
        self._done: dict[tuple, tuple] = {}

    def get(self, scenario, task: str, metric: str, split: str) -> tuple[pd.DataFrame, list]:
        key = (scenario.dataset, scenario.scenario, task, metric, split)
        if key not in self._done:
            rows = self.parts.get(key)
            self._done[key] = _methods(self.run, rows) if rows is not None else (
                pd.DataFrame(columns=METHOD + ["value", "pooled"]), [])
        return self._done[key]

    def unsupported(self, scenario: str, task: str, metric: str, split: str) -> dict[str, str]:
        """Per aggregation with methods left out of a part (``scenario``: its title) as unsupported: "model ×
        measure: why" for each, "; "-joined."""
        rows = self.left_out
        title = rows["scenario"].where(rows["scenario"] != "", rows["dataset"])
        rows = rows[(title == scenario) & (rows["task"] == task) & (rows["metric"] == metric) & (rows["split"] == split)]
        out: dict[str, list] = {}
        for (model, measure, aggregation), why in support_notes(rows, METHOD[1:]).items():
            label = self.run.spec.label
            out.setdefault(aggregation, []).append(f"{label('prediction_model', model)} × {label('measure', measure)}: "
                                                   f"{why}")
        return {a: "; ".join(v) for a, v in out.items()}

    def left_out_text(self, metrics=None) -> str:
        """How many methods (of ``metrics``, (task, metric) pairs; all where None) are left out of the
        rankings because the data cannot support them, and why; "" where none."""
        rows = self.left_out
        if metrics is not None:
            rows = rows[[(t, m) in set(metrics) for t, m in zip(rows["task"], rows["metric"])]]
        return left_out_text(rows, PART + METHOD)


def _methods(run: RunData, rows: pd.DataFrame) -> tuple[pd.DataFrame, list]:
    dist = run.distributions
    keys, groups = group_rows(rows, METHOD)
    values, row_ids = rows["value"].to_numpy(dtype=float), rows[ROW].to_numpy()
    mean, index, pooled = [], [], []
    for g in groups:
        r = row_ids[g]
        ok = dist is not None and (r >= 0).all()
        if ok:
            pooled.append(dist.pooled(r))
        mean.append(float(values[g].mean()))
        index.append(len(pooled) - 1 if ok else -1)
    return keys.assign(value=mean, pooled=index), pooled


def rank_histograms(run: RunData, table: Methods | None = None) -> pd.DataFrame:
    """Tidy rank histograms (see the module docstring): scenario, task, metric, split, component,
    block, over (the combinations the block ranks over), n_matched (how many), left_out (the metric's
    methods in no block of the component), choice, rank, share, observed_rank, keep_rate, n_methods."""
    res, spec = run.results, run.spec
    out = []
    if run.distributions is None or res.empty:
        return pd.DataFrame(out)
    table = table or Methods(run)
    for sc in scenarios(res):
        for ms in spec.figure3_metrics() + [m for m in _model_level_primaries(run)]:
            if ms.direction not in (HIGHER, LOWER):
                continue
            for split in spec.ordered("split", [k[4] for k in table.parts if k[:4] == (sc.dataset, sc.scenario, ms.task,
                                                                                        ms.metric)]):
                methods, pooled = table.get(sc, ms.task, ms.metric, split)
                if methods.empty or (methods["pooled"] < 0).any():
                    continue
                for component in COMPONENTS:
                    blocks = matched_blocks(methods, component, spec)
                    covered = set().union(*(matched.index for _, matched in blocks))
                    left_out = int((methods[component] != "").sum()) - len(covered)
                    for block, (choices, matched) in enumerate(blocks):
                        frame = _block_ranks(matched, pooled, component, choices, ms.direction == HIGHER)
                        frame.insert(0, "left_out", left_out)
                        frame.insert(0, "n_matched", len(matched) // len(choices))
                        frame.insert(0, "over", over_text(matched, component, spec))
                        frame.insert(0, "block", block)
                        frame.insert(0, "component", component)
                        where = (("split", split), ("metric", ms.metric), ("task", ms.task), ("scenario", sc.title))
                        for k, v in where:
                            frame.insert(0, k, v)
                        frame["n_methods"] = len(matched)
                        out.append(frame)
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def matched_blocks(methods: pd.DataFrame, component: str, spec) -> list[tuple[list, pd.DataFrame]]:
    """The blocks in which the choices of ``component`` are compared over matched combinations:
    per set of (two or more) choices that occur together in a combination of the other components
    and is not part of a larger such set, those choices in every combination in which all of them
    occur. ``(choices in the run's order, their methods)`` per block, larger sets of choices first."""
    context = [c for c in METHOD if c != component]
    part = methods[methods[component] != ""]
    _, groups = group_rows(part, context)
    choice = part[component].to_numpy()
    present = [frozenset(choice[g]) for g in groups]
    sets = [c for c in dict.fromkeys(present) if len(c) >= 2]
    sets = [c for c in sets if not any(c < other for other in sets)]  # a subset of a larger block: not repeated
    blocks = []
    for chosen in sets:
        rows = np.concatenate([g[np.isin(choice[g], list(chosen))] for g, p in zip(groups, present) if chosen <= p])
        blocks.append((spec.ordered(component, chosen), part.iloc[np.sort(rows)]))
    return sorted(blocks, key=lambda b: (-len(b[0]), [spec.order_key(component, c) for c in b[0]]))


def _block_ranks(matched: pd.DataFrame, pooled: list, component: str, choices: list, higher: bool) -> pd.DataFrame:
    """One block's rank histogram: each choice's mean over the block's combinations, observed and per resample."""
    of = [matched[component] == c for c in choices]
    observed = [matched.loc[m, "value"].mean() for m in of]
    samples = np.stack([np.mean([pooled[i] for i in matched.loc[m, "pooled"]], axis=0) for m in of], axis=1)
    frame = rank_stability(samples, observed, choices, higher_is_better=higher).to_frame()
    return frame.rename(columns={"method": "choice"})


def over_text(matched: pd.DataFrame, component: str, spec) -> str:
    """The combinations a block ranks over, e.g. "Determ. × Patch, Thresh" (each other component's levels)."""
    parts = []
    for other in (c for c in METHOD if c != component):
        levels = [v for v in spec.ordered(other, matched[other].unique()) if v]
        if levels and (other != "backbone" or len(levels) > 1):
            parts.append(", ".join(spec.label(other, v) for v in levels))
    return " × ".join(parts)


def _model_level_primaries(run: RunData):
    """Primary metrics that do not depend on the measure (e.g. Dice): ranked over prediction models only."""
    spec = run.spec
    for t in spec.components.get("task", []):
        for m in t.get("metrics", []):
            if m.get("primary") and not m.get("per_measure", True):
                yield spec.metric_spec(t["label"], m["name"])


def left_out_of_agreement(spec) -> list[tuple[str, str]]:
    """The (task, metric) pairs Kendall's τ leaves out: reference values and baselines."""
    return [(t["label"], m["name"]) for t in spec.components.get("task", []) for m in t.get("metrics", [])
            if m.get("reference_of") or m.get("baseline_of")]


def metric_agreement(run: RunData, table: Methods | None = None, identical: IdenticalMetrics | None = None
                     ) -> pd.DataFrame:
    """Kendall's τ between the method rankings of each pair of a task's metrics (module docstring):
    scenario, task, split, metric_a, metric_b, label_a, label_b (a metric's label, with the metrics
    identical to it), tau, ci_low, ci_high, n_methods."""
    res, spec = run.results, run.spec
    rows = []
    if res.empty:
        return pd.DataFrame(rows)
    table = table or Methods(run)
    identical = identical_metrics(res, spec) if identical is None else identical
    left_out = set(left_out_of_agreement(spec))
    dist = run.distributions
    for sc in scenarios(res):
        def methods(task: str, metric: str, split: str):
            return table.get(sc, task, metric, split)

        for t in spec.components.get("task", []):
            metrics = [m for m in t.get("metrics", []) if (t["label"], m["name"]) not in left_out
                       and m.get("direction") in (HIGHER, LOWER)]
            for a, b in itertools.combinations(metrics, 2):
                if (a.get("per_measure", True), a.get("per_aggregation", True)) != \
                        (b.get("per_measure", True), b.get("per_aggregation", True)):
                    continue
                if identical.same((t["label"], a["name"]), (t["label"], b["name"])):
                    continue
                for split in sorted(set(a.get("splits", ())) & set(b.get("splits", ())),
                                    key=lambda s: spec.order_key("split", s)):
                    ra, pa = methods(t["label"], a["name"], split)
                    rb, pb = methods(t["label"], b["name"], split)
                    both = ra.merge(rb, on=METHOD, suffixes=("_a", "_b"))
                    if len(both) < 3:
                        continue
                    sa = 1.0 if a["direction"] == HIGHER else -1.0
                    sb = 1.0 if b["direction"] == HIGHER else -1.0
                    tau = kendall_tau(sa * both["value_a"].to_numpy(), sb * both["value_b"].to_numpy())
                    low = high = math.nan
                    if dist is not None and (both["pooled_a"] >= 0).all() and (both["pooled_b"] >= 0).all():
                        xa = sa * np.stack([pa[i] for i in both["pooled_a"]], axis=1)
                        xb = sb * np.stack([pb[i] for i in both["pooled_b"]], axis=1)
                        ok = np.isfinite(xa).all(axis=1) & np.isfinite(xb).all(axis=1)
                        if ok.any():
                            low, high = percentile_interval(kendall_tau(xa[ok], xb[ok]), dist.level)
                    label_a, label_b = (identical.label(t["label"], m["name"], spec.metric_spec(t["label"], m["name"]).label)
                                        for m in (a, b))
                    rows.append({"scenario": sc.title, "task": t["label"], "split": split, "metric_a": a["name"],
                                 "metric_b": b["name"], "label_a": label_a, "label_b": label_b, "tau": float(tau), "ci_low": low, "ci_high": high,
                                 "n_methods": len(both)})
    return pd.DataFrame(rows)
