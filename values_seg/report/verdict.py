"""Which aggregation? Mean ranks of the aggregations, the winner, and where the answer flips.

Per scenario (data set / shift), task and split, on each task's primary metric that depends on
the aggregation: the aggregations are ranked (1 = best in the metric's direction, ties share the
mean rank) within every combination of the other components (backbone × prediction model ×
measure) in which all of them occur (:func:`values_seg.report.ranking.matched_blocks`, the
largest block); a sample-based aggregation (measure ``samples``) does not depend on the measure,
so its row joins every measure of its prediction model. An aggregation's **mean rank** is the
mean over those combinations; its interval is the percentile interval of the mean rank over the
bootstrap resamples of the test cases (the same resamples for every method, so the ranks stay
paired) and its **rank histogram** the share of each rank over combinations and resamples.

The **winner** has the lowest mean rank; it is significantly better than the runner-up where the
runner-up's mean rank minus the winner's is > 0 in all but a share ``p/2`` of the resamples with
``p < 1 - level`` (a paired two-sided bootstrap test, one per panel).

**Flips**: a task and metric whose winner differs between scenarios or splits, and every method
whose aggregation puts a measure significantly below chance (interval above / below the chance
level, for metrics that declare one: the ``separation_role`` "EU" ranking scores, AUROC = 0.5),
where another aggregation of the same model and measure is above it (the paper's collapse of
patch-aggregated PE/EE for OoD detection on GTA5/Cityscapes, section 4.2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from values_seg.report.common import scenarios
from values_seg.report.ranking import METHOD, Methods, matched_blocks
from values_seg.report.rundir import RunData
from values_seg.report.spec import HIGHER, LOWER

SAMPLES = "samples"  # the measure column of sample-based aggregations (values_seg.aggregation.SAMPLES)
#: chance level of metrics by their declared ``separation_role`` ("EU": a ranking score, 0.5 = random)
CHANCE = {"EU": 0.5}


@dataclass
class Verdict:
    ranks: pd.DataFrame  # scenario, task, metric, split, aggregation, mean_rank, ci_low, ci_high, n_combinations, hist
    winners: pd.DataFrame  # scenario, task, metric, split, winner, runner_up, gap, p_value, significant
    flips: pd.DataFrame  # kind, task, metric, where, detail

    @property
    def empty(self) -> bool:
        return self.ranks.empty


def _average_ranks(x: np.ndarray, higher: bool) -> np.ndarray:
    """Ranks along the last axis (1 = best), ties sharing their mean rank."""
    from scipy.stats import rankdata

    return rankdata(-x if higher else x, axis=-1, method="average")


def _with_samples_per_measure(methods: pd.DataFrame) -> pd.DataFrame:
    """A sample-based aggregation's rows copied to every measure of their prediction model."""
    samples = methods[methods["measure"] == SAMPLES]
    if samples.empty:
        return methods
    others = methods[methods["measure"] != SAMPLES]
    measures = others[["backbone", "prediction_model", "measure"]].drop_duplicates()
    joined = samples.drop(columns="measure").merge(measures, on=["backbone", "prediction_model"])
    return pd.concat([others, joined[methods.columns]], ignore_index=True)


def verdict(run: RunData, table: Methods | None = None, task: str | None = None) -> Verdict:
    """The "Which aggregation?" tables of a run (see the module docstring); only ``task`` where given."""
    res, spec, dist = run.results, run.spec, run.distributions
    ranks, winners, below = [], [], []
    if res.empty:
        return Verdict(pd.DataFrame(), pd.DataFrame(), pd.DataFrame())
    table = table or Methods(run)
    level = dist.level if dist is not None else 0.95
    for sc in scenarios(res):
        for ms in spec.figure3_metrics():
            if ms.direction not in (HIGHER, LOWER) or not ms.per_aggregation or task not in (None, ms.task):
                continue
            higher = ms.direction == HIGHER
            splits = [k[4] for k in table.parts if k[:4] == (sc.dataset, sc.scenario, ms.task, ms.metric)]
            for split in spec.ordered("split", splits):
                methods, pooled = table.get(sc, ms.task, ms.metric, split)
                if methods.empty:
                    continue
                where = {"scenario": sc.title, "task": ms.task, "metric": ms.metric, "split": split}
                below += _below_chance(run, ms, methods, where)
                blocks = matched_blocks(_with_samples_per_measure(methods), "aggregation", spec)
                if not blocks:
                    continue
                choices, matched = blocks[0]
                panel = _panel(matched, pooled, choices, higher, level, dist is not None)
                ranks.append(panel.assign(**where))
                winners.append({**where, **_winner(panel, matched, pooled, choices, higher, level)})
    ranks_df = pd.DataFrame() if not ranks else pd.concat(ranks, ignore_index=True)
    winners_df = pd.DataFrame(winners)
    return Verdict(ranks_df, winners_df, _flips(winners_df, below))


