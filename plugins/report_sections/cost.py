"""Report section: each method's cost beside its quality: ``costs.csv`` as a table and, per task, the
task's primary metric against the inference cost per case (log scale), the Pareto front marked.

What the costs are and how they are measured: docs/design-rationale.md, "Cost".
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from values_seg import hookimpl
from values_seg.report import latex, markdown
from values_seg.report.common import scenarios, slugify, supported_only
from values_seg.report.costs import METHOD, method_costs
from values_seg.report.intervals import ROW, Distributions
from values_seg.statistics import adjust, family_method, paired_p_value
from values_seg.report.rundir import read_table
from values_seg.report.section import ReportSection
from values_seg.report.spec import LOWER
from values_seg.storage.run_files import COSTS, FIGURES, TABLES

#: the inference cost on the x axis: FLOPs per case where every point has them, else seconds per case
AXES = (("flops_per_case", "inference GFLOPs per case", 1e-9),
        ("inference_seconds_per_case", "inference ms per case", 1e3))


class CostSection(ReportSection):
    """Cost beside quality: each combination's training and inference cost, and per task its primary
    metric against the inference cost with the Pareto front."""

    name = "cost"
    what = "the cost section"
    order = 36  # after the downstream tables
    outputs = (f"{FIGURES}/cost_*.png", f"{TABLES}/cost*.tex", f"{TABLES}/cost*.csv")

    def applies(self, run) -> bool:
        return (run.run_dir / COSTS).is_file()

    def build(self, ctx) -> None:
        _cost(ctx)


def pareto_front(cost, quality, higher_is_better: bool = True) -> np.ndarray:
    """Which points no other point dominates: none costs at most as much and is at least as good,
    and strictly cheaper or better. Points with a missing cost or quality are never on it."""
    x = np.asarray(cost, dtype=float)
    y = np.asarray(quality, dtype=float) * (1.0 if higher_is_better else -1.0)
    ok = np.isfinite(x) & np.isfinite(y)
    front = ok.copy()
    for i in np.flatnonzero(ok):
        others = ok & (x <= x[i]) & (y >= y[i]) & ((x < x[i]) | (y > y[i]))
        front[i] = not others.any()
    return front


def quality_points(results: pd.DataFrame, costs: pd.DataFrame, task: str, metric: str, direction: str | None,
                   dist: Distributions | None = None) -> pd.DataFrame:
    """Per method and split, the best measure × aggregation on ``metric`` (mean over seeds, with its
    interval's bounds meaned the same way), joined to the method's costs; the rows the data cannot
    support are left out first. Marks each point on the Pareto front of its (scenario, split) by the
    point estimates (``on_front``), and names the models that dominate it by the data
    (``dominated_by``, :func:`dominated_by`; ``decided_by``: how)."""
    rows = results[(results["task"] == task) & (results["metric"] == metric)].copy()
    if rows.empty:
        return pd.DataFrame()
    for c in METHOD + ["measure", "aggregation", "split"]:
        rows[c] = rows[c].astype(object).fillna("").astype(str) if c in rows else ""
    rows, _ = supported_only(rows, METHOD + ["measure", "aggregation", "split"])
    keys = METHOD + ["split", "measure", "aggregation"]
    means = rows.groupby(keys, sort=False, dropna=False)[["value", "ci_low", "ci_high"]].mean().reset_index()
    means = means.dropna(subset=["value"])
    higher = direction != LOWER
    means = means.sort_values("value", ascending=not higher, kind="stable")
    best = means.drop_duplicates(METHOD + ["split"], keep="first")
    points = best.merge(method_costs(costs), on=METHOD, how="left")
    points["on_front"] = False
    x = _axis(points)[0]
    for _, group in points.groupby(["dataset", "scenario", "split"], sort=False):
        points.loc[group.index, "on_front"] = pareto_front(group[x], group["value"], higher)
    samples = {}
    if dist is not None and ROW in rows:
        for key, g in rows.groupby(keys, sort=False, dropna=False):
            g = g.sort_values("seed", kind="stable") if "seed" in g else g
            samples[key] = (tuple(g["seed"]) if "seed" in g else (), g[ROW].to_numpy(dtype=np.int64))
    point_samples = [samples.get(tuple(r[k] for k in keys)) for _, r in points.iterrows()]
    points["dominated_by"], points["decided_by"] = dominated_by(points, x, higher, point_samples, dist)
    return points


def dominated_by(points: pd.DataFrame, cost: str, higher: bool, samples: list, dist: Distributions | None
                 ) -> tuple[list[str], list[str]]:
    """Per point, the models of its panel (scenario, split) that dominate it by the data: no costlier on
    ``cost`` and better. With the run's resamples (``samples``: per point its seeds and rows of ``dist``)
    the paired bootstrap p-value of the difference, adjusted per split over every pair tested (a family:
    Holm or Benjamini–Hochberg by its size, as the comparisons), below 1 − the run's level; without them,
    the two points' own intervals apart; without intervals, nothing. Also how each point was decided
    ("paired bootstrap", "intervals", "")."""
    n = len(points)
    x = points[cost].to_numpy(dtype=float)
    lo, hi = (points[k].to_numpy(dtype=float) for k in ("ci_low", "ci_high"))
    models = points["prediction_model"].astype(str).tolist()
    pooled = [dist.pooled(s[1]) if dist is not None and s is not None and (s[1] >= 0).all() else None
              for s in samples]  # each point's distribution, pooled over its seeds once
    by, how = [[] for _ in range(n)], [""] * n
    tests: dict[str, list[tuple[int, int, float, bool]]] = {}  # split -> (dominated, dominating, p, j better)
    for _, group in points.groupby(["dataset", "scenario", "split"], sort=False):
        index = [points.index.get_loc(k) for k in group.index]
        for i in index:
            for j in index:
                if i == j or not (np.isfinite(x[i]) and np.isfinite(x[j]) and x[j] <= x[i]):
                    continue
                if pooled[i] is not None and pooled[j] is not None and samples[i][0] == samples[j][0]:
                    difference = pooled[j] - pooled[i]
                    favours = np.nanmean(difference) > 0 if higher else np.nanmean(difference) < 0
                    how[i] = "paired bootstrap"
                    p = float(paired_p_value(difference))
                    tests.setdefault(str(points["split"].iloc[i]), []).append((i, j, p, bool(favours)))
                elif np.isfinite([lo[i], hi[i], lo[j], hi[j]]).all():
                    how[i] = how[i] or "intervals"
                    if (lo[j] > hi[i]) if higher else (hi[j] < lo[i]):
                        by[i].append(models[j])
    alpha = 1.0 - (dist.level if dist is not None else 0.95)
    for family in tests.values():
        p = np.array([t[2] for t in family])
        tested = int(np.isfinite(p).sum())
        if not tested:
            continue
        adjusted = adjust(p, family_method(tested))
        for (i, j, _, favours), q in zip(family, adjusted):
            if favours and np.isfinite(q) and q < alpha:
                by[i].append(models[j])
    return [", ".join(b) for b in by], how


def _axis(points: pd.DataFrame) -> tuple[str, str, float]:
    """The cost column, axis label and scale the figure uses: the first of :data:`AXES` every point has."""
    for column, label, scale in AXES:
        if column in points and points[column].notna().all() and (points[column] > 0).all():
            return column, label, scale
    return AXES[0]


def plot_cost_quality(points: pd.DataFrame, title: str, ylabel: str, higher: bool, models: list[str],
                      path: Path) -> Path | None:
    """A panel per (split, scenario): each method's best value with its interval against its inference
    cost per case (log x), the Pareto front joined by a dashed line and its points filled."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    from values_seg.report.plots._style import PALETTE, new_figure, save

    if points.empty:
        return None
    column, xlabel, scale = _axis(points)
    points = points.assign(_x=points[column] * scale)
    x = "_x"
    splits = list(dict.fromkeys(points["split"]))
    panels = list(dict.fromkeys(zip(points["dataset"], points["scenario"])))
    colors = {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(models)}
    fig = new_figure(2.7 * len(panels) + 0.4, 2.4 * len(splits) + 0.7)
    axes = fig.subplots(len(splits), len(panels), squeeze=False)
    for r, split in enumerate(splits):
        labelled = False
        for c, (dataset, scenario) in enumerate(panels):
            ax = axes[r][c]
            part = points[(points["split"] == split) & (points["dataset"] == dataset)
                          & (points["scenario"] == scenario)]
            part = part[part[x].notna() & (part[x] > 0)]
            if part.empty:
                ax.set_visible(False)
                continue
            for _, p in part.iterrows():
                color = colors.get(p["prediction_model"], "#7f7f7f")
                lo, hi = p.get("ci_low"), p.get("ci_high")
                if pd.notna(lo) and pd.notna(hi):
                    ax.errorbar([p[x]], [p["value"]], yerr=[[max(p["value"] - lo, 0)], [max(hi - p["value"], 0)]],
                                fmt="none", ecolor=color, elinewidth=1, capsize=2)
                ax.plot([p[x]], [p["value"]], "o", ms=6, color=color, mfc="white" if p["dominated_by"] else color,
                        mew=1.4, zorder=3)
            front = part[part["on_front"]].sort_values(x)
            if len(front) > 1:
                ax.step(front[x], front["value"], where="post", ls="--", color="#444444", lw=0.9, zorder=2)
            ax.set_xscale("log")
            ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_title(f"{scenario}" + (f" ({split})" if split else ""), fontsize=8)
            ax.tick_params(which="both", labelsize=6)
            ax.grid(True, which="major", color="#e5e5e5", lw=0.6)
            if r == len(splits) - 1:
                ax.set_xlabel(xlabel, fontsize=7)
            ax.margins(x=0.15, y=0.1)
            if not labelled:
                labelled = True
                ax.set_ylabel(ylabel + (" (higher is better)" if higher else " (lower is better)"), fontsize=7)
    handles = [Line2D([], [], marker="o", ls="", color=colors[m], label=m) for m in models]
    handles += [Line2D([], [], ls="--", color="#444444", label="Pareto front of the point estimates"),
                Line2D([], [], marker="o", ls="", color="#444444", mfc="white",
                       label="dominated: a model no costlier is better (paired test, adjusted)")]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4), fontsize=7, frameon=False)
    fig.suptitle(title, fontsize=10)
    return save(fig, path)


