"""Paired comparisons: which choice of one component wins where, and whether the data separate it.

``compare(run, vary)`` (``values-seg compare RUN_DIR --vary aggregation|measure|prediction_model``)
groups the results into sets of methods that differ in the ``vary`` component only (same data
set, backbone, and the other components; one metric and split). In each set the winner is the
choice with the best value (mean over seeds, the metric's declared direction), and it is
compared with every other choice by the paired bootstrap of the difference: both distributions
come from the same case resamples (bootstrap.parquet; pooled over the seeds both have with the
same seed draws, :meth:`~values_seg.report.intervals.Distributions.pooled`), so the
difference's distribution is their difference resample by resample
(:func:`values_seg.statistics.paired_result`: percentile interval and two-sided p-value).
A difference is significant where ``p < 1 - level`` (the statistics level of the run, 0.05 at
0.95). Metrics that are another metric's reference value, and rows comparing two measures (the
separation study), are left out.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from values_seg.report.intervals import ROW, group_rows
from values_seg.report.rundir import RunData
from values_seg.report.spec import HIGHER, LOWER, natural_key
from values_seg.statistics import paired_p_value, percentile_interval

VARY = ("aggregation", "measure", "prediction_model")
#: The columns that identify one set of compared methods (besides the varied one).
SET_KEYS = ["dataset", "scenario", "backbone", "prediction_model", "measure", "aggregation", "task", "metric", "split"]
RESULT_COLUMNS = ["direction", "winner", "other", "winner_value", "other_value", "difference", "ci_low", "ci_high",
                  "p_value", "significant", "n_seeds"]


def _usable(run: RunData, vary: str, task: str | None) -> pd.DataFrame:
    res = run.results
    if vary not in VARY:
        raise ValueError(f"compare: --vary must be one of {', '.join(VARY)}, got {vary!r}")
    df = res[(res["versus"] == "") & np.isfinite(res["value"].to_numpy(dtype=float))]
    if task is not None:
        known = sorted(t for t in res["task"].unique() if t)
        if task not in known:
            raise ValueError(f"compare: no task {task!r} in the results; tasks: {', '.join(known)}")
        df = df[df["task"] == task]
    if vary != "prediction_model":  # a metric that does not depend on the measure / aggregation has none
        df = df[df[vary] != ""]
    keep = [not run.spec.is_reference(t, m) for t, m in zip(df["task"], df["metric"])]
    return df[keep]


def compare(run: RunData, vary: str, task: str | None = None) -> pd.DataFrame:
    """One row per (set of methods, choice other than the winner): the paired difference
    ``winner - other`` with its interval, p-value and significance (see the module docstring).
    Without stored distributions the values alone (interval, p-value NaN; ``significant`` False)."""
    df = _usable(run, vary, task)
    dist = run.distributions
    alpha = 1.0 - (dist.level if dist is not None else 0.95)
    keys = [k for k in SET_KEYS if k != vary]
    rows, resampled = [], []  # resampled: (row, the pair's resampled differences)
    # per method (set keys + the varied choice): its seeds' values and distribution rows
    methods, members = group_rows(df, keys + [vary])
    values, seeds, row_ids = df["value"].to_numpy(dtype=float), df["seed"].tolist(), df[ROW].to_numpy()
    sets: dict[tuple, dict] = {}
    for index, m in zip(methods.itertuples(index=False, name=None), members):
        sets.setdefault(index[:-1], {})[index[-1]] = {seeds[i]: (values[i], row_ids[i]) for i in m}
    for key, choices in sets.items():
        if len(choices) < 2:
            continue
        meta = dict(zip(keys, key))
        direction = run.spec.direction(meta["task"], meta["metric"])
        if direction not in (HIGHER, LOWER):
            continue  # undeclared metric: no winner
        sign = 1.0 if direction == HIGHER else -1.0
        means = {c: float(np.mean([v for v, _ in per_seed.values()])) for c, per_seed in choices.items()}
        order = sorted(means, key=lambda c: (-sign * means[c], run.spec.order_key(vary, c)))
        winner = order[0]
        for other in order[1:]:
            seeds = sorted(set(choices[winner]) & set(choices[other]), key=natural_key)
            a = [choices[winner][s] for s in seeds]
            b = [choices[other][s] for s in seeds]
            difference = float(np.mean([v for v, _ in a]) - np.mean([v for v, _ in b])) if seeds else math.nan
            rows_a, rows_b = np.array([r for _, r in a]), np.array([r for _, r in b])
            if dist is not None and seeds and (rows_a >= 0).all() and (rows_b >= 0).all():
                resampled.append((len(rows), dist.pooled(rows_a) - dist.pooled(rows_b)))
            rows.append({**meta, "direction": direction, "winner": winner, "other": other,
                         "winner_value": means[winner], "other_value": means[other], "difference": difference,
                         "ci_low": math.nan, "ci_high": math.nan, "p_value": math.nan, "n_seeds": len(seeds)})
    out = pd.DataFrame(rows, columns=keys + RESULT_COLUMNS)
    if out.empty:
        return out
    if resampled:  # every pair's interval and p-value at once (paired_result's, vectorised over the pairs)
        at, differences = zip(*resampled)
        differences = np.stack(differences)  # [pairs, B]
        low, high = percentile_interval(differences.T, dist.level)
        out.loc[list(at), ["ci_low", "ci_high", "p_value"]] = np.column_stack([low, high, paired_p_value(differences)])
    out["significant"] = np.isfinite(out["p_value"]) & (out["p_value"] < alpha)
    columns = {k: out[k].tolist() for k in keys}  # plain lists: a pandas lookup per row and key costs seconds
    order = sorted(range(len(out)), key=lambda i: (
        run.spec.metric_order_key(columns["task"][i], columns["metric"][i], columns["split"][i]),
        tuple(natural_key(columns[k][i]) for k in keys[:-3])))
    return out.iloc[order].reset_index(drop=True)


def wins(comparisons: pd.DataFrame, run: RunData, vary: str) -> pd.DataFrame:
    """Per (task, metric, split) and choice: in how many sets it wins, and in how many of those it
    is significantly better than every other choice (``wins``, ``significant_wins``, ``sets``)."""
    if comparisons.empty:
        return pd.DataFrame(columns=["task", "metric", "split", "choice", "wins", "significant_wins", "sets"])
    metric_keys = ["task", "metric", "split"]
    per_set, members = group_rows(comparisons, [k for k in SET_KEYS if k != vary])
    winner, other = comparisons["winner"].to_numpy(), comparisons["other"].to_numpy()
    significant = comparisons["significant"].to_numpy(dtype=bool)
    set_winner = np.array([winner[m[0]] for m in members], dtype=object)  # the sets' rows share their winner
    set_clear = np.array([significant[m].all() for m in members])  # significantly better than every other
    metrics, of_metric = group_rows(comparisons, metric_keys)
    _, sets_of_metric = group_rows(per_set, metric_keys)  # the same groups, in the same order of appearance
    rows = []
    groups = zip(metrics.itertuples(index=False, name=None), of_metric, sets_of_metric)
    for (task, metric, split), pairs, sets in sorted(groups, key=lambda g: run.spec.metric_order_key(*g[0])):
        for c in run.spec.ordered(vary, set(winner[pairs]) | set(other[pairs])):
            won = set_winner[sets] == c
            rows.append({"task": task, "metric": metric, "split": split, "choice": c, "wins": int(won.sum()),
                         "significant_wins": int((won & set_clear[sets]).sum()), "sets": len(sets)})
    return pd.DataFrame(rows)


def write(comparisons: pd.DataFrame, summary: pd.DataFrame, run_dir: Path, vary: str) -> tuple[Path, Path]:
    """``RUN_DIR/comparisons/<vary>.csv`` (every pair) and ``<vary>_wins.csv`` (the summary)."""
    from values_seg.run_directory import atomic_write

    folder = Path(run_dir) / "comparisons"
    detail, wins_path = folder / f"{vary}.csv", folder / f"{vary}_wins.csv"
    atomic_write(run_dir, detail, lambda tmp: comparisons.to_csv(tmp, index=False))  # never through a link
    atomic_write(run_dir, wins_path, lambda tmp: summary.to_csv(tmp, index=False))
    return detail, wins_path


def describe(summary: pd.DataFrame, comparisons: pd.DataFrame, run: RunData, vary: str) -> str:
    """Plain-text summary: per metric, which choice wins in how many sets (significantly where
    it beats every other choice with p < alpha), and the sets whose winner is not significant."""
    if summary.empty:
        return f"No sets of methods that differ in the {vary} only (with a declared metric direction)."
    label = run.spec.label
    lines = []
    for (task, metric, split), g in summary.groupby(["task", "metric", "split"], sort=False):
        ms = run.spec.metric_spec(task, metric)
        where = {"iid": " i.i.d.", "ood": " OoD"}.get(split, "")
        parts = [f"{label(vary, r.choice)} {r.wins}/{r.sets} ({r.significant_wins} significant)"
                 for r in g.itertuples() if r.wins]
        lines.append(f"{ms.title}{where} {run.spec.arrow(task, metric)}: wins " + ", ".join(parts))
    unclear = comparisons[~comparisons["significant"]]
    lines.append("")
    lines.append(f"{len(comparisons)} paired differences, {int(comparisons['significant'].sum())} significant; "
                 f"{len(unclear)} not significant (n.s.: the data do not separate the two choices).")
    return "\n".join(lines)


def details(comparisons: pd.DataFrame, run: RunData, vary: str) -> str:
    """One line per compared pair: where, the winner and the other choice, the difference with its
    interval and p-value, "n.s." where not significant."""
    label = run.spec.label
    lines = []
    where_keys = [k for k in ("scenario", "backbone", "prediction_model", "measure", "aggregation") if k != vary]
    for r in comparisons.itertuples(index=False):
        d = r._asdict()
        where = " · ".join(label(k, d[k]) for k in where_keys if d.get(k))
        ms = run.spec.metric_spec(d["task"], d["metric"])
        split = {"iid": " i.i.d.", "ood": " OoD"}.get(d["split"], "")
        interval = f" [{d['ci_low'] * 100:+.2f}, {d['ci_high'] * 100:+.2f}]" if math.isfinite(d["ci_low"]) else ""
        p = f"p = {d['p_value']:.3f}" if math.isfinite(d["p_value"]) else "no p-value"
        mark = "" if d["significant"] else "  n.s."
        lines.append(f"{ms.title}{split} | {where}: {label(vary, d['winner'])} {d['winner_value'] * 100:.2f} vs "
                     f"{label(vary, d['other'])} {d['other_value'] * 100:.2f}: {d['difference'] * 100:+.2f}{interval}, "
                     f"{p}{mark}")
    return "\n".join(lines)
