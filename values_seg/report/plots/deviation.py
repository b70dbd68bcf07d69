"""Figure 3: per-component deviation from the mean performance of one task metric.

Its layout: docs/design-rationale.md, "Deviation from the mean".
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.ticker import NullLocator

from values_seg.report.spec import COMPONENT_NAMES, FIGURE3_COMPONENTS, HIGHER, LOWER, MetricSpec, ReportSpec
from values_seg.report.common import scenarios, select
from values_seg.report.plots._style import figure_title, margins, new_figure, save, split_style

SCALE = 100.0


def _layout(dev: pd.DataFrame, spec: ReportSpec) -> list[tuple[str, str | None]]:
    """Rows of the y axis top to bottom: (component, None) headers and (component, level)."""
    rows: list[tuple[str, str | None]] = []
    for component in FIGURE3_COMPONENTS:
        levels = dev.loc[dev["component"] == component, "level"].unique()
        if len(levels) == 0:
            continue
        rows.append((component, None))
        rows += [(component, lv) for lv in spec.ordered(component, levels)]
    return rows


def plot_deviations(dev: pd.DataFrame, metric: MetricSpec, path: Path, spec: ReportSpec, max_columns: int = 4) -> Path | None:
    """Draw the deviations of :func:`values_seg.report.deviations.component_deviations`; None if empty."""
    if dev.empty:
        return None
    panels = scenarios(dev)
    rows = _layout(dev, spec)
    ypos = {r: len(rows) - 1 - i for i, r in enumerate(rows)}
    splits = spec.ordered("split", dev["split"].unique())
    ncols = min(max_columns, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    labels = [COMPONENT_NAMES[c] if lv is None else spec.label(c, lv) for c, lv in rows]
    # fixed margins (no layout engine: on a grid of panels it costs as much as drawing it); the
    # label column sized by its longest label
    left = 0.25 + 0.075 * max(len(t) for t in labels)
    fig = new_figure(left + 0.3 + 3.3 * ncols, (1.3 + 0.3 * len(rows)) * nrows + 0.9, constrained=False)
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).reshape(-1)
    margins(fig, left=left, right=0.2, top=1.05, bottom=0.95, wspace=0.25, hspace=1.1)
    better = {HIGHER: "right = better", LOWER: "left = better"}.get(metric.direction, "")
    offsets = {s: (k - (len(splits) - 1) / 2) * 0.22 for k, s in enumerate(splits)}

    for ax, sc in zip(axes, panels):
        d = select(dev, sc)
        shade = False  # alternate shading of the component blocks
        for component in dict.fromkeys(c for c, _ in rows):
            ys = [ypos[r] for r in rows if r[0] == component]
            if shade:
                ax.axhspan(min(ys) - 0.5, max(ys) + 0.5, color="#f0f0f0", zorder=0)
            shade = not shade
        ax.axvline(0.0, color="black", lw=0.8, zorder=1)
        means = []
        for split in splits:
            color, marker = split_style(split)
            ds = d[d["split"] == split]
            if ds.empty:
                continue
            means.append(f"{spec.label('split', split) or 'all'} {ds['overall_mean'].iloc[0] * SCALE:.1f}")
            inc, exc = ds[~ds["excluded"]], ds[ds["excluded"]]
            y = [ypos[(c, lv)] + offsets[split] for c, lv in zip(inc["component"], inc["level"])]
            err = np.nan_to_num(inc["std"].to_numpy(dtype=float) * SCALE, nan=0.0)
            ax.errorbar(inc["deviation"] * SCALE, y, xerr=err, fmt=marker, color=color, ms=5, capsize=2.5, lw=1,
                        zorder=3)
            if not exc.empty:
                y = [ypos[(c, lv)] + offsets[split] for c, lv in zip(exc["component"], exc["level"])]
                ax.plot(exc["deviation"] * SCALE, y, "x", color=color, ms=7, mew=1.8, zorder=3)
        ax.set_title(f"{sc.title}\nmean ×100: " + ", ".join(means), fontsize=9, y=1.0)
        ax.set_xlabel(f"deviation from mean ×100 ({better})" if better else "deviation from mean ×100", fontsize=8)
        ax.grid(axis="x", color="#dddddd", lw=0.6)
        ax.tick_params(axis="x", labelsize=8)
        lim = np.nanmax(np.abs(np.r_[(d["deviation"].abs() + d["std"].fillna(0)).to_numpy(dtype=float), 1e-3])) * SCALE
        ax.set_xlim(-1.12 * lim, 1.12 * lim)
    for ax in axes[len(panels):]:
        ax.set_axis_off()

    # the levels label the first panel of each row; the others share its y axis without ticks
    # (a tick per level and panel costs more than the panel's markers)
    ticks = [ypos[r] for r in rows]
    for k, ax in enumerate(axes[: len(panels)]):
        ax.set_ylim(-0.7, len(rows) - 0.3)
        if k % ncols:
            ax.yaxis.set_major_locator(NullLocator())
            continue
        ax.set_yticks(ticks)
        ax.set_yticklabels(labels, fontsize=9)
        for tick, (c, lv) in zip(ax.get_yticklabels(), rows):
            if lv is None:
                tick.set_fontweight("bold")
        ax.tick_params(axis="y", length=0)

    handles, names = [], []
    for split in splits:
        color, marker = split_style(split)
        handles.append(axes[0].plot([], [], marker, color=color)[0])
        names.append(spec.label("split", split) or "all (i.i.d. + OoD)")
    if dev["excluded"].any():
        handles.append(axes[0].plot([], [], "x", color="#444444", mew=1.8)[0])
        names.append(f"excluded from the averages (unsuited to {metric.group})")
    height = fig.get_size_inches()[1]
    fig.legend(handles, names, loc="lower center", bbox_to_anchor=(0.5, 0.05 / height), ncols=len(handles),
               fontsize=8, frameon=False)
    figure_title(fig, f"{metric.title}: deviation of each component from the mean\n"
                      f"(error bars: ±1 std over the other components)")
    return save(fig, path)
