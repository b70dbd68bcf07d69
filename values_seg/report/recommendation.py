"""The report's opening: per task, the uncertainty method that did best on this run's data.

One row per task criterion and scenario: the best combination, its value and the runner-up, judged by the
paired test of ``values-seg compare``; unsupported values never win, ties name no winner, and the winner's
value is optimistic (docs/design-rationale.md, "The recommendation"; docs/statistics.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from values_seg.report import markdown
from values_seg.report.common import UNSUPPORTED, scenarios, select, support_notes
from values_seg.report.intervals import ROW, Distributions
from values_seg.report.spec import HIGHER, MetricSpec, ReportSpec, natural_key
from values_seg.report.stats import format_mean_std
from values_seg.statistics import adjust, family_method, paired_p_value
from values_seg.statistics.multiple import METHOD_NAMES

#: Values this close (relative and absolute) are one value: a tie, not a winner (float round-off).
TIE = 1e-12
GROUP = ("backbone", "prediction_model", "measure", "uncertainty_type", "aggregation")


@dataclass(frozen=True)
class Criterion:
    metric: MetricSpec  # a task's primary metric
    split: str

    @property
    def title(self) -> str:
        """E.g. "Failure Detection (OoD)"."""
        split = {"iid": "i.i.d.", "ood": "OoD"}.get(self.split)
        return f"{self.metric.group} ({split})" if split else self.metric.group


def _declared(spec: ReportSpec, crit: Criterion) -> list[dict]:
    """The metrics the criterion's task declares (``components.json``)."""
    return (spec.entry("task", crit.metric.task) or {}).get("metrics", [])


def alternates(spec: ReportSpec, crit: Criterion) -> list[MetricSpec]:
    """The metrics of the criterion's task declared as other definitions of its metric (``variant_of``,
    e.g. the paper's eq. 11 ACE beside the merged-bin ACE), reported on its split."""
    return [spec.metric_spec(crit.metric.task, m["name"]) for m in _declared(spec, crit)
            if m.get("variant_of") == crit.metric.metric and crit.split in m.get("splits", ("iid", "ood"))]


def _calibrated(spec: ReportSpec, crit: Criterion) -> bool:
    """Whether the criterion's metric is the price of a guarantee calibrated on the validation split
    (``exchangeable``: a conformal set size, the accepted share)."""
    return any(m.get("name") == crit.metric.metric and m.get("exchangeable") for m in _declared(spec, crit))


def criteria(spec: ReportSpec) -> list[Criterion]:
    """Each task's primary metric, once per split it reports, in the run's task order."""
    out = []
    for t in spec.components.get("task", []):
        for m in t.get("metrics", []):
            if m.get("primary"):
                ms = spec.metric_spec(t["label"], m["name"])
                out += [Criterion(ms, split) for split in m.get("splits", ("iid", "ood"))]
    return out


@dataclass(frozen=True)
class Candidate:
    method: dict  # GROUP -> str
    mean: float
    std: float
    n: int
    ci_low: float = math.nan
    ci_high: float = math.nan
    rows: tuple = ()  # (seed, row of the stored bootstrap distributions, -1 where none) per seed

    @property
    def has_interval(self) -> bool:
        return self.n == 1 and math.isfinite(self.ci_low) and math.isfinite(self.ci_high)


@dataclass(frozen=True)
class Recommendation:
    criterion: Criterion
    scenario: str
    best: Candidate
    runner_up: Candidate | None
    p_value: float = math.nan  # the paired test of best - runner-up (module docstring)
    p_adjusted: float = math.nan
    correction: str = ""
    tied: tuple = ()  # the candidates sharing the best value (best first); () where best stands alone
    candidates: int = 0  # the supported combinations the best was picked from
    unsupported: tuple = ()  # (method, why) of the combinations left out: the data cannot support them

    @property
    def no_winner(self) -> bool:
        """Every candidate ties (or none is supported): the data name no best method."""
        return not self.candidates or len(self.tied) == self.candidates


