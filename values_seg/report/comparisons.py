"""Paired comparisons: which choice of one component wins where, and whether the data separate it.

``compare(run, vary)`` (``values-seg compare``): the sets of methods that differ in one component, the
winner of each and its paired bootstrap test against every other choice, adjusted per family
(docs/design-rationale.md, "Paired comparisons"; docs/statistics.md, "Comparisons you can trust").
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from values_seg.report.common import left_out_text, supported_only
from values_seg.report.intervals import ROW, group_rows
from values_seg.report.rundir import RunData
from values_seg.report.spec import HIGHER, LOWER, ReportSpec, natural_key
from values_seg.storage.run_files import COMPARISONS
from values_seg.statistics import adjust, family_method, paired_p_value, percentile_interval
from values_seg.statistics.multiple import BH, HOLM, METHOD_NAMES, SMALL_FAMILY

VARY = ("aggregation", "measure", "prediction_model")
#: The columns that identify one set of compared methods (besides the varied one).
SET_KEYS = ["dataset", "scenario", "backbone", "prediction_model", "measure", "aggregation", "task", "metric", "split"]
RESULT_COLUMNS = ["direction", "winner", "other", "winner_value", "other_value", "difference", "ci_low", "ci_high",
                  "p_value", "p_adjusted", "correction", "family_size", "significant", "same_as", "n_seeds"]
SHORT_NAMES = {BH: "BH", HOLM: "Holm"}
WINS_COLUMNS = ["task", "metric", "split", "choice", "wins", "significant_wins", "sets", "correction", "family_size",
                "same_as"]
#: The columns that identify a family of tests (corrected together) and a metric's line of the summary.
FAMILY_KEYS = ["task", "metric", "split"]
def near_duplicates(vary: str, spec: ReportSpec) -> list[list[tuple[str, str]]]:
    """The groups of near-duplicate metrics, ``(task label, metric)``, when ``vary`` is compared: the
    run's metrics that declare the same ``evidence`` (:class:`values_seg.components.task.Reading`), in the
    run's task and metric order. An ``oracle_excess`` metric (E-AURC) differs from its group's
    metrics by the oracle's area, which depends on the prediction model only: for a varied measure
    or aggregation its paired differences are the group's, for a varied prediction model it answers
    another question and forms a group of its own."""
    groups: dict[tuple, list[tuple[str, str]]] = {}
    for task in spec.components.get("task", []):
        for m in task.get("metrics", []):
            if m.get("evidence"):
                key = (m["evidence"], vary == "prediction_model" and bool(m.get("oracle_excess")))
                groups.setdefault(key, []).append((task["label"], m["name"]))
    return list(groups.values())


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
    keep = np.array([not run.spec.is_reference(t, m) for t, m in zip(df["task"], df["metric"])], dtype=bool)
    return supported_only(df[keep], SET_KEYS)  # a boolean array: an empty list would select no columns


def left_out(run: RunData, vary: str, task: str | None = None) -> str:
    """How many methods :func:`compare` leaves out because the data cannot support them, and why; "" where none."""
    return left_out_text(_usable(run, vary, task)[1], SET_KEYS, "compared")


def compare(run: RunData, vary: str, task: str | None = None) -> pd.DataFrame:
    """One row per (set of methods, choice other than the winner): the paired difference
    ``winner - other`` with its interval, p-value and significance (see the module docstring).
    Without stored distributions the values alone (interval, p-value NaN; ``significant`` False)."""
    df = _usable(run, vary, task)[0]
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
    _correct(out)
    out["significant"] = np.isfinite(out["p_adjusted"]) & (out["p_adjusted"] < alpha)
    out["same_as"] = _same_as(out, run, vary)
    columns = {k: out[k].tolist() for k in keys}  # plain lists: a pandas lookup per row and key costs seconds
    order = sorted(range(len(out)), key=lambda i: (
        run.spec.metric_order_key(columns["task"][i], columns["metric"][i], columns["split"][i]),
        tuple(natural_key(columns[k][i]) for k in keys[:-3])))
    return out.iloc[order].reset_index(drop=True)


def _correct(out: pd.DataFrame) -> None:
    """Fill ``p_adjusted``, ``correction`` and ``family_size``: each family (:data:`FAMILY_KEYS`) adjusted on
    its own, by Holm or Benjamini-Hochberg after its size (:func:`values_seg.statistics.family_method`)."""
    p = out["p_value"].to_numpy(dtype=float)
    adjusted, method, size = np.full(len(out), math.nan), np.full(len(out), "", dtype=object), np.zeros(len(out), int)
    for members in group_rows(out, FAMILY_KEYS)[1]:
        n = int(np.isfinite(p[members]).sum())
        if n:
            method[members] = family_method(n)
            adjusted[members] = adjust(p[members], method[members[0]])
        size[members] = n
    out["p_adjusted"], out["correction"], out["family_size"] = adjusted, method, size


def _same_as(out: pd.DataFrame, run: RunData, vary: str) -> list[str]:
    """Per row: "" where its metric counts as evidence, else the title of the near-duplicate metric
    that stands for its group in that split (:func:`near_duplicates`)."""
    present = set(zip(out["task"], out["metric"], out["split"]))
    stand_in: dict[tuple, str] = {}
    for members in near_duplicates(vary, run.spec):
        for split in set(out["split"]):
            here = [m for m in members if (*m, split) in present]
            stand_in.update({(*m, split): run.spec.metric_spec(*here[0]).title for m in here[1:]})
    return [stand_in.get(k, "") for k in zip(out["task"], out["metric"], out["split"])]


def significance_note(level: float, spec: ReportSpec, vary: str | None = None) -> str:
    """How significance is decided, in one paragraph (the CLI's header and the report's section say
    the same); the near-duplicate groups of ``vary``, or of every component where None."""
    text = (f"Significant: paired bootstrap p-value adjusted per family (one metric and split: all its sets, over "
            f"scenarios, backbones and the other components) below {1 - level:g}; {METHOD_NAMES[BH]} for families "
            f"of more than {SMALL_FAMILY} tests, {METHOD_NAMES[HOLM]} for smaller ones.")
    groups = _group_labels(near_duplicates(vary or "measure", spec), spec)
    if vary is None and _group_labels(near_duplicates("prediction_model", spec), spec) != groups:
        groups += f"; varying the prediction model: {_group_labels(near_duplicates('prediction_model', spec), spec)}"
    if groups:
        text += (f" Near-duplicate metrics ({groups}) count once, as the first of them in the results; the others "
                 f"are marked \"same evidence as\" it.")
    return text


def _group_labels(groups: list, spec: ReportSpec) -> str:
    """E.g. "AURC, AUGRC, Dice R-AUC; E-AURC, E-AUGRC": the groups with two or more of the run's metrics."""
    labels = [[spec.metric_spec(label, metric).label for label, metric in group] for group in groups]
    return "; ".join(", ".join(g) for g in labels if len(g) > 1)


