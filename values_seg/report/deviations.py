"""Per-component deviation from the mean (paper Figure 3, section 4.5).

For one task metric, one split and one scenario:

1. every uncertainty method (backbone, prediction model, measure, aggregation) is reduced to its
   mean over seeds (Figure 3 averages over components, not over seeds);
2. the methods whose uncertainty type is unsuited to the task (OoD-D and AL: only PU and EU;
   AM: only PU and AU; FD and CALIB: all; as each task declares) are
   excluded; the overall mean is the mean of the remaining methods;
3. for each component (uncertainty type, prediction model, aggregation, and the backbone when
   there are several) and each of its levels, the deviation is the mean of (method value −
   overall mean) over the included methods with that level, and the error bar is their sample
   standard deviation (``ddof=1``; NaN for a single method).

The unsuited uncertainty types still get a point in the uncertainty-type block (deviation of
their own methods from the same overall mean) with ``excluded=True``: the figure draws it as a
cross. Components that do not apply to a metric (the aggregation of ACE and NCC) are left out,
and so are the methods whose value the data cannot support in some seed (``supported`` False,
:func:`values_seg.report.common.supported_only`; :func:`left_out` says how many and why).
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