def _unsupported(rows: pd.DataFrame) -> list[tuple[dict, str]]:
    """(method, why) of the combinations with a row the data cannot support (:mod:`values_seg.runner.support`)."""
    return [(dict(zip(GROUP, key)), why) for key, why in support_notes(rows, list(GROUP)).items()]


def _candidates(rows: pd.DataFrame) -> list[Candidate]:
    rows = rows.copy()
    for c in ("ci_low", "ci_high"):
        rows[c] = pd.to_numeric(rows[c], errors="coerce") if c in rows.columns else math.nan
    rows = rows[pd.to_numeric(rows["value"], errors="coerce").notna()]
    if ROW not in rows.columns:
        rows[ROW] = -1
    out = []
    for key, group in rows.groupby(list(GROUP), sort=False, dropna=False):
        values = group["value"].astype(float)
        n = int(values.size)
        out.append(Candidate(dict(zip(GROUP, key)), float(values.mean()), float(values.std(ddof=1)) if n > 1 else math.nan,
                             n, float(group["ci_low"].mean()), float(group["ci_high"].mean()),
                             tuple(zip(group["seed"], group[ROW].astype(int))) if "seed" in group else ()))
    return out


def paired_p(best: Candidate, other: Candidate, dist: Distributions | None) -> float:
    """The two-sided p-value of the paired bootstrap of ``best - other`` over their common seeds (as
    ``values-seg compare``); NaN without stored distributions for both."""
    a, b = dict(best.rows), dict(other.rows)
    seeds = sorted(set(a) & set(b), key=natural_key)
    rows_a, rows_b = np.array([a[s] for s in seeds], dtype=np.int64), np.array([b[s] for s in seeds], dtype=np.int64)
    if dist is None or not seeds or (rows_a < 0).any() or (rows_b < 0).any():
        return math.nan
    return float(paired_p_value(dist.pooled(rows_a) - dist.pooled(rows_b)))


def _judge(recs: list[Recommendation], dist: Distributions | None) -> list[Recommendation]:
    """``recs`` with the paired test of each best and runner-up, adjusted over the table (one family);
    a row whose best ties with another names no winner and is not tested."""
    p = np.array([paired_p(r.best, r.runner_up, dist) if r.runner_up is not None and not r.tied and r.candidates
                  else math.nan for r in recs])
    n = int(np.isfinite(p).sum())
    if n == 0:
        return recs
    method = family_method(n)
    return [replace(r, p_value=float(raw), p_adjusted=float(adj), correction=method if math.isfinite(adj) else "")
            for r, raw, adj in zip(recs, p, adjust(p, method))]


def _order(c: Candidate, spec: ReportSpec) -> tuple:
    m = c.method
    return (spec.order_key("prediction_model", m["prediction_model"]), spec.order_key("measure", m["measure"]),
            spec.order_key("aggregation", m["aggregation"]), natural_key(m["backbone"]))


def recommendations(results: pd.DataFrame, spec: ReportSpec, dist: Distributions | None = None,
                    chosen: list[Criterion] | None = None) -> list[Recommendation]:
    """The best and runner-up combination per criterion (``chosen``, default :func:`criteria`) and
    scenario, where the results have the metric; with ``dist`` (the run's bootstrap distributions) the
    paired test of the two (module docstring)."""
    out = []
    if results is None or results.empty:
        return out
    for sc in scenarios(results):
        part = select(results, sc)
        for crit in (criteria(spec) if chosen is None else chosen):
            rows = part[(part["task"] == crit.metric.task) & (part["metric"] == crit.metric.metric)
                        & (part["split"] == crit.split)]
            if rows.empty:
                continue
            unsupported = _unsupported(rows)
            left_out = {tuple(m[k] for k in GROUP) for m, _ in unsupported}
            candidates = [c for c in _candidates(rows) if tuple(c.method[k] for k in GROUP) not in left_out]
            if not candidates:
                if unsupported:  # said, not dropped
                    first = _candidates(rows)[:1] or [Candidate(unsupported[0][0], math.nan, math.nan, 0)]
                    out.append(Recommendation(crit, sc.title, first[0], None, unsupported=tuple(unsupported)))
                continue
            sign = -1.0 if crit.metric.direction == HIGHER else 1.0
            ranked = sorted(candidates, key=lambda c: (sign * c.mean, _order(c, spec)))
            tied = tuple(c for c in ranked if math.isclose(c.mean, ranked[0].mean, rel_tol=TIE, abs_tol=TIE))
            out.append(Recommendation(crit, sc.title, ranked[0], ranked[1] if len(ranked) > 1 else None,
                                      tied=tied if len(tied) > 1 else (), candidates=len(ranked),
                                      unsupported=tuple(unsupported)))
    return _judge(out, dist)