def _number(value, scale: float = 1.0, digits: int = 3) -> str:
    return "" if value is None or pd.isna(value) else f"{float(value) * scale:.{digits}g}"


def _memory(value) -> str:
    return "" if value is None or pd.isna(value) else f"{float(value) / 2**20:.1f}"


COST_HEADERS = ["Scenario", "Backbone", "Model", "Trainings", "Steps", "Train s", "Passes", "GFLOPs", "ms",
                "Peak MiB", "Device"]


def _device(train: str, inference: str) -> str:
    """One device where training and inference ran on the same, else both named."""
    return train or inference if train == inference or not (train and inference) else f"{train} / {inference}"


def _cost_rows(table: pd.DataFrame) -> list[list[str]]:
    """The cost table's cells; passes, GFLOPs and milliseconds per test case."""
    return [[r["scenario"], r["backbone"], r["prediction_model"], _number(r["trainings"], digits=3),
             _number(r["steps"], digits=6), _number(r["train_seconds"], digits=4), _number(r["forward_passes"]),
             _number(r["flops_per_case"], 1e-9), _number(r["inference_seconds_per_case"], 1e3),
             _memory(r["peak_memory_bytes"]), _device(r["train_device"], r["inference_device"])]
            for _, r in table.iterrows()]


def _cost(report) -> None:
    report.add("## Cost beside quality")
    costs = read_table(report.run.run_dir / COSTS, report.run.notes, "the cost section")
    if costs is None:
        report.add(f"No cost table (`{COSTS}`) in this run.")
        return
    spec, results = report.run.spec, report.run.results
    table = _ordered(method_costs(costs), spec)
    seeds = int(table["seeds"].max()) if not table.empty else 0
    report.add(
        f"What each combination cost, from the engine's own clocks (`{COSTS}`, one row per combination): its "
        "trainings (a training another model shares, e.g. test-time augmentation's deterministic one, counted for "
        "each; a fused group's wall time shared equally among its members), their optimizer steps and seconds as "
        "the checkpoints recorded them, and per test case its forward passes (images through a network's "
        "backbone), FLOPs (counted once per prediction on one case), the median seconds and the peak memory of "
        "torch's tensors above what was allocated before (on a GPU torch's allocator peak, each case; on a CPU "
        "the tensors the first case's ops create, alive at once, counted with its FLOPs). A cached training or prediction keeps the cost measured when it "
        "was made, on the device named. Times depend on the machine and what else ran beside it"
        + (f"; mean over {seeds} seeds." if seeds > 1 else "."))
    rows = _cost_rows(table)
    headers, cells = COST_HEADERS, rows
    if table["backbone"].nunique() <= 1:  # one backbone: no column for it in Markdown
        headers, cells = headers[:1] + headers[2:], [r[:1] + r[2:] for r in rows]
    report.add("Passes, GFLOPs and ms per test case; Train s: the trainings' seconds; Device: where the trainings "
               "ran / where inference ran.",
               markdown.table(headers, cells, align=["l"] * (len(headers) - 8) + ["r"] * 7 + ["l"],
                              keys=len(headers) - 8))
    tex = report.tables / "cost.tex"
    report.write_text(tex, latex.tabular(COST_HEADERS, rows, align="lll" + "rrrrrrrl",
                                         blank_repeats=2, comment="Training and inference cost per combination "
                                         "(mean over seeds). Requires \\usepackage{booktabs}."))
    report.write_csv(table, report.tables / "cost.csv")
    report.add(f"*LaTeX: `{report.rel(tex)}`; CSV: `{report.rel(report.tables / 'cost.csv')}`.*")

    models = spec.ordered("prediction_model", list(dict.fromkeys(table["prediction_model"])))
    drawn = []
    for m in primary_metrics(spec):
        direction = spec.direction(m.task, m.metric)
        points = quality_points(results, costs, m.task, m.metric, direction, report.run.distributions)
        if points.empty:
            continue
        order = {(s.dataset, s.scenario): i for i, s in enumerate(scenarios(points))}
        points = points.iloc[sorted(range(len(points)), key=lambda i: (
            spec.order_key("split", points["split"].iloc[i]),
            order.get((points["dataset"].iloc[i], points["scenario"].iloc[i]), 0)))].reset_index(drop=True)
        slug = slugify(m.task)
        out = report.figures / f"cost_{slug}.png"
        title = f"{m.group}: {m.label} against inference cost"
        drawn.append((m, points, report.figure(plot_cost_quality, out, points, title, m.label, direction != LOWER,
                                               models, out)))
        frame = points[METHOD + ["split", "measure", "aggregation", "value", "ci_low", "ci_high", "trainings",
                                 "forward_passes", "flops_per_case", "inference_seconds_per_case", "on_front",
                                 "dominated_by", "decided_by"]]
        report.write_csv(frame, report.tables / f"cost_{slug}.csv")
        report.write_text(report.tables / f"cost_{slug}.tex", _points_tex(frame, m.label))
    if not drawn:
        report.add("No task's primary metric to set against the cost.")
        return

    level = report.run.distributions.level if report.run.distributions is not None else 0.95

    def compose() -> list[str]:
        blocks = ["Per task, its primary metric against the inference cost per case (log scale): for each "
                  "prediction model its best measure and aggregation on that metric (mean over seeds, with its "
                  "confidence interval where the run has one), rows the data cannot support left out. The dashed "
                  "line joins the Pareto front of the point estimates (no other model at most as costly and at "
                  "least as good): a description, not a ranking. A hollow point is dominated by the data: a model "
                  "no costlier on the axis is better, by the paired bootstrap p-value of the difference on the "
                  "run's resamples, adjusted per split over every pair tested (Holm for up to 10 tests, "
                  f"Benjamini–Hochberg beyond), below {1 - level:.2g} (without resamples: the two intervals apart); "
                  "every filled point is not shown to be dominated."]
        for m, points, future in drawn:
            path = future.result()
            if path is None:
                continue
            blocks.append(markdown.figure(report.rel(path), f"cost against {m.label}",
                                          f"{m.group}: {m.label} against the inference cost per case"))
            lines, beaten = [], []
            for (dataset, scenario, split), group in points.groupby(["dataset", "scenario", "split"], sort=False):
                where = f"{scenario}" + (f" ({split})" if split else "")
                front = spec.ordered("prediction_model", list(group.loc[group["on_front"], "prediction_model"]))
                lines.append(f"{where}: " + (", ".join(front) or "none"))
                beaten += [f"{where}: {model} (by {by})" for model, by in
                           zip(group["prediction_model"], group["dominated_by"]) if by]
            undecided = not points["decided_by"].astype(bool).any()
            csv = report.rel(report.tables / f"cost_{slugify(m.task)}.csv")
            blocks.append(f"On the front of the point estimates ({m.label}): " + "; ".join(lines) + ". "
                          + ("No interval in this run: no point is shown to be dominated. " if undecided else
                             "Dominated by the data: " + ("; ".join(beaten) if beaten else "none") + ". ")
                          + f"Table: `{csv}`.")
        return blocks

    report.later(compose)


