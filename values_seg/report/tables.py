"""The downstream table of the paper's Tables 5-6, one per scenario.

Rows are the uncertainty methods, columns the tasks' table metrics by split; what a cell shows (interval,
✓, ⚠) and which rows fill it: docs/design-rationale.md, "The downstream tables".
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from values_seg.report.costs import COLUMNS as COST_COLUMNS, GROUP as COST_GROUP, CostColumn, method_costs
from values_seg.report.common import UNSUPPORTED, Scenario, metric_rows, scenarios, select, support_notes
from values_seg.report.identical import IdenticalMetrics, identical_metrics
from values_seg.report.intervals import Distributions
from values_seg.report.intervals import summarise as summarise_intervals
from values_seg.report.rich import Metric, RichTable
from values_seg.report.spec import MetricSpec, ReportSpec, natural_key
from values_seg.report.stats import format_value

COMPATIBLE = "✓"  # the value lies inside its reference metric's interval

ROW_KEYS = ("backbone", "prediction_model", "measure", "uncertainty_type", "aggregation")
LABEL_HEADERS = {"backbone": "Backbone", "prediction_model": "PM", "measure": "UM", "uncertainty_type": "UT",
                 "aggregation": "AGG"}


@dataclass(frozen=True)
class Column:
    spec: MetricSpec
    split: str

    @property
    def metric(self) -> str:
        return self.spec.metric

    @property
    def task(self) -> str:
        return self.spec.task

    @property
    def header(self) -> str:
        """E.g. "AURC i.i.d. ↓" (no split suffix for "all")."""
        arrow = {"higher": "↑", "lower": "↓"}.get(self.spec.direction, "")
        parts = [self.spec.label, {"iid": "i.i.d.", "ood": "OoD"}.get(self.split, ""), arrow]
        return " ".join(p for p in parts if p)


@dataclass
class DownstreamTable:
    scenario: Scenario
    rows: list[dict]  # ROW_KEYS -> str
    columns: list[Column]
    mean: np.ndarray  # [rows, columns], NaN where empty
    std: np.ndarray
    n: np.ndarray  # seeds with a finite value; 0 = empty cell
    label_keys: tuple[str, ...]  # the ROW_KEYS shown (backbone only with several)
    spec: ReportSpec
    ci_low: np.ndarray | None = None  # [rows, columns], NaN where no interval
    ci_high: np.ndarray | None = None
    compatible: np.ndarray | None = None  # [rows, columns] bool: inside the reference's interval
    unsupported: np.ndarray | None = None  # [rows, columns] str: why the data cannot support it, "" where they can
    costs: np.ndarray | None = None  # [rows, len(COST_COLUMNS)]: the method's cost, mean over seeds; NaN unknown

    @property
    def cost_columns(self) -> tuple[CostColumn, ...]:
        """The cost columns shown (those with a value in some row), after the metrics."""
        if self.costs is None:
            return ()
        return tuple(c for k, c in enumerate(COST_COLUMNS) if np.isfinite(self.costs[:, k]).any())

    def cost(self, i: int, column: CostColumn) -> float:
        """Row ``i``'s value of a cost column, as shown (× its scale); NaN unknown."""
        return float(self.costs[i, COST_COLUMNS.index(column)]) * column.scale

    def cost_cells(self, i: int) -> list[str]:
        """Row ``i``'s cells of :attr:`cost_columns`."""
        return [c.text(float(self.costs[i, COST_COLUMNS.index(c)])) for c in self.cost_columns]

    def note(self, i: int, j: int) -> str:
        """Why the data cannot support cell (i, j); "" where they can."""
        return str(self.unsupported[i, j]) if self.unsupported is not None else ""

    def cell(self, i: int, j: int) -> str:
        if self.n[i, j] == 0 and np.isnan(self.mean[i, j]):
            return ""
        low = self.ci_low[i, j] if self.ci_low is not None else np.nan
        high = self.ci_high[i, j] if self.ci_high is not None else np.nan
        text = format_value(self.mean[i, j], self.std[i, j], int(self.n[i, j]), low, high)
        if self.compatible is not None and self.compatible[i, j]:
            text += f" {COMPATIBLE}"
        if self.note(i, j):
            text += f" {UNSUPPORTED}"
        return text

    def support_legend(self) -> str:
        """What "⚠" means in this table: each reason with its columns and number of cells; "" without any."""
        found: dict[str, dict[str, int]] = {}
        for i in range(len(self.rows)):
            for j, c in enumerate(self.columns):
                for why in (self.note(i, j).split(" | ") if self.note(i, j) and self.n[i, j] else []):
                    columns = found.setdefault(why, {})
                    columns[c.header] = columns.get(c.header, 0) + 1
        if not found:
            return ""
        reasons = "; ".join(f"{why} ({sum(cols.values())} cell{'s' if sum(cols.values()) > 1 else ''}: "
                            f"{', '.join(cols)})" for why, cols in found.items())
        return f"{UNSUPPORTED} not supported by the data, shown but never recommended: {reasons}."

    @property
    def has_intervals(self) -> bool:
        return self.ci_low is not None and bool(np.isfinite(self.ci_low).any())

    @property
    def has_references(self) -> bool:
        return any(self.spec.reference_metric(c.task, c.metric) for c in self.columns)

    def row_index(self, prediction_model: str, measure: str = "", aggregation: str = "",
                  backbone: str | None = None) -> int:
        for i, r in enumerate(self.rows):
            if (r["prediction_model"] == prediction_model and r["measure"] == measure
                    and r["aggregation"] == aggregation and (backbone is None or r["backbone"] == backbone)):
                return i
        raise KeyError(f"no row ({backbone}, {prediction_model}, {measure}, {aggregation}) in {self.scenario.title}")

    def column_index(self, metric: str, split: str) -> int:
        for j, c in enumerate(self.columns):
            if c.metric == metric and c.split == split:
                return j
        raise KeyError(f"no column ({metric}, {split}) in {self.scenario.title}")

    def value(self, prediction_model: str, metric: str, split: str, measure: str = "", aggregation: str = "",
              backbone: str | None = None) -> str:
        """The formatted cell of one method and one metric column."""
        return self.cell(self.row_index(prediction_model, measure, aggregation, backbone),
                         self.column_index(metric, split))

    def labels(self, i: int) -> list[str]:
        r = self.rows[i]
        return [self.spec.label(k, r[k]) for k in self.label_keys]

    def frame(self) -> pd.DataFrame:
        """Display frame: label columns (short names) and one formatted column per metric."""
        data = {LABEL_HEADERS[k]: [self.spec.label(k, r[k]) for r in self.rows] for k in self.label_keys}
        for j, c in enumerate(self.columns):
            data[c.header] = [self.cell(i, j) for i in range(len(self.rows))]
        cells = [self.cost_cells(i) for i in range(len(self.rows))]
        for k, c in enumerate(self.cost_columns):
            data[c.header] = [row[k] for row in cells]
        return pd.DataFrame(data)