def wins(comparisons: pd.DataFrame, run: RunData, vary: str) -> pd.DataFrame:
    """Per (task, metric, split) and choice: in how many sets it wins, and in how many of those it
    is significantly better than every other choice (``wins``, ``significant_wins``, ``sets``), with
    its family's correction, size and ``same_as`` (see :func:`compare`)."""
    if comparisons.empty:
        return pd.DataFrame(columns=WINS_COLUMNS)
    metric_keys = FAMILY_KEYS
    per_set, members = group_rows(comparisons, [k for k in SET_KEYS if k != vary])
    winner, other = comparisons["winner"].to_numpy(), comparisons["other"].to_numpy()
    significant = comparisons["significant"].to_numpy(dtype=bool)
    set_winner = np.array([winner[m[0]] for m in members], dtype=object)  # the sets' rows share their winner
    set_clear = np.array([significant[m].all() for m in members])  # significantly better than every other
    metrics, of_metric = group_rows(comparisons, metric_keys)
    _, sets_of_metric = group_rows(per_set, metric_keys)  # the same groups, in the same order of appearance
    rows = []
    groups = zip(metrics.itertuples(index=False, name=None), of_metric, sets_of_metric)
    family = comparisons[["correction", "family_size", "same_as"]].to_numpy()
    for (task, metric, split), pairs, sets in sorted(groups, key=lambda g: run.spec.metric_order_key(*g[0])):
        correction, size, same_as = family[pairs[0]]
        for c in run.spec.ordered(vary, set(winner[pairs]) | set(other[pairs])):
            won = set_winner[sets] == c
            rows.append({"task": task, "metric": metric, "split": split, "choice": c, "wins": int(won.sum()),
                         "significant_wins": int((won & set_clear[sets]).sum()), "sets": len(sets),
                         "correction": correction, "family_size": int(size), "same_as": same_as})
    return pd.DataFrame(rows, columns=WINS_COLUMNS)


def files(run_dir: Path, vary: str) -> tuple[Path, Path]:
    """The files :func:`write` writes: ``RUN_DIR/comparisons/<vary>.csv`` and ``<vary>_wins.csv``."""
    folder = Path(run_dir) / COMPARISONS
    return folder / f"{vary}.csv", folder / f"{vary}_wins.csv"