def _matrices(matched: pd.DataFrame, pooled: list, choices: list):
    """Observed values ``[combinations, choices]`` and, with bootstrap, resamples ``[B, combinations, choices]``."""
    context = [c for c in METHOD if c != "aggregation"]
    wide = matched.pivot_table(index=context, columns="aggregation", values="value", aggfunc="mean")[choices]
    values = wide.to_numpy(dtype=float)
    if (matched["pooled"] < 0).any():
        return values, None
    index = matched.pivot_table(index=context, columns="aggregation", values="pooled", aggfunc="first")[choices]
    samples = np.stack([np.stack([pooled[int(i)] for i in row]) for row in index.to_numpy()])  # [K, A, B]
    return values, np.moveaxis(samples, -1, 0)


def _panel(matched, pooled, choices, higher, level, bootstrap: bool) -> pd.DataFrame:
    values, samples = _matrices(matched, pooled, choices)
    observed = _average_ranks(values, higher).mean(axis=0)
    low = high = np.full(len(choices), np.nan)
    hist = [""] * len(choices)
    if samples is not None:
        ok = np.isfinite(samples).all(axis=(1, 2))
        if ok.any():
            r = _average_ranks(samples[ok], higher)  # [B, K, A]
            mean = r.mean(axis=1)
            alpha = (1 - level) / 2
            low, high = np.quantile(mean, alpha, axis=0), np.quantile(mean, 1 - alpha, axis=0)
            whole = np.floor(r).astype(int)
            hist = [" ".join(f"{np.mean(whole[..., a] == k):.2f}" for k in range(1, len(choices) + 1))
                    for a in range(len(choices))]
    return pd.DataFrame({"aggregation": choices, "mean_rank": observed, "ci_low": low, "ci_high": high,
                         "n_combinations": values.shape[0], "rank_shares": hist})


def _winner(panel: pd.DataFrame, matched, pooled, choices, higher, level) -> dict:
    order = panel.sort_values("mean_rank", kind="stable")
    best, second = order.iloc[0], order.iloc[1]
    out = {"winner": best["aggregation"], "runner_up": second["aggregation"],
           "gap": float(second["mean_rank"] - best["mean_rank"]), "p_value": np.nan, "significant": False}
    _, samples = _matrices(matched, pooled, choices)
    if samples is not None:
        ok = np.isfinite(samples).all(axis=(1, 2))
        if ok.any():
            mean = _average_ranks(samples[ok], higher).mean(axis=1)
            diff = mean[:, choices.index(second["aggregation"])] - mean[:, choices.index(best["aggregation"])]
            p = min(1.0, 2 * min(np.mean(diff <= 0), np.mean(diff >= 0)))
            out.update(p_value=float(p), significant=bool(p < 1 - level))
    return out


def _below_chance(run: RunData, ms, methods: pd.DataFrame, where: dict) -> list[dict]:
    """Methods whose interval lies beyond the chance level on the wrong side while another
    aggregation of the same model and measure is on the right side."""
    declared = run.spec.metric(ms.task, ms.metric) or {}
    chance = CHANCE.get(declared.get("separation_role", ""))
    if chance is None:
        return []
    rows = run.results
    rows = rows[(rows["task"] == ms.task) & (rows["metric"] == ms.metric) & (rows["split"] == where["split"])
                & (rows["scenario"].astype(str) == where["scenario"])]
    rows = rows.groupby(METHOD, as_index=False)[["value", "ci_low", "ci_high"]].mean()
    good = rows["value"] > chance if ms.direction == HIGHER else rows["value"] < chance
    bad = rows["ci_high"] < chance if ms.direction == HIGHER else rows["ci_low"] > chance
    out = []
    for r in rows[bad].itertuples():
        same = rows[(rows["prediction_model"] == r.prediction_model) & (rows["measure"] == r.measure) & good]
        if same.empty:
            continue
        best = same.sort_values("value", ascending=ms.direction != HIGHER).iloc[0]
        out.append({**where, "prediction_model": r.prediction_model, "measure": r.measure,
                    "aggregation": r.aggregation, "value": r.value, "ci_low": r.ci_low, "ci_high": r.ci_high,
                    "chance": chance, "best_aggregation": best["aggregation"], "best_value": best["value"]})
    return out