def _row_keys(df: pd.DataFrame, spec: ReportSpec) -> list[dict]:
    """The methods of one scenario in canonical order (see the module docstring)."""
    rows = []
    models = df[["backbone", "prediction_model"]].drop_duplicates()
    models = sorted(models.itertuples(index=False), key=lambda m: (natural_key(m[0]),
                                                                   spec.order_key("prediction_model", m[1])))
    for backbone, model in models:
        sub = df[(df["backbone"] == backbone) & (df["prediction_model"] == model) & (df["measure"] != "")]
        if sub.empty:
            rows.append(dict(backbone=backbone, prediction_model=model, measure="", uncertainty_type="", aggregation=""))
            continue
        types = {m: next((t for t in g["uncertainty_type"] if t), "") for m, g in sub.groupby("measure")}
        measures = sorted(types, key=lambda m: (spec.order_key("uncertainty_type", types[m] or "~"),
                                                spec.order_key("measure", m)))
        for m in measures:
            aggs = spec.ordered("aggregation", [a for a in sub.loc[sub["measure"] == m, "aggregation"] if a])
            for a in aggs or [""]:
                rows.append(dict(backbone=backbone, prediction_model=model, measure=m, uncertainty_type=types[m],
                                 aggregation=a))
    return rows


def _compatible(df: pd.DataFrame, task: str, metric: str, reference: str, keys: list[str]) -> dict[tuple, bool]:
    """Per method (``keys``): whether ``metric``'s value lies inside ``reference``'s interval in every seed."""
    observed = metric_rows(df, task, metric)
    ref = metric_rows(df, task, reference)
    if observed.empty or ref.empty:
        return {}
    pair = observed[keys + ["seed", "value"]].merge(ref[keys + ["seed", "ci_low", "ci_high"]], on=keys + ["seed"])
    inside = (pair["ci_low"] <= pair["value"]) & (pair["value"] <= pair["ci_high"])
    return {k if isinstance(k, tuple) else (k,): bool(v.all()) for k, v in inside.groupby([pair[c] for c in keys])}