def method_label(method: dict, spec: ReportSpec, several_backbones: bool = False) -> str:
    """E.g. "nnU-Net · MI (EU) · Patch"; parts that do not apply are left out."""
    parts = []
    if several_backbones and method.get("backbone"):
        parts.append(method["backbone"])
    parts.append(spec.label("prediction_model", method["prediction_model"]))
    if method.get("measure"):
        utype = f" ({method['uncertainty_type']})" if method.get("uncertainty_type") else ""
        parts.append(spec.label("measure", method["measure"]) + utype)
    if method.get("aggregation"):
        parts.append(spec.label("aggregation", method["aggregation"]))
    return " · ".join(parts)


def value_text(c: Candidate) -> str:
    text = format_mean_std(c.mean, c.std, c.n)
    if c.has_interval:
        text += f" [{c.ci_low * 100:.2f}, {c.ci_high * 100:.2f}]"
    return text


def runner_up_verdict(r: Recommendation, level: float = 0.95) -> str:
    """" (tie)", " (not clearly worse: p = 0.41)", " (worse: p = 0.003)" (adjusted p), or "" without a test."""
    if r.runner_up is None:
        return ""
    if r.runner_up.mean == r.best.mean:
        return " (tie)"
    if not math.isfinite(r.p_adjusted):
        return ""
    verdict = "worse" if r.p_adjusted < 1 - level else "not clearly worse"
    return f" ({verdict}: p = {r.p_adjusted:.3f})"


def best_text(r: Recommendation, spec: ReportSpec, several_backbones: bool = False) -> str:
    """The "Best method" cell: the method, or why the data name none (every method tied, a tie at
    the top, nothing supported), and how many methods were left out as unsupported."""
    label = lambda c: method_label(c.method, spec, several_backbones)  # noqa: E731
    if not r.candidates:
        text = "no supported result"
    elif r.no_winner:
        text = f"no winner: all {r.candidates} methods tie"
    elif r.tied:
        shown = ", ".join(label(c) for c in r.tied[:3]) + (", …" if len(r.tied) > 3 else "")
        text = f"no winner: {len(r.tied)} methods tie ({shown})"
    else:
        text = label(r.best)
    if r.unsupported:
        text += f"; {len(r.unsupported)} left out {UNSUPPORTED}"
    return text


def _support_note(recs: list[Recommendation]) -> str:
    found: dict[str, int] = {}
    for r in recs:
        for _, why in r.unsupported:
            for w in why.split(" | "):
                found[w] = found.get(w, 0) + 1
    if not found:
        return ""
    return (f"{UNSUPPORTED} Left out, never recommended: methods whose value the data cannot support ("
            + "; ".join(f"{k} × {w}" for w, k in found.items()) + "). ")


