"""Risk-coverage and generalized-risk-coverage curves (failure detection, appendix A.3; Traub et
al. 2024) and reliability diagrams (calibration, appendix A.5), one figure per scenario.

Risk-coverage layout: rows = test subsets (i.i.d., OoD), columns = prediction models; in each
panel one curve per measure for ONE aggregation (the first present in canonical order: patch,
threshold, image, ...), risk = 1 − Dice, confidence = −aggregated uncertainty, computed per seed
with :func:`values_seg.metrics.risk_coverage_curve` and averaged over seeds on a common coverage
grid (the curve is piecewise linear, as AURC integrates it); the legend gives the mean AURC × 100
(:func:`values_seg.metrics.aurc`). A dashed grey curve is the oracle (confidence = −risk).
The generalized variant plots the generalized risk (the summed risk of the accepted cases over
all cases, :func:`values_seg.metrics.generalized_risk_coverage_curve`) with AUGRC in the legend
and a dotted random ranking (the straight line to the mean risk); read from coverage 1 to 0 it
is the image-level Dice error-retention curve of Shifts (retained fraction = coverage, the
rejected cases replaced by the reference), its areas the ``dice_retention`` task's R-AUCs.

Reliability layout: rows = prediction models, one panel per measure of the model (PU, AU, EU
order, left-aligned; the panel title names model, measure and type); accuracy against mean
confidence per bin for i.i.d. and OoD, from the calibration bins summed over seeds
(:class:`values_seg.metrics.CalibrationBins`, :func:`values_seg.metrics.reliability_diagram`);
the legend gives the ACE × 100 as the mean over seeds of :func:`values_seg.metrics.ace_from_bins`
(what the downstream table reports).
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
PANEL = ["backbone", "prediction_model", "ood"]
SUBSETS = (("iid", False), ("ood", True))


def _models(df: pd.DataFrame, spec: ReportSpec) -> list[tuple[str, str]]:
    pairs = df[["backbone", "prediction_model"]].drop_duplicates().itertuples(index=False)
    return sorted(pairs, key=lambda p: (natural_key(p[0]), spec.order_key("prediction_model", p[1])))


def _measures(df: pd.DataFrame, spec: ReportSpec) -> list[tuple[str, str]]:
    """(measure, uncertainty type) pairs of one model, PU/AU/EU then measure order."""
    types = {m: next((t for t in g["uncertainty_type"] if t), "") for m, g in df.groupby("measure")}
    order = sorted(types, key=lambda m: (spec.order_key("uncertainty_type", types[m] or "~"), spec.order_key("measure", m)))
    return [(m, types[m]) for m in order]


def scored_test_cases(cases: pd.DataFrame) -> pd.DataFrame:
    """Scored test cases: rows of the test split (when the column names one) with a finite score and Dice."""
    df = cases
    if "split" in df.columns and (df["split"] == "test").any():
        df = df[df["split"] == "test"]
    ok = np.isfinite(df["score"].to_numpy(dtype=float)) & np.isfinite(df["dice"].to_numpy(dtype=float))
    return df[ok & (df["measure"] != "") & (df["aggregation"] != "")]


#: (curve, area, area name, y label) of the two kinds of curve
KINDS = {
    False: (metrics.risk_coverage_curve, metrics.aurc, "AURC", "selective risk (1 − Dice)"),
    True: (metrics.generalized_risk_coverage_curve, metrics.augrc, "AUGRC", "generalized risk (1 − Dice)"),
}


def _mean_curve(groups, generalized: bool = False) -> tuple[np.ndarray, float]:
    """Mean (generalized) selective risk on GRID and mean AURC (AUGRC) over the (risks, confidences) of each seed."""
    curve_of, area_of = KINDS[generalized][:2]
    curves, areas = [], []
    for risks, conf in groups:
        coverage, risk = curve_of(risks, conf)
        curves.append(np.interp(GRID, coverage[::-1], risk[::-1]))
        areas.append(area_of(risks, conf))
    return np.mean(curves, axis=0), float(np.mean(areas))


def plot_risk_coverage(cases: pd.DataFrame, scenario: Scenario, path: Path, spec: ReportSpec,
                       generalized: bool = False) -> tuple[Path, str] | None:
    """One scenario's risk-coverage figure (``generalized``: generalized-risk-coverage); returns
    (path, aggregation shown) or None without data."""
    area_name, y_label = KINDS[generalized][2:]
    df = scored_test_cases(select(cases, scenario))
    if df.empty:
        return None
    aggregation = spec.ordered("aggregation", df["aggregation"].unique())[0]
    df = df[df["aggregation"] == aggregation].drop_duplicates(PANEL + ["measure", "seed", "case_id"])
    # each (panel, measure, seed)'s cases as positions into two numpy columns: no pandas per curve
    members = df.groupby(PANEL + ["measure", "seed"], sort=True).indices
    risk_of, confidence_of = 1.0 - df["dice"].to_numpy(dtype=float), -df["score"].to_numpy(dtype=float)
    models = _models(df, spec)
    subsets = [(s, flag) for s, flag in SUBSETS if (df["ood"] == flag).any()]
    several = len({b for b, _ in models}) > 1
    colors = measure_colors(df["measure"].unique(), spec)
    fig = new_figure(0.6 + 3.4 * len(models), 1.15 + 3.0 * len(subsets), constrained=False)
    axes = fig.subplots(len(subsets), len(models), squeeze=False)
    margins(fig, left=0.65, right=0.15, top=0.85, bottom=0.5, wspace=0.3, hspace=0.35)
    legend: dict[str, Line2D] = {}  # one legend for the figure: measures by colour, oracle, random
    for r, (subset, flag) in enumerate(subsets):
        for c, (backbone, model) in enumerate(models):
            ax = axes[r, c]
            d = df[(df["backbone"] == backbone) & (df["prediction_model"] == model) & (df["ood"] == flag)]
            n_cases = 0
            oracle = []
            areas = []
            for measure, utype in _measures(d, spec):
                groups = [(risk_of[i], confidence_of[i]) for key, i in members.items()
                          if key[:4] == (backbone, model, flag, measure)]  # per seed, in seed order
                if not groups:
                    continue
                n_cases = max(n_cases, max(len(g[0]) for g in groups))
                if not oracle:
                    oracle = [(rk, -rk) for rk, _ in groups]
                curve, area = _mean_curve(groups, generalized)
                line, = ax.plot(GRID, curve, color=colors[measure], lw=1.6)
                legend.setdefault(spec.label("measure", measure), line)
                areas.append(f"{measure_title(measure, utype, spec)}  {area * 100:.1f}")
            if oracle:
                curve, area = _mean_curve(oracle, generalized)
                legend["oracle"], = ax.plot(GRID, curve, color="#888888", lw=1.2, ls="--")
                areas.append(f"oracle  {area * 100:.1f}")
                if generalized:  # a random ranking keeps the mean risk per accepted case: a straight line
                    mean_risk = float(np.mean([rk.mean() for rk, _ in oracle]))
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
    n_bins = int(df["bin"].max()) + 1
    count, conf, corr = np.zeros(n_bins, np.int64), np.zeros(n_bins), np.zeros(n_bins)
    b = df["bin"].to_numpy()
    np.add.at(count, b, np.rint(df["count"].to_numpy(dtype=float)).astype(np.int64))
    np.add.at(conf, b, df["confidence_sum"].to_numpy(dtype=float))
    np.add.at(corr, b, df["correct_sum"].to_numpy(dtype=float))
    return metrics.CalibrationBins(count, conf, corr)


def calibration_bins(calibration: pd.DataFrame) -> dict[tuple, metrics.CalibrationBins]:
    """CalibrationBins per (backbone, prediction_model, measure, subset, seed) of a calibration table."""
    keys = ["backbone", "prediction_model", "measure", "subset", "seed"]
    return {k: _bins(g) for k, g in calibration.groupby(keys, sort=True)}


def plot_reliability(calibration: pd.DataFrame, scenario: Scenario, path: Path, spec: ReportSpec) -> Path | None:
    """One scenario's reliability diagrams; None without data."""
    df = select(calibration, scenario)
    df = df[df["measure"] != ""]
    if df.empty or not (df["count"] > 0).any():
        return None
    bins = calibration_bins(df)
    models = _models(df, spec)
    several = len({b for b, _ in models}) > 1
    per_model = [_measures(df[(df["backbone"] == b) & (df["prediction_model"] == m)], spec) for b, m in models]
    ncols = max(len(p) for p in per_model)
    fig = new_figure(0.75 + 2.9 * ncols, 1.35 + 2.9 * len(models), constrained=False)
    axes = fig.subplots(len(models), ncols, squeeze=False)
    margins(fig, left=0.6, right=0.15, top=1.0, bottom=0.35, wspace=0.35, hspace=0.55)
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
            aces = []
            for subset in spec.ordered("subset", dmodel["subset"].unique()):
                per_seed = [b for k, b in bins.items() if k[:4] == (backbone, model, measure, subset) and b.count.sum()]
                if not per_seed:
                    continue
                ace = float(np.mean([metrics.ace_from_bins(b) for b in per_seed]))
                diagram = metrics.reliability_diagram(sum(per_seed))
                color, marker = split_style(subset)
                ok = diagram.count > 0
                line, = ax.plot(diagram.confidence[ok], diagram.accuracy[ok], marker=marker, ms=3.5, lw=1.2,
                                color=color)
                legend.setdefault(spec.label("subset", subset), line)
                aces.append(f"{spec.label('subset', subset)}  {ace * 100:.1f}")
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1.02)
            ax.set_aspect("equal")
            bottom = r == len(models) - 1 or c >= len(per_model[r + 1])  # no panel below
            grid_lines(ax, [0, 0.5, 1], [0, 0.5, 1], x_ticks=bottom, y_ticks=c == 0)
            if aces:
                panel_note(ax, "ACE ×100\n" + "\n".join(aces))
            ax.set_title(f"{model_key(backbone, model, several, spec.label)} · {measure_title(measure, utype, spec)}",
                         fontsize=9, y=1.0)
            ax.tick_params(labelsize=7)
            if bottom:
                ax.set_xlabel("confidence (Platt-scaled)", fontsize=8)
            if c == 0:
                ax.set_ylabel("accuracy", fontsize=8)
    figure_title(fig, f"{scenario.title}: reliability diagrams (pixel level, bins summed over seeds)")
    top_legend(fig, list(legend.values()), list(legend), below_top=0.36)
    return save(fig, path)