def downstream_table(results: pd.DataFrame, scenario: Scenario, spec: ReportSpec,
                     dist: Distributions | None = None, identical: IdenticalMetrics | None = None,
                     costs: pd.DataFrame | None = None) -> DownstreamTable:
    """The downstream table of one scenario from the tidy results (intervals from ``dist``, the
    run's bootstrap distributions, where there are several seeds); ``identical``: the run's
    identical metrics (default: found in ``results``), each group one column; ``costs``: the run's
    costs.csv, each method's cost (mean over seeds) beside its metrics."""
    identical = identical_metrics(results, spec) if identical is None else identical
    df = select(results, scenario)
    df = df[(df["versus"] == "") & np.isfinite(df["value"].to_numpy(dtype=float))]
    columns: list[Column] = []
    lookup: dict[tuple, tuple] = {}
    compat: dict[tuple, bool] = {}
    notes: dict[tuple, str] = {}
    keys = ["backbone", "prediction_model", "measure", "aggregation", "split"]
    for ms in spec.table_metrics(df):
        rows = metric_rows(df, ms.task, ms.metric)
        if rows.empty or identical.hidden(ms.task, ms.metric):
            continue
        ms = replace(ms, label=identical.label(ms.task, ms.metric, ms.label))
        for split in spec.ordered("split", rows["split"].unique()):
            columns.append(Column(ms, split))
        for r in summarise_intervals(rows, keys, dist).itertuples(index=False):
            lookup[(ms.task, ms.metric, r.split, r.backbone, r.prediction_model, r.measure, r.aggregation)] = (
                r.mean, r.std, r.n, r.ci_low, r.ci_high)
        for k, why in support_notes(rows, keys).items():
            notes[(ms.task, ms.metric, k[4], *k[:4])] = why
        reference = spec.reference_metric(ms.task, ms.metric)
        if reference:
            for k, ok in _compatible(df, ms.task, ms.metric, reference, keys).items():
                compat[(ms.task, ms.metric, k[4], *k[:4])] = ok

    used = {(c.task, c.metric) for c in columns}
    rows = _row_keys(df[[(t, m) in used for t, m in zip(df["task"], df["metric"])]], spec) if columns else []
    R, C = len(rows), len(columns)
    mean, std, n = np.full((R, C), np.nan), np.full((R, C), np.nan), np.zeros((R, C), dtype=np.int64)
    low, high, ok = np.full((R, C), np.nan), np.full((R, C), np.nan), np.zeros((R, C), dtype=bool)
    why = np.full((R, C), "", dtype=object)
    for i, r in enumerate(rows):
        candidates = [(r["measure"], r["aggregation"]), (r["measure"], ""), ("", r["aggregation"]), ("", "")]
        if not r["measure"]:
            candidates = [("", r["aggregation"]), ("", "")]
        for j, c in enumerate(columns):
            for meas, agg in candidates:
                key = (c.task, c.metric, c.split, r["backbone"], r["prediction_model"], meas, agg)
                hit = lookup.get(key)
                if hit is not None:
                    mean[i, j], std[i, j], n[i, j], low[i, j], high[i, j] = hit
                    ok[i, j] = compat.get(key, False)
                    why[i, j] = notes.get(key, "")
                    break
    several_backbones = len({r["backbone"] for r in rows}) > 1
    label_keys = tuple(k for k in ROW_KEYS if k != "backbone" or several_backbones)
    return DownstreamTable(scenario, rows, columns, mean, std, n, label_keys, spec, low, high, ok, why,
                           _method_costs(costs, scenario, rows))


