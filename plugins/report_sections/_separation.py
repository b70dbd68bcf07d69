"""The uncertainty separation study (paper section 4.1/4.4, Figure 2, Table 4).

Q1-Q4 answered from the evidence the tasks declare (``Reading.separation_role``), each question decided on
its units by their paired 95 % intervals; the criteria and the answers: docs/design-rationale.md,
"The separation section"; docs/statistics.md, "The separation study".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from values_seg.report.common import Scenario, metric_rows, scenarios, select
from values_seg.report.intervals import ROW, Distributions
from values_seg.report.spec import ReportSpec, natural_key
from values_seg.report.stats import format_plain, format_signed, mean_std
from values_seg.statistics import percentile_interval

QUESTIONS = {
    "Q1": ("Do AU-measures capture AU?", "yes"),
    "Q2": ("Do EU-measures capture AU?", "no"),
    "Q3": ("Do EU-measures capture EU?", "yes"),
    "Q4": ("Do AU-measures capture EU?", "no"),
}
#: The splits each kind of evidence is read on, in order of preference ("AU-EU" like "AU").
SPLITS = {"AU": ("iid", "all", "ood"), "EU": ("all", "iid", "ood")}
#: per question, what a unit decided "yes" and decided "no" found, the side theory expects first
SIDES = {
    "Q1": ("AU better", "EU better"),
    "Q2": ("EU above min(PU, AU)", "EU below min(PU, AU)"),
    "Q3": ("above 0.5", "not above 0.5"),
    "Q4": ("AU better", "EU better"),
}
GROUP = ["dataset", "scenario", "backbone", "prediction_model"]
UNIT_COLUMNS = GROUP + ["question", "yes", "decided", "interval", "value", "a", "b", "supported"]


@dataclass(frozen=True)
class Answer:
    question: str
    answer: str  # yes | no | partial | undecided | n/a
    support: int  # units decided "yes" (the criterion for "yes" holds; by the interval where there is one)
    total: int
    value_mean: float  # the question's key number (Δ NCC, NCC of EU, AUROC of EU, Δ AUROC)
    value_std: float
    a_mean: float  # the two compared quantities where there are two (e.g. NCC of AU and EU)
    b_mean: float
    label: str = ""  # the evidence metric's label (e.g. "NCC"), its question's type's declared metrics
    undecided: int = 0  # units not decided: the interval contains the decision boundary, or a row is unsupported
    point_only: int = 0  # units decided by the point estimate (no interval)
    unsupported: int = 0  # of the undecided: built on a row the data cannot support

    @property
    def expected(self) -> str:
        return QUESTIONS[self.question][1]

    @property
    def agrees(self) -> bool | None:
        """True/False: the answer agrees/disagrees with theory; None: partial, undecided or no evidence."""
        if self.answer in ("yes", "no"):
            return self.answer == self.expected
        return None

    @property
    def mark(self) -> str:
        return {True: "✓", False: "✗"}.get(self.agrees, {"partial": "~", "undecided": "?"}.get(self.answer, ""))

    def counts(self) -> str:
        """The units on each side and undecided, the side theory expects first, e.g. "70 EU better,
        1 AU better, 85 undecided of 156"; and how many were decided by point estimate (no resamples)."""
        if not self.total:
            return ""
        yes, no = SIDES[self.question]
        sides = [(yes, self.support), (no, self.total - self.support - self.undecided)]
        if self.expected == "no":
            sides.reverse()
        text = ", ".join(f"{n} {side}" for side, n in sides) + f", {self.undecided} undecided of {self.total}"
        if self.point_only:
            text += f"; {self.point_only} by point estimate (no resamples)"
        return text

    def detail(self) -> str:
        """The numbers behind the answer, e.g. "NCC AU 0.86 vs EU 0.47, Δ +0.39 ± 0.02; 2 AU better,
        0 EU better, 0 undecided of 2"."""
        if self.total == 0:
            return ""
        spread = f" ± {self.value_std:.2f}" if math.isfinite(self.value_std) else ""
        q, label = self.question, self.label
        if q == "Q1":
            text = f"{label} AU {format_plain(self.a_mean)} vs EU {format_plain(self.b_mean)}, " \
                   f"Δ {format_signed(self.value_mean)}{spread}"
        elif q == "Q2":
            text = f"{label} EU {format_plain(self.a_mean)} vs min(PU, AU) {format_plain(self.b_mean)}"
        elif q == "Q3":
            text = f"{label} EU {format_plain(self.value_mean)}{spread}"
        else:
            text = f"{label} EU {format_plain(self.b_mean)} vs AU {format_plain(self.a_mean)}, " \
                   f"Δ {format_signed(self.value_mean)}{spread}"
        return f"{text}; {self.counts()}" + self.caveat()

    def caveat(self) -> str:
        """Of the undecided, how many rest on a row the data cannot support."""
        if not self.unsupported:
            return ""
        return f"; {self.unsupported}/{self.total} undecided ⚠ (a row the data cannot support)"

    def text(self, with_detail: bool = True) -> str:
        if self.answer == "n/a":
            return "–"
        head = f"{self.answer} {self.mark}".strip()
        return f"{head} ({self.detail()})" if with_detail else head


