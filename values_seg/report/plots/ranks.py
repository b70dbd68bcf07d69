"""Rank histograms (:func:`values_seg.report.ranking.rank_histograms`), one figure per scenario.

Its layout and how to read it: docs/design-rationale.md, "Rank histograms and metric agreement".
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.patches import Rectangle
from matplotlib.transforms import blended_transform_factory

from values_seg.report.plots._style import figure_title, save
from values_seg.report.spec import COMPONENT_NAMES, ReportSpec

COMPONENTS = ("prediction_model", "measure", "aggregation")
ROW_INCH = 0.17


def _blocks(df: pd.DataFrame, component: str, spec: ReportSpec) -> list[tuple[list[str], pd.DataFrame]]:
    """(block title lines, that block's rows) in the frame's order of metrics, splits and blocks: the
    metric, and what the block ranks over where the metric has several blocks or leaves methods out."""
    out = []
    part = df[df["component"] == component]
    blocks = part["block"] if "block" in part else pd.Series(0, index=part.index)
    for (task, metric, split), g in part.groupby(["task", "metric", "split"], sort=False):
        ms = spec.metric_spec(task, metric)
        where = {"iid": " i.i.d.", "ood": " OoD"}.get(split, "")
        title = f"{ms.title}{where} {spec.arrow(task, metric)}"
        partial = blocks[g.index].nunique() > 1 or ("left_out" in g and (g["left_out"] > 0).any())
        for _, b in g.groupby(blocks[g.index], sort=False):
            out.append(([title, f"over {b['over'].iloc[0]}"] if partial and b["over"].iloc[0] else [title], b))
    return out


def _text_width(lines: list[str]) -> float:
    """About the width in inches of a block's title lines (7 pt bold, 6 pt)."""
    return max(len(line) * (0.056 if i == 0 else 0.045) for i, line in enumerate(lines))


def plot_rank_histograms(df: pd.DataFrame, title: str, path: Path, spec: ReportSpec) -> Path | None:
    """One scenario's rank histograms (rows of :func:`~values_seg.report.ranking.rank_histograms`); None if empty."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    panels = [(c, _blocks(df, c, spec)) for c in COMPONENTS]
    panels = [(c, b) for c, b in panels if b]
    if not panels:
        return None
    heights = [sum(g["choice"].nunique() + len(t) for t, g in blocks) for _, blocks in panels]
    ranks = [max(int(g["rank"].max()) for _, g in blocks) for _, blocks in panels]
    n_rows = max(heights)
    # fixed sizes in inches: a label margin and equal cells in every panel (no layout engine)
    label, cell, gap, top, bottom = 0.75, max(0.34, 2.2 / max(ranks)), 0.25, 0.75, 0.45
    widths = [max(cell * k, 2.3, max(_text_width(t) for t, _ in blocks)) for k, (_, blocks) in zip(ranks, panels)]
    width = sum(label + w + gap for w in widths) + 0.1
    height = top + bottom + ROW_INCH * n_rows
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    axes, x = [], 0.0
    for w in widths:
        x += label
        axes.append(fig.add_axes((x / width, bottom / height, w / width, (height - top - bottom) / height)))
        x += w + gap
    for ax, n_ranks, (component, blocks) in zip(axes, ranks, panels):
        grid = np.full((n_rows, n_ranks), np.nan)
        labels, outlines, texts, headers = [], [], [], []
        row = 0
        for lines, g in blocks:
            for i, line in enumerate(lines):
                headers.append((row, line, i == 0))
                labels.append("")
                row += 1
            for choice in spec.ordered(component, g["choice"].unique()):
                c = g[g["choice"] == choice]
                share = c.sort_values("rank")["share"].to_numpy()
                grid[row, :share.size] = share
                observed = int(c["observed_rank"].iloc[0])
                outlines.append((row, observed - 1))
                texts.append((row, observed - 1, share[observed - 1]))  # the keep rate
                labels.append(spec.label(component, choice))
                row += 1
        ax.imshow(grid, cmap="Blues", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
        for r, k in outlines:
            ax.add_patch(Rectangle((k - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="#d62728", lw=1.2))
        for r, k, v in texts:
            ax.text(k, r, f"{v * 100:.0f}", ha="center", va="center", fontsize=6,
                    color="white" if v > 0.6 else "#222222")
        for r, line, first in headers:
            ax.text(-0.45, r, line, ha="left", va="center", fontsize=7 if first else 6,
                    fontweight="bold" if first else "normal", color="#222222" if first else "#555555")
        # row labels as plain text (a tick per row costs four artists)
        at_left = blended_transform_factory(ax.transAxes, ax.transData)
        for r, text in enumerate(labels):
            if text:
                ax.text(-0.02, r, text, transform=at_left, ha="right", va="center", fontsize=7)
        ax.set_yticks([])
        ax.set_ylim(n_rows - 0.5, -0.5)
        for side in ("right", "top", "bottom"):
            ax.spines[side].set_visible(False)
        ax.set_xticks(range(n_ranks))
        ax.set_xticklabels([str(k + 1) for k in range(n_ranks)], fontsize=7)
        ax.set_xlabel("rank (1 = best)", fontsize=8)
        ax.tick_params(length=0)
        ax.set_title(COMPONENT_NAMES.get(component, component), fontsize=9, pad=4, y=1.0)
    figure_title(fig, f"{title}: rank histograms over bootstrap resamples, choices compared over matched "
                      f"combinations\n(shade: share of resamples with that rank; outlined: the observed rank, with the "
                      f"% of resamples that keep it)", fontsize=9)
    return save(fig, path)