def _method_costs(costs: pd.DataFrame | None, scenario: Scenario, rows: list[dict]) -> np.ndarray | None:
    """Per row, its method's cost (:data:`values_seg.report.costs.COLUMNS`, mean over seeds); None without costs."""
    if costs is None or costs.empty or not rows:
        return None
    table = method_costs(costs)
    table = table[(table["dataset"] == str(scenario.dataset or "")) & (table["scenario"] == str(scenario.scenario))]
    found = {(b, m): r for b, m, r in zip(table["backbone"], table["prediction_model"],
                                          table[[c.key for c in COST_COLUMNS]].to_numpy(dtype=float))}
    none = np.full(len(COST_COLUMNS), np.nan)
    out = np.array([found.get((str(r["backbone"]), str(r["prediction_model"])), none) for r in rows])
    return out if np.isfinite(out).any() else None


def downstream_tables(results: pd.DataFrame, spec: ReportSpec, dist: Distributions | None = None,
                      costs: pd.DataFrame | None = None) -> list[DownstreamTable]:
    """One table per (dataset, scenario), in natural order; scenarios without task metrics are left out."""
    identical = identical_metrics(results, spec)
    tables = [downstream_table(results, s, spec, dist, identical, costs) for s in scenarios(results)]
    return [t for t in tables if t.columns and t.rows]


def rich_table(tables: list[DownstreamTable]) -> RichTable:
    """The downstream tables of every scenario as one interactive table (``report.html``): a row
    per (data set, scenario, method), the label columns as filters, a column per (task, metric,
    split) with its cells as numbers (× 100) and intervals; a metric a scenario lacks stays empty."""
    several = {"dataset": len({t.scenario.dataset for t in tables}) > 1,
               "backbone": any("backbone" in t.label_keys for t in tables)}
    labels = (["Dataset"] if several["dataset"] else []) + ["Scenario"] + [
        LABEL_HEADERS[k] for k in ROW_KEYS if k != "backbone" or several["backbone"]]
    columns = list(dict.fromkeys(c for t in tables for c in t.columns))
    headers = [c.header for c in columns]
    names = [f"{c.spec.group} {h}" if headers.count(h) > 1 else h for c, h in zip(columns, headers)]
    records = []
    for t in tables:
        where = {c: j for j, c in enumerate(t.columns)}
        for i, r in enumerate(t.rows):
            record = {"Dataset": t.scenario.dataset, "Scenario": t.scenario.title}
            record.update({LABEL_HEADERS[k]: t.spec.label(k, r[k]) for k in ROW_KEYS})
            for c, name in zip(columns, names):
                j = where.get(c)
                if j is None or t.n[i, j] == 0 or not np.isfinite(t.mean[i, j]):
                    record[name] = None
                    continue
                low = t.ci_low[i, j] if t.ci_low is not None else np.nan
                high = t.ci_high[i, j] if t.ci_high is not None else np.nan
                ok = t.compatible is not None and bool(t.compatible[i, j])
                flag = " ".join(([COMPATIBLE] if ok else []) + ([UNSUPPORTED] if t.note(i, j) else []))
                record[name] = [100 * t.mean[i, j], 100 * low, 100 * high, flag, 100 * t.std[i, j], t.note(i, j)]
            for c in t.cost_columns:  # as shown, not × 100
                value = t.cost(i, c)
                record[c.header] = [value, None, None, "", None, ""] if np.isfinite(value) else None
            records.append(record)
    costs = [c for c in COST_COLUMNS if any(c in t.cost_columns for t in tables)]
    frame = pd.DataFrame(records, columns=["Dataset", "Scenario", *LABEL_HEADERS.values(), *names,
                                           *(c.header for c in costs)])
    metrics = tuple(Metric(name, c.spec.group, c.spec.direction or "") for c, name in zip(columns, names))
    metrics += tuple(Metric(c.header, COST_GROUP, "lower") for c in costs)
    return RichTable(frame, tuple(labels), metrics)