def recommendation_section(results: pd.DataFrame, spec: ReportSpec, dist: Distributions | None = None) -> list[str]:
    """Markdown blocks of the section (heading, note, table); empty when no criterion has results."""
    recs = recommendations(results, spec, dist)
    if not recs:
        return []
    several_scenarios = len({r.scenario for r in recs}) > 1
    several_backbones = results["backbone"].nunique() > 1
    headers = (["Task"] + (["Scenario"] if several_scenarios else [])
               + ["Best method", "Metric", "Value", "Runner-up", "Picked from"])
    rows = []
    intervals = False
    for r in recs:
        metric = r.criterion.metric.label
        runner = "–"
        if r.runner_up is not None and not r.tied:
            runner = f"{method_label(r.runner_up.method, spec, several_backbones)}: {format_mean_std(r.runner_up.mean, r.runner_up.std, r.runner_up.n)}"
            runner += runner_up_verdict(r, dist.level if dist is not None else 0.95)
        intervals |= r.best.has_interval and bool(r.candidates)
        rows.append([r.criterion.title] + ([r.scenario] if several_scenarios else [])
                    + [best_text(r, spec, several_backbones),
                       f"{metric} {spec.arrow(r.criterion.metric.task, r.criterion.metric.metric)}",
                       value_text(r.best) if r.candidates else "–", runner, f"{r.candidates} method{'s' if r.candidates != 1 else ''}"])
    note = ("Per task, the uncertainty method (prediction model · measure (the uncertainty type it stands for) · "
            "aggregation) that scored best on this data, and the runner-up; values × 100, mean over seeds "
            "(± std with several seeds). ")
    note += ("Brackets: the best method's confidence interval. " if intervals else
             "No confidence intervals in these results: with few test cases, small differences may be chance. ")
    note += ("The best is picked on the same test cases that score it (the tasks score no validation split to pick "
             "on), so its value and interval are those of a selected winner: optimistic, the more so the more "
             "methods it was picked from (the winner's curse). ")
    tested = [r.correction for r in recs if r.correction]
    if tested:
        note += (f"Runner-up: worse or not clearly worse by the paired bootstrap of the difference on the same test "
                 f"cases (as `values-seg compare`), p adjusted over this table's {len(tested)} rows "
                 f"by {METHOD_NAMES[tested[0]]}, significant below {1 - dist.level:g}. ")
    calibrated = sorted({r.criterion.title for r in recs if r.candidates and _calibrated(spec, r.criterion)})
    if calibrated:
        note += (f"The {', '.join(calibrated)} rows hold each method's threshold, calibrated on the validation "
                 "split, fixed: their values, intervals and comparisons are conditional on the one draw of the "
                 "cases it was fitted on (another draw moves the thresholds too, which they leave out). ")
    note += ("Where several methods share the best value no winner is named (\"no winner: all N methods tie\": the "
             "metric does not tell the methods apart on this data). ")
    note += _support_note(recs)
    note += _alternate_note(results, spec, recs, several_backbones)
    return ["## Recommendation", note.strip(),
            markdown.table(headers, rows, align=["l"] * (len(headers) - 3) + ["r", "l", "r"], keys=len(headers) - 3)]


def _alternate_note(results: pd.DataFrame, spec: ReportSpec, recs: list[Recommendation],
                    several_backbones: bool) -> str:
    """Per primary metric with an alternate (:func:`alternates`): that it picks, and the rows where the
    alternate's best method differs."""
    label = lambda r: best_text(r, spec, several_backbones)  # noqa: E731
    text = ""
    for metric in dict.fromkeys(r.criterion.metric for r in recs):
        mine = [r for r in recs if r.criterion.metric == metric]
        for alt in dict.fromkeys(a for r in mine for a in alternates(spec, r.criterion)):
            splits = list(dict.fromkeys(r.criterion.split for r in mine))
            theirs = {(a.scenario, a.criterion.split): a
                      for a in recommendations(results, spec, None, [Criterion(alt, split) for split in splits])}
            pairs = [(r, theirs[(r.scenario, r.criterion.split)]) for r in mine
                     if (r.scenario, r.criterion.split) in theirs]
            differ = [f"{r.scenario} ({r.criterion.title}): {label(a)}" for r, a in pairs if label(a) != label(r)]
            text += (f"{metric.group} is picked by {metric.label}, the task's primary metric, not by {alt.label} "
                     "(beside it in the downstream tables): ")
            text += (f"by {alt.label} the best method differs in {len(differ)} of {len(pairs)} rows ("
                     + "; ".join(differ) + "). " if differ else
                     f"by {alt.label} the best method is the same in all {len(pairs)} rows. ")
    return text
