"""The lesion-scale figures of one scenario, from the lesion tasks' curves (nothing computed again):
F1 retention (``lesion_f1_retention``, ``case_f1_retention``) and the FP-vs-TP lesion scores
(``lesion_scores``). Their layouts: docs/design-rationale.md, "Lesion-scale figures".
"""

from __future__ import annotations

from pathlib import Path

import textwrap

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from values_seg.report.common import Scenario, model_key, select
from values_seg.report.plots._style import figure_title, margins, new_figure, save, top_legend
from values_seg.report.spec import ReportSpec, natural_key

SUBSETS = (("iid", "i.i.d."), ("ood", "OoD"))
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")


def _models(df: pd.DataFrame, spec: ReportSpec) -> list[tuple[str, str]]:
    pairs = df[["backbone", "prediction_model"]].drop_duplicates().itertuples(index=False)
    return sorted(pairs, key=lambda p: (natural_key(p[0]), spec.order_key("prediction_model", p[1])))


def shown_measure(df: pd.DataFrame, spec: ReportSpec) -> str:
    """The measure the figures show: the first, in measure order, that every model has."""
    models = df.groupby(["backbone", "prediction_model"])["measure"].agg(set)
    common = set.intersection(*models) if len(models) else set()
    return spec.ordered("measure", sorted(common or set(df["measure"])))[0]


#: what a retention figure keeps and rejects: lesions (curve lesion_f1_retention) or whole cases (case_f1_retention)
UNITS = {"lesions": ("predicted lesions (the most certain kept)", "lesion-F1 retention"),
         "cases": ("cases (the most certain kept; a case's score: its most uncertain lesion's)",
                   "lesion-F1 retention over whole cases")}


def plot_lesion_retention(curves: pd.DataFrame, scenario: Scenario, path: Path, spec: ReportSpec,
                          unit: str = "lesions") -> Path | None:
    kept, what = UNITS[unit]
    df = select(curves, scenario)
    if df.empty:
        return None
    measure = shown_measure(df, spec)
    df = df[df["measure"] == measure]
    models = _models(df, spec)
    several = len({b for b, _ in models}) > 1
    aggregations = spec.ordered("aggregation", df["aggregation"].unique())
    subsets = [(s, t) for s, t in SUBSETS if (df["split"] == s).any()]
    fig = new_figure(0.6 + 3.3 * len(models), 1.2 + 3.4 * len(subsets), constrained=False)
    axes = fig.subplots(len(subsets), len(models), squeeze=False)
    margins(fig, left=0.7, right=0.15, top=1.15, bottom=1.05, wspace=0.45, hspace=1.1)
    legend: dict[str, Line2D] = {}
    for r, (split, title) in enumerate(subsets):
        for c, (backbone, model) in enumerate(models):
            ax = axes[r, c]
            d = df[(df["backbone"] == backbone) & (df["prediction_model"] == model) & (df["split"] == split)]
            if d.empty:
                ax.set_axis_off()
                continue
            notes = []
            for k, aggregation in enumerate(aggregations):
                part = d[d["aggregation"] == aggregation]
                if part.empty:
                    continue
                mean = part.groupby("point")[["fraction", "f1", "random", "ideal", "area", "random_area",
                                              "ideal_area"]].mean()
                label = spec.label("aggregation", aggregation)
                legend[label], = ax.plot(mean["fraction"], mean["f1"], color=COLORS[k % len(COLORS)], lw=1.4)
                notes.append(f"{label}: {mean['area'].iloc[0]:.3f}")
                if k == 0:
                    legend["random"], = ax.plot(mean["fraction"], mean["random"], color="#777777", lw=1.0, ls=":")
                    legend["ideal"], = ax.plot(mean["fraction"], mean["ideal"], color="#777777", lw=1.0, ls="--")
                    notes.append(f"random {mean['random_area'].iloc[0]:.3f}, ideal {mean['ideal_area'].iloc[0]:.3f}")
            ax.text(0.0, -0.13, textwrap.fill("F1-AUC: " + "; ".join(notes), 62), transform=ax.transAxes,
                    fontsize=6.5, va="top", ha="left")
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1.02)
            ax.grid(color="#eeeeee", lw=0.6)
            ax.tick_params(labelsize=8)
            if r == 0:
                ax.set_title(model_key(backbone, model, several, spec.label), fontsize=9)
            if c == 0:
                ax.set_ylabel(f"{title}: lesion F1 of kept lesions", fontsize=8.5)
    fig.supxlabel(f"retained fraction of the {kept}", fontsize=8.5, y=0.01)
    figure_title(fig, f"{scenario.title}: {what}, {spec.label('measure', measure)} (mean over seeds)")
    top_legend(fig, list(legend.values()), list(legend), below_top=0.45)
    return save(fig, path)


def _group(share: float) -> str:
    return "FP" if share == 0 else ("TP" if share == 1 else "disagree")


def plot_lesion_scores(curves: pd.DataFrame, scenario: Scenario, path: Path, spec: ReportSpec) -> Path | None:
    df = select(curves, scenario)
    df = df[(df["split"] == "iid") & df["tp_fraction"].notna()]
    if df.empty:
        return None
    measure = shown_measure(df, spec)
    df = df[df["measure"] == measure]
    models = _models(df, spec)
    several = len({b for b, _ in models}) > 1
    aggregations = spec.ordered("aggregation", df["aggregation"].unique())
    groups = ("FP", "disagree", "TP")
    fig = new_figure(0.9 + 2.8 * len(models), 0.8 + 1.5 * len(aggregations), constrained=False)
    axes = fig.subplots(len(aggregations), len(models), squeeze=False)
    margins(fig, left=1.6, right=0.15, top=0.8, bottom=0.45, wspace=0.4, hspace=0.45)
    rng = np.random.default_rng(0)
    for r, aggregation in enumerate(aggregations):
        for c, (backbone, model) in enumerate(models):
            ax = axes[r, c]
            d = df[(df["backbone"] == backbone) & (df["prediction_model"] == model) & (df["aggregation"] == aggregation)]
            kind = d["tp_fraction"].map(_group)
            values = [d.loc[kind == g, "score"].to_numpy(float) for g in groups]
            present = [i for i, v in enumerate(values) if v.size]
            if present:
                ax.boxplot([values[i] for i in present], positions=present, vert=False, widths=0.6, showfliers=False)
                for i in present:
                    ax.scatter(values[i], i + rng.uniform(-0.18, 0.18, values[i].size), s=5, alpha=0.5,
                               color=("#d62728", "#9467bd", "#2ca02c")[i])
            ax.set_yticks(range(len(groups)))
            ax.set_yticklabels([f"{g} ({v.size})" for g, v in zip(groups, values)] if c == 0 else
                               [f"({v.size})" for v in values], fontsize=7.5)
            ax.tick_params(axis="x", labelsize=7.5)
            ax.xaxis.set_major_locator(MaxNLocator(4))
            ax.grid(axis="x", color="#eeeeee", lw=0.6)
            if r == 0:
                ax.set_title(model_key(backbone, model, several, spec.label), fontsize=9)
            if c == 0:
                ax.set_ylabel(spec.label("aggregation", aggregation), fontsize=8.5)
    figure_title(fig, f"{scenario.title}: i.i.d. lesion scores ({spec.label('measure', measure)}), false-positive "
                      f"against true lesions (all seeds)")
    return save(fig, path)
