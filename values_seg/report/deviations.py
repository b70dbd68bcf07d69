"""Per-component deviation from the mean (paper Figure 3, section 4.5): per task metric, split and
scenario, each component level's mean deviation of its methods' seed means from the overall mean of
the methods suited to the task. The steps, the excluded types and what is left out:
docs/design-rationale.md, "Deviation from the mean".
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from values_seg.report.spec import FIGURE3_COMPONENTS, ReportSpec
from values_seg.report.common import Scenario, left_out_text, metric_rows, scenarios, select, supported_only

METHOD_KEYS = ["backbone", "prediction_model", "measure", "uncertainty_type", "aggregation"]
PART = ["dataset", "scenario", "split"]  # one panel of the figure
COLUMNS = ["dataset", "scenario", "split", "component", "level", "deviation", "std", "n", "excluded", "overall_mean"]


def method_means(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds per uncertainty method (finite values only)."""
    rows = rows[np.isfinite(rows["value"].to_numpy(dtype=float))]
    if rows.empty:
        return pd.DataFrame(columns=METHOD_KEYS + ["value"])
    return rows.groupby(METHOD_KEYS, sort=True)["value"].mean().reset_index()


def _level_stats(values: np.ndarray) -> tuple[float, float, int]:
    n = int(values.size)
    return float(values.mean()), (float(values.std(ddof=1)) if n > 1 else math.nan), n


def scenario_deviations(rows: pd.DataFrame, task: str, spec: ReportSpec) -> tuple[pd.DataFrame, float]:
    """Deviations of one scenario and split: ``(frame of component, level, deviation, std, n,
    excluded)``, overall mean)."""
    methods = method_means(rows)
    out: list[tuple] = []
    if methods.empty:
        return pd.DataFrame(out, columns=["component", "level", "deviation", "std", "n", "excluded"]), math.nan
    suited = spec.suited_types(task)
    unsuited = methods["uncertainty_type"].map(lambda t: bool(t) and t not in suited).to_numpy()
    included = methods[~unsuited]
    if included.empty:
        return pd.DataFrame(out, columns=["component", "level", "deviation", "std", "n", "excluded"]), math.nan
    overall = float(included["value"].mean())
    methods = methods.assign(dev=methods["value"] - overall, excluded=unsuited)
    for component in FIGURE3_COMPONENTS:
        levels = [lv for lv in methods[component].unique() if lv]
        if not levels or (component == "backbone" and len(levels) < 2):
            continue
        pool = methods if component == "uncertainty_type" else methods[~methods["excluded"]]
        for level in spec.ordered(component, levels):
            sel = pool[pool[component] == level]
            if sel.empty:
                continue
            excluded = bool(sel["excluded"].all())
            out.append((component, level, *_level_stats(sel["dev"].to_numpy(dtype=float)), excluded))
    return pd.DataFrame(out, columns=["component", "level", "deviation", "std", "n", "excluded"]), overall


def component_deviations(results: pd.DataFrame, task: str, metric: str, spec: ReportSpec) -> pd.DataFrame:
    """Figure-3 deviations of ``metric`` for every scenario and split (columns :data:`COLUMNS`)."""
    frames = []
    rows_all = supported_only(metric_rows(results, task, metric), PART + METHOD_KEYS)[0]
    for sc in scenarios(rows_all):
        rows = select(rows_all, sc)
        for split in spec.ordered("split", rows["split"].unique()):
            dev, overall = scenario_deviations(rows[rows["split"] == split], task, spec)
            if dev.empty:
                continue
            dev.insert(0, "split", split)
            dev.insert(0, "scenario", sc.scenario)
            dev.insert(0, "dataset", sc.dataset)
            dev["overall_mean"] = overall
            frames.append(dev)
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    return pd.concat(frames, ignore_index=True)[COLUMNS]


def left_out(results: pd.DataFrame, task: str, metric: str) -> str:
    """How many methods of ``metric`` :func:`component_deviations` leaves out as unsupported, and why; "" where none."""
    dropped = supported_only(metric_rows(results, task, metric), PART + METHOD_KEYS)[1]
    return left_out_text(dropped, PART + METHOD_KEYS, "averaged")


def panel_scenarios(deviations: pd.DataFrame) -> list[Scenario]:
    return scenarios(deviations)
