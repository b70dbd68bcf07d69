"""Risk-coverage and generalized-risk-coverage curves and reliability diagrams, one figure per
scenario, drawn from the curves the tasks wrote into ``curves.parquet`` (nothing is computed
again: the points, the areas in the legends and the bins are the tasks' own).

Both layouts: docs/design-rationale.md, "Risk-coverage curves and reliability diagrams".
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from values_seg import metrics
from values_seg.report.spec import ReportSpec, natural_key
from values_seg.report.common import Scenario, model_key, select
from values_seg.report.plots._style import (figure_title, margins, measure_colors, measure_title, new_figure,
                                             grid_lines, outer_ticks, panel_note, save, split_style, top_legend)

GRID = np.linspace(0.0, 1.0, 201)
SUBSETS = (("iid", False), ("ood", True))


def _models(df: pd.DataFrame, spec: ReportSpec) -> list[tuple[str, str]]:
    pairs = df[["backbone", "prediction_model"]].drop_duplicates().itertuples(index=False)
    return sorted(pairs, key=lambda p: (natural_key(p[0]), spec.order_key("prediction_model", p[1])))


def _measures(df: pd.DataFrame, spec: ReportSpec) -> list[tuple[str, str]]:
    """(measure, uncertainty type) pairs of one model, PU/AU/EU then measure order."""
    types = {m: next((t for t in g["uncertainty_type"] if t), "") for m, g in df.groupby("measure")}
    order = sorted(types, key=lambda m: (spec.order_key("uncertainty_type", types[m] or "~"), spec.order_key("measure", m)))
    return [(m, types[m]) for m in order]


#: (area name, y label) of the two kinds of curve
KINDS = {
    False: ("risk_coverage", "AURC", "selective risk (1 − Dice)"),
    True: ("generalized_risk_coverage", "AUGRC", "generalized risk (1 − Dice)"),
}
CURVE_GROUP = ["backbone", "prediction_model", "split", "ranking", "measure", "seed"]


def _mean_curve(groups) -> tuple[np.ndarray, float]:
    """Mean curve on GRID and mean area over the (coverage, risk, area) of each seed."""
    curves = [np.interp(GRID, coverage[::-1], risk[::-1]) for coverage, risk, _ in groups]
    return np.mean(curves, axis=0), float(np.mean([area for _, _, area in groups]))


def plot_risk_coverage(curves: pd.DataFrame, scenario: Scenario, path: Path, spec: ReportSpec,
                       generalized: bool = False) -> tuple[Path, str] | None:
    """One scenario's risk-coverage figure (``generalized``: generalized-risk-coverage) from the
    rows of both curve kinds; returns (path, aggregation shown) or None without data."""
    kind, area_name, y_label = KINDS[generalized]
    df = select(curves, scenario)
    df = df[df["curve"] == kind]
    measured = df[(df["ranking"] == "uncertainty") & (df["measure"] != "") & (df["aggregation"] != "")]
    if measured.empty:
        return None
    aggregation = spec.ordered("aggregation", measured["aggregation"].unique())[0]
    df = df[(df["aggregation"] == aggregation) | (df["ranking"] == "oracle")].sort_values(CURVE_GROUP + ["point"])
    # each curve's points as positions into numpy columns: no pandas per curve
    members = df.groupby(CURVE_GROUP, sort=True).indices
    coverage_of, risk_of = df["coverage"].to_numpy(dtype=float), df["risk"].to_numpy(dtype=float)
    area_of, n_of = df["area"].to_numpy(dtype=float), df["n"].to_numpy(dtype=float)
    df = df[df["ranking"] == "uncertainty"]
    models = _models(df, spec)
    subsets = [(s, flag) for s, flag in SUBSETS if (df["split"] == s).any()]
    several = len({b for b, _ in models}) > 1
    colors = measure_colors(df["measure"].unique(), spec)
    fig = new_figure(0.6 + 3.4 * len(models), 1.15 + 3.0 * len(subsets), constrained=False)
    axes = fig.subplots(len(subsets), len(models), squeeze=False)
    margins(fig, left=0.65, right=0.15, top=0.85, bottom=0.5, wspace=0.3, hspace=0.35)
    legend: dict[str, Line2D] = {}  # one legend for the figure: measures by colour, oracle, random
    for r, (subset, flag) in enumerate(subsets):
        for c, (backbone, model) in enumerate(models):
            ax = axes[r, c]
            d = df[(df["backbone"] == backbone) & (df["prediction_model"] == model) & (df["split"] == subset)]
            n_cases = 0
            areas = []

            def seeds(ranking: str, measure: str) -> list:  # per seed, in seed order
                return [(coverage_of[i], risk_of[i], area_of[i[0]]) for key, i in members.items()
                        if key[:5] == (backbone, model, subset, ranking, measure)]

            oracle = seeds("oracle", "")
            for measure, utype in _measures(d, spec):
                groups = seeds("uncertainty", measure)
                if not groups:
                    continue
                n_cases = max(n_cases, int(max(n_of[i[0]] for key, i in members.items()
                                               if key[:5] == (backbone, model, subset, "uncertainty", measure))))
                curve, area = _mean_curve(groups)
                line, = ax.plot(GRID, curve, color=colors[measure], lw=1.6)
                legend.setdefault(spec.label("measure", measure), line)
                areas.append(f"{measure_title(measure, utype, spec)}  {area * 100:.1f}")
            if oracle and areas:
                curve, area = _mean_curve(oracle)
                legend["oracle"], = ax.plot(GRID, curve, color="#888888", lw=1.2, ls="--")
                areas.append(f"oracle  {area * 100:.1f}")
                if generalized:  # a random ranking keeps the mean risk per accepted case: a straight line
                    mean_risk = float(np.mean([rk[0] for _, rk, _ in oracle]))  # at coverage 1
                    legend["random"], = ax.plot([0, 1], [0, mean_risk], color="#888888", lw=1.0, ls=":")
                    areas.append(f"random  {mean_risk * 50:.1f}")
                panel_note(ax, f"{area_name} ×100\n" + "\n".join(areas))
            ax.set_title(f"{model_key(backbone, model, several, spec.label)} · {spec.label('subset', subset)} "
                         f"(n={n_cases})", fontsize=9, y=1.0)
            if r == len(subsets) - 1:
                ax.set_xlabel("coverage", fontsize=9)
            if c == 0:
                ax.set_ylabel(y_label, fontsize=9)
    outer_ticks(axes, (0.0, 1.0))  # shared axes: x in [0, 1], y per row
    kind = "generalized-risk-coverage" if generalized else "risk-coverage"
    figure_title(fig, f"{scenario.title}: {kind} curves ({spec.label('aggregation', aggregation)} aggregation, "
                      f"mean over seeds)")
    order = [k for k in legend if k not in ("oracle", "random")] + [k for k in ("oracle", "random") if k in legend]
    top_legend(fig, [legend[k] for k in order], order, below_top=0.36)
    return save(fig, path), aggregation


def _bins(df: pd.DataFrame) -> metrics.CalibrationBins:
    b = df["bin"].to_numpy().astype(np.int64)  # a float column where curves.parquet mixes kinds
    n_bins = int(b.max()) + 1
    count, conf, corr = np.zeros(n_bins, np.int64), np.zeros(n_bins), np.zeros(n_bins)
    np.add.at(count, b, np.rint(df["count"].to_numpy(dtype=float)).astype(np.int64))
    np.add.at(conf, b, df["confidence_sum"].to_numpy(dtype=float))
    np.add.at(corr, b, df["correct_sum"].to_numpy(dtype=float))
    return metrics.CalibrationBins(count, conf, corr)


def reliability_bins(rows: pd.DataFrame) -> dict[tuple, tuple[metrics.CalibrationBins, float]]:
    """(bins, the task's area) per (backbone, prediction_model, measure, split, seed) of reliability rows."""
    keys = ["backbone", "prediction_model", "measure", "split", "seed"]
    return {k: (_bins(g), float(g["area"].iloc[0])) for k, g in rows.groupby(keys, sort=True)}


def plot_reliability(rows: pd.DataFrame, scenario: Scenario, path: Path, spec: ReportSpec) -> Path | None:
    """One scenario's reliability diagrams from the ``reliability`` curve rows; None without data."""
    df = select(rows, scenario)
    df = df[df["measure"] != ""]
    if df.empty or not (df["count"] > 0).any():
        return None
    bins = reliability_bins(df)
    models = _models(df, spec)
    several = len({b for b, _ in models}) > 1
    per_model = [_measures(df[(df["backbone"] == b) & (df["prediction_model"] == m)], spec) for b, m in models]
    ncols = max(len(p) for p in per_model)
    # each square panel has its count strip under it (inset axes below the panel): room for it
    fig = new_figure(0.75 + 2.9 * ncols, 2.35 + 2.6 * len(models) + 1.7 * (len(models) - 1), constrained=False)
    axes = fig.subplots(len(models), ncols, squeeze=False)
    margins(fig, left=0.6, right=0.15, top=1.0, bottom=1.35, wspace=0.35, hspace=1.7)
    legend: dict[str, Line2D] = {}  # one legend for the figure: the subsets
    for r, ((backbone, model), measures) in enumerate(zip(models, per_model)):
        dmodel = df[(df["backbone"] == backbone) & (df["prediction_model"] == model)]
        for c in range(ncols):
            ax = axes[r, c]
            if c >= len(measures):
                ax.set_axis_off()
                continue
            measure, utype = measures[c]
            legend.setdefault("perfectly calibrated", ax.plot([0, 1], [0, 1], color="#888888", lw=1, ls="--")[0])
            strip = ax.inset_axes([0.0, -0.37, 1.0, 0.27])  # the ACE bins' share of the pairs, under the panel
            aces = []
            for subset in spec.ordered("subset", dmodel["split"].unique()):
                per_seed = [(b, area) for k, (b, area) in bins.items()
                            if k[:4] == (backbone, model, measure, subset) and b.count.sum()]
                if not per_seed:
                    continue
                ace = float(np.mean([area for _, area in per_seed]))
                diagram = metrics.reliability_diagram(sum(b for b, _ in per_seed))
                color, marker = split_style(subset)
                ok = diagram.count > 0
                line, = ax.plot(diagram.confidence[ok], diagram.accuracy[ok], marker=marker, ms=3.5, lw=1.2,
                                color=color)
                strip.stairs(np.maximum(diagram.count / diagram.count.sum(), 1e-6), diagram.bin_edges, color=color,
                             lw=1.1, baseline=1e-6)
                legend.setdefault(spec.label("subset", subset), line)
                aces.append(f"{spec.label('subset', subset)}  {ace * 100:.1f} ({int(ok.sum())} bins)")
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1.02)
            ax.set_aspect("equal")
            grid_lines(ax, [0, 0.5, 1], [0, 0.5, 1], x_ticks=False, y_ticks=c == 0)
            strip.axhline(metrics.MIN_BIN_MASS, color="#888888", lw=0.8, ls="--")
            strip.set_xlim(0, 1)
            strip.set_yscale("log")
            strip.set_ylim(1e-6, 1.5)
            strip.set_yticks([1e-6, 1e-3, 1])
            strip.set_yticklabels(["", "0.1%", "100%"] if c == 0 else [])
            strip.tick_params(labelsize=6)
            strip.set_xticks([0, 0.5, 1])
            if c == 0:
                strip.set_ylabel("share of\npairs", fontsize=6)
            if aces:
                panel_note(ax, "ACE (merged bins) ×100\n" + "\n".join(aces))
            ax.set_title(f"{model_key(backbone, model, several, spec.label)} · {measure_title(measure, utype, spec)}",
                         fontsize=9, y=1.0)
            ax.tick_params(labelsize=7)
            strip.set_xlabel("confidence (Platt-scaled)", fontsize=8)
            if c == 0:
                ax.set_ylabel("accuracy", fontsize=8)
    figure_title(fig, f"{scenario.title}: reliability diagrams (pixel level, bins summed over seeds)")
    top_legend(fig, list(legend.values()), list(legend), below_top=0.36)
    return save(fig, path)