def summary_frame(results: pd.DataFrame, spec: ReportSpec, dist: Distributions | None = None) -> pd.DataFrame:
    """Every metric of the run: mean, std and n over seeds, the confidence interval (raw values,
    not × 100) and whether the data support it in every seed (``supported``, else why in
    ``support_note``), sorted."""
    keys = ["dataset", "scenario", "backbone", "prediction_model", "measure", "versus", "uncertainty_type",
            "aggregation", "task", "metric", "split"]
    if results.empty:
        return pd.DataFrame(columns=keys + ["mean", "std", "n", "ci_low", "ci_high", "supported", "support_note"])
    out = summarise_intervals(results, keys, dist)
    notes = support_notes(results, keys)
    out["support_note"] = [notes.get(tuple(r), "") for r in out[keys].itertuples(index=False)]
    out.insert(len(out.columns) - 1, "supported", out["support_note"] == "")
    order = {
        "prediction_model": lambda v: spec.order_key("prediction_model", v),
        "measure": lambda v: spec.order_key("measure", v),
        "aggregation": lambda v: spec.order_key("aggregation", v),
        "split": lambda v: spec.order_key("split", v),
    }
    sort_keys = [tuple(order.get(k, natural_key)(v) for k, v in zip(keys, r))
                 for r in out[keys].itertuples(index=False)]
    index = sorted(range(len(out)), key=sort_keys.__getitem__)
    return out.iloc[index].reset_index(drop=True)


def missing_values(results: pd.DataFrame, scenario: Scenario, spec: ReportSpec,
                   cases: pd.DataFrame | None = None) -> str:
    """What the downstream table of ``scenario`` cannot show, and why, grouped by reason ("" where
    nothing is missing): each declared table metric and split without a value (no rows, or only
    NaN ones) or with cells left empty by NaN rows; "no rows" is explained by the scenario's test
    cases (``cases``, cases.csv) and what the metric declares it needs (``min_cases``,
    ``min_per_class``)."""
    df = select(results, scenario)
    df = df[df["versus"] == ""]
    counts = None
    if cases is not None and not cases.empty:
        test = select(cases, scenario)
        test = test[test["split"] == "test"].drop_duplicates("case_id")
        counts = (int((~test["ood"]).sum()), int(test["ood"].sum()))
    found: dict[str, list[str]] = {}
    for ms in spec.table_metrics():
        declared = spec.metric(ms.task, ms.metric) or {}
        for split in declared.get("splits", ("iid", "ood")):
            rows = df[(df["task"] == ms.task) & (df["metric"] == ms.metric) & (df["split"] == split)]
            finite = np.isfinite(rows["value"].to_numpy(dtype=float))
            if finite.all() and len(rows):
                continue
            if finite.any():
                why = f"cells left empty: rows without a value (the task returned NaN on {int((~finite).sum())} of {len(rows)})"
            elif len(rows):
                why = f"not shown: the task returned NaN on all {len(rows)} rows"
            else:
                why = "not shown: " + _case_reason(declared, split, counts)
            found.setdefault(why, []).append(f"{ms.group} {Column(ms, split).header}")
    return " ".join(f"{why[0].upper()}{why[1:]}: {', '.join(columns)}." for why, columns in found.items())


def _case_reason(declared: dict, split: str, counts: tuple[int, int] | None) -> str:
    """Why a metric has no rows, from the test cases (i.i.d., OoD) and what the metric declares it needs."""
    if counts is None:
        return "no rows (the task returned none)"
    iid, ood = counts
    n = {"iid": iid, "ood": ood}.get(split, iid + ood)
    name = {"iid": "i.i.d. ", "ood": "OoD "}.get(split, "")
    need, per_class = int(declared.get("min_cases", 1)), int(declared.get("min_per_class", 0))
    if n == 0:
        return f"no rows, no {name}test case"
    if n < need:
        return f"no rows, {n} {name}test case(s) where the metric needs at least {need}"
    if split == "all" and per_class and min(iid, ood) < per_class:
        return f"no rows, {iid} i.i.d. and {ood} OoD test case(s) where the metric needs at least {per_class} of each"
    return f"no rows (the task returned none; the test set has {iid} i.i.d. and {ood} OoD cases)"
