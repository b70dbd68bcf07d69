"""The conformal figure of one scenario, from the task's ``crc_risk`` curves (nothing computed again):
columns = prediction models; top row the realised FNR against the level α (solid i.i.d., dashed
OoD, one colour per set family) with the guarantee line FNR = α, OoD points above it ringed in
red; bottom row the sets' size relative to the predicted foreground at each α (i.i.d.)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from values_seg.report.common import Scenario, model_key, select
from values_seg.report.plots._style import figure_title, margins, measure_colors, new_figure, save, top_legend
from values_seg.report.spec import ReportSpec, natural_key

PROBABILITY_LABEL = "probability ≥ 1 − λ"


def family_label(measure: str, spec: ReportSpec) -> str:
    return PROBABILITY_LABEL if not measure else f"pred. + {spec.label('measure', measure)}"


def plot_conformal(curves: pd.DataFrame, scenario: Scenario, path: Path, spec: ReportSpec) -> Path | None:
    df = select(curves, scenario)
    if df.empty:
        return None
    df = df.groupby(["backbone", "prediction_model", "measure", "split", "alpha"], as_index=False)[
        ["risk", "set_size"]].mean()  # mean over seeds
    models = sorted(df[["backbone", "prediction_model"]].drop_duplicates().itertuples(index=False),
                    key=lambda p: (natural_key(p[0]), spec.order_key("prediction_model", p[1])))
    several = len({b for b, _ in models}) > 1
    colors = {"": "#222222", **measure_colors([m for m in df["measure"].unique() if m], spec)}
    fig = new_figure(0.6 + 3.0 * len(models), 6.6, constrained=False)
    axes = fig.subplots(2, len(models), squeeze=False)
    margins(fig, left=0.7, right=0.15, top=1.05, bottom=0.55, wspace=0.3, hspace=0.3)
    legend: dict[str, Line2D] = {}
    top = max(float(df["risk"].max()), float(df["alpha"].max())) * 1.08
    for c, (backbone, model) in enumerate(models):
        d = df[(df["backbone"] == backbone) & (df["prediction_model"] == model)]
        risk_ax, size_ax = axes[0, c], axes[1, c]
        alphas = np.sort(d["alpha"].unique())
        legend["guarantee FNR = α"], = risk_ax.plot(alphas, alphas, color="#999999", lw=1.0, ls=":")
        for measure in sorted(d["measure"].unique(), key=lambda m: (m != "", spec.order_key("measure", m))):
            label = family_label(measure, spec)
            for split, style in (("iid", "-"), ("ood", "--")):
                part = d[(d["measure"] == measure) & (d["split"] == split)].sort_values("alpha")
                if part.empty:
                    continue
                line, = risk_ax.plot(part["alpha"], part["risk"], color=colors[measure], lw=1.4, ls=style,
                                     marker="o", ms=2.5)
                if split == "iid":
                    legend.setdefault(label, line)
                    size_ax.plot(part["alpha"], part["set_size"], color=colors[measure], lw=1.4, marker="o", ms=2.5)
                else:
                    above = part[part["risk"] > part["alpha"]]
                    if not above.empty:
                        legend["OoD above α"] = risk_ax.scatter(above["alpha"], above["risk"], s=40,
                                                                facecolors="none", edgecolors="#d62728", lw=1.2)
        risk_ax.set_ylim(0, top)
        risk_ax.set_title(model_key(backbone, model, several, spec.label), fontsize=9)
        size_ax.set_xlabel("α (target FNR)", fontsize=9)
        size_ax.axhline(1.0, color="#999999", lw=0.8, ls=":")
        for ax in (risk_ax, size_ax):
            ax.tick_params(labelsize=8)
            ax.grid(color="#eeeeee", lw=0.6)
        if c == 0:
            risk_ax.set_ylabel("realised FNR (solid i.i.d., dashed OoD)", fontsize=8.5)
            size_ax.set_ylabel("set size / predicted foreground (i.i.d.)", fontsize=8.5)
    legend["i.i.d."] = Line2D([], [], color="#555555", ls="-")
    legend["OoD"] = Line2D([], [], color="#555555", ls="--")
    figure_title(fig, f"{scenario.title}: conformal risk control of the FNR, calibrated on validation "
                      f"(mean over seeds)")
    top_legend(fig, list(legend.values()), list(legend), below_top=0.4)
    return save(fig, path)
