"""Figure 2b: NCC and OoD AUROC per uncertainty measure, averaged over prediction models and
aggregations. Its layout: docs/design-rationale.md, "The separation section".
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from values_seg.report.spec import ALL_TYPES, ReportSpec
from values_seg.report.common import scenarios, select
from values_seg.report.plots._style import UT_COLORS, measure_title, new_figure, save

#: panel titles per separation role, with the evidence metric's label
TITLES = {"AU": "{} with the raters' variance (AU)", "EU": "OoD-detection {} (EU)"}


def plot_measure_summary(summary: pd.DataFrame, path: Path, spec: ReportSpec) -> Path | None:
    """Draw :func:`values_seg_plugins.report_sections._separation.measure_summary`; None if empty."""
    if summary.empty:
        return None
    metrics = sorted(summary[["metric", "role", "label"]].drop_duplicates().itertuples(index=False, name=None),
                     key=lambda m: m[1] != "AU")
    per_metric = {m: scenarios(summary[summary["metric"] == m[0]]) for m in metrics}
    ncols = max(len(v) for v in per_metric.values())
    max_bars = summary.groupby(["dataset", "scenario", "metric"]).size().max()
    fig = new_figure(max(4.0, 0.55 * max_bars + 1.2) * ncols, 3.4 * len(metrics) + 0.6)
    axes = fig.subplots(len(metrics), ncols, squeeze=False)
    for r, metric in enumerate(metrics):
        for c in range(ncols):
            ax = axes[r, c]
            if c >= len(per_metric[metric]):
                ax.set_axis_off()
                continue
            sc = per_metric[metric][c]
            name, role, label = metric
            d = select(summary[summary["metric"] == name], sc)
            x = np.arange(len(d))
            colors = [UT_COLORS.get(t, UT_COLORS[""]) for t in d["uncertainty_type"]]
            ax.bar(x, d["mean"], yerr=np.nan_to_num(d["std"].to_numpy(dtype=float)), color=colors,
                   capsize=3, width=0.7, edgecolor="black", lw=0.5)
            ax.set_xticks(x)
            ax.set_xticklabels([measure_title(m, t, spec) for m, t in zip(d["measure"], d["uncertainty_type"])],
                               fontsize=8, rotation=30 if len(d) > 5 else 0, ha="right" if len(d) > 5 else "center")
            ax.axhline(0.0, color="black", lw=0.6)
            if role == "EU":
                ax.axhline(0.5, color="#444444", lw=1, ls="--")
                ax.set_ylim(0.0, 1.05)
            else:
                low = float(np.nanmin((d["mean"] - d["std"].fillna(0)).to_numpy(dtype=float)))
                ax.set_ylim(min(0.0, low - 0.05), 1.05)
            ax.set_title(f"{sc.title}: {TITLES[role].format(label)}", fontsize=9, y=1.0)
            ax.set_ylabel(label, fontsize=9)
            ax.grid(axis="y", color="#dddddd", lw=0.6)
            ax.set_axisbelow(True)
    handles = [Patch(facecolor=UT_COLORS[t], edgecolor="black", lw=0.5) for t in ALL_TYPES]
    names = [f"{t} measure" for t in ALL_TYPES]
    eu_labels = [label for _, role, label in metrics if role == "EU"]
    if eu_labels:
        handles.append(Line2D([], [], color="#444444", lw=1, ls="--"))
        names.append(f"random {'/'.join(dict.fromkeys(eu_labels))} (0.5)")
    fig.legend(handles, names, loc="outside lower center", ncols=len(handles), fontsize=8, frameon=False)
    fig.suptitle("Separation study per measure: mean over prediction models and aggregations (±1 std)", fontsize=10)
    return save(fig, path)