def decide(yes: np.ndarray, decided: np.ndarray | None = None) -> str:
    """The answer over units: ``yes[i]`` the side unit ``i`` lies on, ``decided[i]`` False where its
    interval contains the boundary (default: every unit decided)."""
    yes = np.asarray(yes, dtype=bool)
    decided = np.ones_like(yes) if decided is None else np.asarray(decided, dtype=bool)
    if yes.size == 0:
        return "n/a"
    if (yes & decided).any() and (~yes & decided).any():
        return "partial"
    if not decided.all():
        return "undecided"
    return "yes" if yes.all() else "no"


def _side(value: float, low: float, high: float, boundary: float, tie_is_above: bool = False
          ) -> tuple[bool, bool, bool]:
    """(above the boundary, decided, has an interval) of one unit: decided by the interval
    ``[low, high]`` where it is finite (undecided where it contains ``boundary``), else by ``value``
    (``tie_is_above``: a value on the boundary counts as above)."""
    above = bool(value > boundary or (tie_is_above and value == boundary))
    if math.isfinite(low) and math.isfinite(high):
        return above, bool(low > boundary or high < boundary), True
    return above, True, False


def _pick_split(rows: pd.DataFrame, preference) -> pd.DataFrame:
    for split in preference:
        if (rows["split"] == split).any():
            return rows[rows["split"] == split]
    return rows