def _flips(winners: pd.DataFrame, below: list[dict]) -> pd.DataFrame:
    rows = []
    if not winners.empty:
        for (task, metric), g in winners.groupby(["task", "metric"], sort=False):
            if g["winner"].nunique() > 1:
                detail = "; ".join(f"{r.scenario} {r.split}: {r.winner}{' (sig.)' if r.significant else ''}"
                                   for r in g.itertuples())
                rows.append({"kind": "best differs", "task": task, "metric": metric, "where": "", "detail": detail})
    for b in below:
        rows.append({"kind": "below chance", "task": b["task"], "metric": b["metric"],
                     "where": f"{b['scenario']} {b['split']}",
                     "detail": f"{b['prediction_model']} × {b['measure']} × {b['aggregation']}: {b['value']:.3f} "
                               f"[{b['ci_low']:.3f}, {b['ci_high']:.3f}] < {b['chance']:g}; with "
                               f"{b['best_aggregation']}: {b['best_value']:.3f}"})
    return pd.DataFrame(rows, columns=["kind", "task", "metric", "where", "detail"])


def describe(v: Verdict, run: RunData) -> str:
    """Plain text: per panel the ranked aggregations (mean rank [interval]), the winner and its
    test against the runner-up; then the flips."""
    if v.empty:
        return "Which aggregation? No panel ranks two or more aggregations over matched combinations."
    label = run.spec.label
    lines = ["Which aggregation? Mean rank over the prediction model × measure combinations (1 = best), "
             "with its bootstrap interval; winner vs runner-up: paired bootstrap test."]
    for key, g in v.ranks.groupby(["task", "metric", "scenario", "split"], sort=False):
        task, metric, scenario, split = key
        w = v.winners[(v.winners["task"] == task) & (v.winners["metric"] == metric)
                      & (v.winners["scenario"] == scenario) & (v.winners["split"] == split)].iloc[0]
        ms = run.spec.metric_spec(task, metric)
        lines.append(f"\n{ms.title} — {scenario} ({split}), {int(g['n_combinations'].iloc[0])} combinations:")
        for r in g.sort_values("mean_rank").itertuples():
            ci = f" [{r.ci_low:.1f}, {r.ci_high:.1f}]" if np.isfinite(r.ci_low) else ""
            lines.append(f"  {r.mean_rank:5.2f}{ci}  {label('aggregation', r.aggregation)}")
        sig = "significantly" if w["significant"] else "not significantly"
        p = f" (p = {w['p_value']:.3f})" if np.isfinite(w["p_value"]) else ""
        lines.append(f"  winner: {label('aggregation', w['winner'])}, {sig} better than "
                     f"{label('aggregation', w['runner_up'])}{p}")
    lines.append("\nFlips:" if not v.flips.empty else "\nFlips: none (the same winner everywhere, nothing below chance).")
    for r in v.flips.itertuples():
        where = f" ({r.where})" if r.where else ""
        lines.append(f"  {r.kind}: {run.spec.metric_spec(r.task, r.metric).title}{where}: {r.detail}")
    return "\n".join(lines)


def write(v: Verdict, run_dir, suffix: str = ""):
    """``RUN_DIR/comparisons/aggregation_verdict<suffix>.csv`` (mean ranks) and ``..._winners`` /
    ``..._flips``; returns the first path."""
    from pathlib import Path

    from values_seg.run_directory import atomic_write
    from values_seg.run_files import COMPARISONS

    folder = Path(run_dir) / COMPARISONS
    paths = [folder / f"aggregation_verdict{suffix}{part}.csv" for part in ("", "_winners", "_flips")]
    for frame, path in zip((v.ranks, v.winners, v.flips), paths):
        atomic_write(run_dir, path, lambda tmp, frame=frame: frame.to_csv(tmp, index=False))
    return paths[0]