def primary_metrics(spec) -> list:
    """Each task's primary metric (its ``primary`` declaration), in task (config) order."""
    return [m for m in spec.table_metrics() if (spec.metric(m.task, m.metric) or {}).get("primary")]


def _ordered(table: pd.DataFrame, spec) -> pd.DataFrame:
    """The cost rows in the report's order: scenario (natural order), then prediction model (the run's)."""
    order = {(s.dataset, s.scenario): i for i, s in enumerate(scenarios(table))}
    keys = [(order.get((d, s), len(order)), spec.order_key("prediction_model", m))
            for d, s, m in zip(table["dataset"], table["scenario"], table["prediction_model"])]
    return table.iloc[sorted(range(len(table)), key=keys.__getitem__)].reset_index(drop=True)


def _points_tex(frame: pd.DataFrame, label: str) -> str:
    headers = ["Scenario", "Split", "Prediction model", "Measure", "Aggregation", label, "GFLOPs / case", "ms / case",
               "Front"]
    rows = [[r["scenario"], r["split"], r["prediction_model"], r["measure"], r["aggregation"],
             _number(r["value"], digits=4), _number(r["flops_per_case"], 1e-9),
             _number(r["inference_seconds_per_case"], 1e3), "\\checkmark" if r["on_front"] else ""]
            for _, r in frame.iterrows()]
    return latex.tabular(headers, rows, align="lllll" + "rrrc", blank_repeats=2,
                         comment=f"{label} against the inference cost. Requires \\usepackage{{booktabs}} and amssymb.")


@hookimpl
def values_seg_report_sections():
    return [CostSection]