def _finite(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[np.isfinite(rows["value"].to_numpy(dtype=float))]


def _pairs(a: pd.DataFrame, b: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """All (a, b) rows sharing ``keys`` with ``value_a``, ``value_b`` and their distributions' rows."""
    columns = keys + ["measure", "value", "supported", ROW]
    if a.empty or b.empty:
        return pd.DataFrame(columns=keys + ["value_a", "value_b", f"{ROW}_a", f"{ROW}_b", "supported"])
    m = a[columns].merge(b[columns], on=keys, suffixes=("_a", "_b"))
    return m.assign(supported=m["supported_a"] & m["supported_b"])


def _evidence(rows: pd.DataFrame, role: str, spec: ReportSpec) -> pd.DataFrame:
    """The finite rows of the metrics declared with separation ``role``, on its preferred split."""
    found = [metric_rows(rows, m.task, m.metric) for m in spec.separation_metrics(role)]
    found = _finite(pd.concat(found) if len(found) > 1 else found[0] if found else rows.iloc[:0])
    return _pick_split(found, SPLITS[role[:2]]) if not found.empty else found


def _interval(r) -> tuple[float, float]:
    low, high = getattr(r, "ci_low", math.nan), getattr(r, "ci_high", math.nan)
    return (float(low) if low is not None else math.nan), (float(high) if high is not None else math.nan)


NO_INTERVAL = (math.nan, math.nan)


def _paired_interval(dist: Distributions | None, first: int, others) -> tuple[float, float]:
    """The percentile interval, on the stored resamples, of the row ``first`` minus the smallest of
    the rows ``others`` (one row: their difference), resample by resample; no interval without them."""
    rows = [int(first), *(int(o) for o in others)]
    if dist is None or min(rows) < 0:
        return NO_INTERVAL
    samples = dist.samples
    difference = samples[rows[0]] - samples[rows[1:]].min(axis=0)
    if not np.isfinite(difference).any():
        return NO_INTERVAL
    low, high = percentile_interval(difference, dist.level)
    return float(low), float(high)


def _units_one(rows: pd.DataFrame, spec: ReportSpec, dist: Distributions | None) -> list[tuple]:
    """Units of one (dataset, scenario, backbone, prediction model) group:
    (question, yes, decided, has an interval, value, a, b, supported)."""
    units: list[tuple] = []
    if ROW not in rows.columns:
        rows = rows.assign(**{ROW: -1})
    ncc, auroc = _evidence(rows, "AU", spec), _evidence(rows, "EU", spec)
    ncc = ncc[ncc["measure"] != ""]
    auroc = auroc[auroc["measure"] != ""]
    by_type = lambda df, t: df[df["uncertainty_type"] == t]  # noqa: E731

    # Q1: Δ NCC (AU − EU) > 0
    sep = _evidence(rows, "AU-EU", spec)
    au, eu = by_type(ncc, "AU"), by_type(ncc, "EU")
    if not sep.empty:
        au_mean, eu_mean = au["value"].mean(), eu["value"].mean()
        units += [("Q1", *_side(r.value, *_interval(r), 0.0), r.value, au_mean, eu_mean, r.supported)
                  for r in sep.itertuples(index=False)]
    else:  # two rows: the paired interval of their difference from the stored resamples
        p = _pairs(au, eu, ["seed"])
        units += [("Q1", *_side(r.value_a - r.value_b, *_paired_interval(dist, getattr(r, f"{ROW}_a"),
                                                                          [getattr(r, f"{ROW}_b")]), 0.0),
                   r.value_a - r.value_b, r.value_a, r.value_b, r.supported) for r in p.itertuples(index=False)]

    # Q2: EU NCC minus the lowest PU/AU NCC of the same seed (resample by resample: the lowest of each resample)
    pu_au = ncc[ncc["uncertainty_type"].isin(("PU", "AU"))]
    for r in eu.itertuples(index=False):
        others = pu_au[pu_au["seed"] == r.seed]
        if others.empty:
            continue
        low = float(others["value"].min())
        interval = _paired_interval(dist, getattr(r, ROW), others[ROW].to_numpy())
        units.append(("Q2", *_side(r.value - low, *interval, 0.0, tie_is_above=True), r.value - low, r.value, low,
                      r.supported and bool(others["supported"].all())))

    # Q3: AUROC of EU measures > 0.5
    units += [("Q3", *_side(r.value, *_interval(r), 0.5), r.value, r.value, math.nan, r.supported)
              for r in by_type(auroc, "EU").itertuples(index=False)]

    # Q4: Δ AUROC (EU − AU); "yes" (AU captures EU) where the EU-measure is not better (Δ > 0 fails)
    sep = _evidence(rows, "EU-AU", spec)
    au, eu = by_type(auroc, "AU"), by_type(auroc, "EU")

    def q4(value, low, high, a, b, supported):
        above, decided, has = _side(value, low, high, 0.0)
        return ("Q4", not above, decided, has, value, a, b, supported)

    if not sep.empty:
        au_mean, eu_mean = au["value"].mean(), eu["value"].mean()
        units += [q4(r.value, *_interval(r), au_mean, eu_mean, r.supported) for r in sep.itertuples(index=False)]
    else:
        p = _pairs(au, eu, ["seed", "aggregation"])
        units += [q4(r.value_b - r.value_a, *_paired_interval(dist, getattr(r, f"{ROW}_b"), [getattr(r, f"{ROW}_a")]),
                     r.value_a, r.value_b, r.supported) for r in p.itertuples(index=False)]
    return units


def separation_units(results: pd.DataFrame, spec: ReportSpec, dist: Distributions | None = None) -> pd.DataFrame:
    """Every unit of evidence (columns :data:`UNIT_COLUMNS`); one built on an unsupported row is not
    decided. ``dist``: the run's stored resamples (``results[ROW]`` points into them), which give
    the paired intervals of the differences derived from two or more rows."""
    out = []
    if "supported" not in results.columns:  # a table from before values_seg.runner.support: every row supported
        results = results.assign(supported=True)
    results = results.assign(supported=results["supported"].astype(bool))
    for sc in scenarios(results):
        df = select(results, sc)
        for (backbone, model), rows in df.groupby(["backbone", "prediction_model"], sort=True):
            for q, yes, decided, interval, value, a, b, supported in _units_one(rows, spec, dist):
                out.append((sc.dataset, sc.scenario, backbone, model, q, bool(yes), bool(decided and supported),
                            bool(interval), float(value), float(a), float(b), bool(supported)))
    return pd.DataFrame(out, columns=UNIT_COLUMNS)


def _evidence_label(question: str, spec: ReportSpec) -> str:
    """The label of the metrics a question is decided on (Q1/Q2: the "AU" ones, Q3/Q4: "EU")."""
    metrics = spec.separation_metrics("AU" if question in ("Q1", "Q2") else "EU")
    return "/".join(dict.fromkeys(m.label for m in metrics))


def _answer(question: str, units: pd.DataFrame, spec: ReportSpec) -> Answer:
    u = units[units["question"] == question]
    yes, decided, ok = (u[c].to_numpy(dtype=bool) for c in ("yes", "decided", "supported"))
    m, s, _ = mean_std(u["value"].to_numpy(dtype=float))
    a = float(np.nanmean(u["a"])) if u["a"].notna().any() else math.nan
    b = float(np.nanmean(u["b"])) if u["b"].notna().any() else math.nan
    return Answer(question, decide(yes, decided), int((yes & decided).sum()), int(yes.size), m, s, a, b,
                  _evidence_label(question, spec), int((~decided).sum()),
                  int((~u["interval"].to_numpy(dtype=bool) & ok).sum()), int((~ok).sum()))


@dataclass
class SeparationRow:
    scenario: Scenario
    backbone: str
    prediction_model: str  # "" for a scenario summary over all models
    answers: dict[str, Answer]


def separation_table(results: pd.DataFrame, spec: ReportSpec, dist: Distributions | None = None
                     ) -> list[SeparationRow]:
    """Q1-Q4 per scenario and prediction model (rows without any evidence are left out)."""
    units = separation_units(results, spec, dist)
    rows = []
    for sc in scenarios(units):
        u_sc = select(units, sc)
        groups = u_sc[["backbone", "prediction_model"]].drop_duplicates().itertuples(index=False)
        for backbone, model in sorted(groups, key=lambda g: (natural_key(g[0]),
                                                             spec.order_key("prediction_model", g[1]))):
            u = u_sc[(u_sc["backbone"] == backbone) & (u_sc["prediction_model"] == model)]
            answers = {q: _answer(q, u, spec) for q in QUESTIONS}
            if any(a.total for a in answers.values()):
                rows.append(SeparationRow(sc, backbone, model, answers))
    return rows


def separation_summary(results: pd.DataFrame, spec: ReportSpec, dist: Distributions | None = None
                       ) -> list[SeparationRow]:
    """Figure 2a: Q1-Q4 per scenario, the units of all prediction models pooled."""
    units = separation_units(results, spec, dist)
    out = []
    for sc in scenarios(units):
        u = select(units, sc)
        answers = {q: _answer(q, u, spec) for q in QUESTIONS}
        if any(a.total for a in answers.values()):
            out.append(SeparationRow(sc, "", "", answers))
    return out


def measure_summary(results: pd.DataFrame, spec: ReportSpec) -> pd.DataFrame:
    """Figure 2b: per scenario and (measure, uncertainty type), the "AU" and "EU" evidence (NCC and
    AUROC) averaged over prediction models and aggregations (seed means first), with the std over
    those methods; values the data cannot support (``supported`` False) left out.

    Columns: dataset, scenario, metric (a metric declared as "AU" or "EU" evidence), measure,
    uncertainty_type, mean, std, n, role ("AU" | "EU"), label (the metric's).
    """
    frames = []
    metrics = [(role, m) for role in ("AU", "EU") for m in spec.separation_metrics(role)]
    for role, m_spec in metrics:
        rows = _finite(metric_rows(results, m_spec.task, m_spec.metric))
        rows = rows[rows["measure"] != ""]
        if "supported" in rows.columns:  # a value the data cannot support (tied scores: AUROC 0.5) is no evidence
            rows = rows[rows["supported"].astype(bool)]
        for sc in scenarios(rows):
            r = _pick_split(select(rows, sc), SPLITS[role])
            methods = r.groupby(["backbone", "prediction_model", "measure", "uncertainty_type", "aggregation"],
                                sort=True)["value"].mean().reset_index()
            for (measure, utype), g in methods.groupby(["measure", "uncertainty_type"], sort=True):
                m, s, n = mean_std(g["value"].to_numpy())
                frames.append((sc.dataset, sc.scenario, m_spec.metric, measure, utype, m, s, n, role, m_spec.label))
    out = pd.DataFrame(frames, columns=["dataset", "scenario", "metric", "measure", "uncertainty_type", "mean", "std",
                                        "n", "role", "label"])
    if out.empty:
        return out
    order = {(role, m.metric): i for i, (role, m) in enumerate(metrics)}
    key = [(natural_key(r.dataset), natural_key(r.scenario), order[(r.role, r.metric)],
            spec.order_key("uncertainty_type", r.uncertainty_type), spec.order_key("measure", r.measure))
           for r in out.itertuples(index=False)]
    return out.iloc[sorted(range(len(out)), key=key.__getitem__)].reset_index(drop=True)