def write(comparisons: pd.DataFrame, summary: pd.DataFrame, run_dir: Path, vary: str) -> tuple[Path, Path]:
    """``RUN_DIR/comparisons/<vary>.csv`` (every pair) and ``<vary>_wins.csv`` (the summary)."""
    from values_seg.storage.run_directory import write_owned

    detail, wins_path = files(run_dir, vary)
    write_owned(run_dir, detail, lambda tmp: comparisons.to_csv(tmp, index=False))  # never through a link
    write_owned(run_dir, wins_path, lambda tmp: summary.to_csv(tmp, index=False))
    return detail, wins_path


def describe(summary: pd.DataFrame, comparisons: pd.DataFrame, run: RunData, vary: str) -> str:
    """Plain-text summary: per metric, which choice wins in how many sets (significantly where it
    beats every other choice after the correction), its family's correction, and the counts of
    significant differences after and before the correction, all and as independent evidence."""
    if summary.empty:
        return (f"No sets of methods that differ in the {vary.replace('_', ' ')} only (with a declared metric "
                f"direction).")
    label = run.spec.label
    lines = []
    for (task, metric, split), g in summary.groupby(FAMILY_KEYS, sort=False):
        ms = run.spec.metric_spec(task, metric)
        where = {"iid": " i.i.d.", "ood": " OoD"}.get(split, "")
        parts = [f"{label(vary, r.choice)} {r.wins}/{r.sets} ({r.significant_wins} significant)"
                 for r in g.itertuples() if r.wins]
        first = g.iloc[0]
        family = f"{SHORT_NAMES.get(first['correction'], 'untested')}, {first['family_size']} tests"
        if first["same_as"]:
            family += f"; same evidence as {first['same_as']}"
        lines.append(f"{ms.title}{where} {run.spec.arrow(task, metric)} [{family}]: wins " + ", ".join(parts))
    lines += ["", _tally(comparisons, run)]
    return "\n".join(lines)


def _tally(comparisons: pd.DataFrame, run: RunData) -> str:
    """How many differences are significant after the correction and would be before it, all and as evidence."""
    alpha = 1.0 - (run.distributions.level if run.distributions is not None else 0.95)
    significant = comparisons["significant"].to_numpy(dtype=bool)
    raw = (comparisons["p_value"].to_numpy(dtype=float) < alpha)
    evidence = (comparisons["same_as"] == "").to_numpy()
    families = len(group_rows(comparisons, FAMILY_KEYS)[1])
    text = (f"{len(comparisons)} paired differences in {families} families: {int(significant.sum())} significant after "
            f"the correction ({int(raw.sum())} at p < {alpha:g} uncorrected); {int((~significant).sum())} not "
            f"significant (n.s.: the data do not separate the two choices).")
    if not evidence.all():
        text += (f" Near-duplicate metrics counted once: {int(evidence.sum())} differences, "
                 f"{int((significant & evidence).sum())} significant ({int((raw & evidence).sum())} uncorrected).")
    return text


def details(comparisons: pd.DataFrame, run: RunData, vary: str) -> str:
    """One line per compared pair: where, the winner and the other choice, the difference with its
    interval, its p-value raw and adjusted, "n.s." where not significant after the correction."""
    label = run.spec.label
    lines = []
    where_keys = [k for k in ("scenario", "backbone", "prediction_model", "measure", "aggregation") if k != vary]
    for r in comparisons.itertuples(index=False):
        d = r._asdict()
        where = " · ".join(label(k, d[k]) for k in where_keys if d.get(k))
        ms = run.spec.metric_spec(d["task"], d["metric"])
        split = {"iid": " i.i.d.", "ood": " OoD"}.get(d["split"], "")
        interval = f" [{d['ci_low'] * 100:+.2f}, {d['ci_high'] * 100:+.2f}]" if math.isfinite(d["ci_low"]) else ""
        p = (f"p = {d['p_value']:.3f}, adjusted {d['p_adjusted']:.3f} ({SHORT_NAMES[d['correction']]})"
             if math.isfinite(d["p_value"]) else "no p-value")
        mark = "" if d["significant"] else "  n.s."
        lines.append(f"{ms.title}{split} | {where}: {label(vary, d['winner'])} {d['winner_value'] * 100:.2f} vs "
                     f"{label(vary, d['other'])} {d['other_value'] * 100:.2f}: {d['difference'] * 100:+.2f}{interval}, "
                     f"{p}{mark}")
    return "\n".join(lines)
