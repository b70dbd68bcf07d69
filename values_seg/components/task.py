"""Downstream-task contract: a :class:`Task` declares its metrics (:class:`Metric`) and turns the
per-case evaluation of one (dataset, seed, backbone, prediction model), an :class:`EvaluationResult`,
into tidy metric rows (:func:`row`); the runner records the declarations in the run directory
(``components.json``), from which the report reads them (appendix A).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Literal, Sequence

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from values_seg.statistics import CaseResamples

#: Columns of ``EvaluationResult.cases`` (one row per evaluated case), followed by one column per
#: per-case quantity computed and the case's metadata.
CASE_COLUMNS = ("case_id", "split", "ood", "shift")
#: Columns of ``EvaluationResult.scores`` (one row per case x measure x aggregation).
SCORE_COLUMNS = ("case_id", "split", "measure", "aggregation", "score")
#: Columns of ``EvaluationResult.per_measure`` (one row per case x measure), followed by one column
#: per per-measure quantity computed.
PER_MEASURE_COLUMNS = ("case_id", "split", "measure")
#: A metric's possible roles in the separation study (:attr:`Reading.separation_role`).
SEPARATION_ROLES = ("", "AU", "EU", "AU-EU", "EU-AU")


@dataclass(frozen=True)
class Support:
    """What a metric's value needs to mean anything: :mod:`values_seg.runner.support` marks a row
    the data cannot support (``supported``/``support_note`` in results.csv; the report never
    recommends it).

    ``min_cases``: the fewest test cases of the row's split. ``min_per_class``: the fewest i.i.d.
    and the fewest OoD cases among them (a ranking of OoD against i.i.d. cases). ``varies``:
    per-case inputs that must not be equal on every case of the split: "score" (the row's
    aggregated uncertainty score) or a column of ``EvaluationResult.cases`` (e.g. "dice": with
    every case failing alike there is nothing to rank). ``exchangeable``: the value means what the
    metric says only on test cases exchangeable with the validation split, where a conformal
    guarantee holds (a set size, the price of the guarantee; never on OoD cases, nor on cases
    whose ``exchangeable`` column in ``EvaluationResult.cases`` is False).
    """

    min_cases: int = 1
    min_per_class: int = 0
    varies: tuple[str, ...] = ()
    exchangeable: bool = False

    def __post_init__(self) -> None:
        if self.min_cases < 1 or self.min_per_class < 0:
            raise ValueError(f"min_cases must be >= 1 and min_per_class >= 0, got {self.min_cases} and "
                             f"{self.min_per_class}")
        if isinstance(self.varies, str):
            raise ValueError(f"varies must be a tuple of names, got the string {self.varies!r}")
        object.__setattr__(self, "varies", tuple(self.varies))


@dataclass(frozen=True)
class Reading:
    """How the report reads a metric beyond its value: where it is shown, what it is compared with,
    what it is evidence of. The defaults (a column of the downstream table, a piece of evidence of
    its own, no relation to another metric) suit most metrics.

    ``table``: a column of the downstream table. ``evidence``: metrics (of any task) with the same
    evidence name are near-duplicates, one piece of evidence in paired comparisons (e.g. AURC,
    AUGRC and the Dice R-AUC integrate the risk of one ranking). ``oracle_excess``: the metric is
    its evidence group's metric minus the value of an oracle ranking that depends on the
    prediction model only (E-AURC): a near-duplicate of its group when the measure or aggregation
    varies, a group of its own when the model varies. ``reference_of``: the metric is the reference
    value of another metric of the task (what an ideal model would get, e.g. the ACE of a perfectly
    calibrated model), with its interval in ``ci_low``/``ci_high``; the report marks where the
    other metric is compatible with it, and comparisons and rankings leave it out.
    ``baseline_of``: the metric is the value a fixed ranking (random, oracle) gets on another
    metric of the task (e.g. the R-AUC of a random retention order): it depends on the prediction
    model only, so Kendall's τ between the rankings of methods leaves it out. ``variant_of``: the
    metric is another definition of the task's metric of that name (e.g. the paper's eq. 11 ACE
    beside the merged-bin ACE): the recommendation picks by the other and names the rows where
    this one would pick another method. ``separation_role``: its role in the separation study
    (paper section 4.1, Figure 2), one of :data:`SEPARATION_ROLES`: "AU", per measure, how well
    its maps capture aleatoric uncertainty, higher is better (read on the i.i.d. split); "EU", per
    measure and aggregation, how well its scores detect epistemic uncertainty, a ranking score with
    0.5 = random (read on "all"); "AU-EU" / "EU-AU", per pair of an AU measure (``measure``) and an
    EU measure (``versus``), the "AU" evidence of the AU measure minus the EU measure's / the "EU"
    evidence of the EU measure minus the AU measure's; "" none.
    """

    table: bool = True
    evidence: str = ""
    oracle_excess: bool = False
    reference_of: str | None = None
    baseline_of: str | None = None
    variant_of: str | None = None
    separation_role: str = ""

    def __post_init__(self) -> None:
        if self.separation_role not in SEPARATION_ROLES:
            roles = ", ".join(map(repr, SEPARATION_ROLES))
            raise ValueError(f"separation_role must be one of {roles}, got {self.separation_role!r}")
        if self.baseline_of is not None and (not isinstance(self.baseline_of, str) or not self.baseline_of):
            raise ValueError(f"baseline_of must name another metric of the task, got {self.baseline_of!r}")
        if self.oracle_excess and not self.evidence:
            raise ValueError("oracle_excess needs the evidence group whose metric it is the oracle's excess of")


@dataclass(frozen=True)
class Metric:
    """A metric a task reports: its rows' ``metric`` name and ``direction`` (which values are
    better), and what the tables show of it.

    ``label``: its display name (default: ``name``). ``splits``: the splits its rows carry
    ("iid", "ood", "all"). ``per_measure`` / ``per_aggregation``: whether its rows name a measure
    / an aggregation (Dice and GED do neither, ACE and NCC no aggregation; without a measure
    there is no aggregation either). ``primary``: the task's headline metric (Figure 3 shows one
    per task). ``note``: what a reader must know to read its values (e.g. why it can fall below 0),
    printed under the tables that show it. ``support``: what its value needs to mean anything
    (:class:`Support`); ``reading``: how the report reads it beyond its value (:class:`Reading`).
    """

    name: str
    direction: Literal["higher", "lower"]
    label: str = ""
    splits: tuple[str, ...] = ("iid", "ood")
    per_measure: bool = True
    per_aggregation: bool = True
    primary: bool = False
    note: str = ""
    support: Support = Support()
    reading: Reading = Reading()

    def __post_init__(self) -> None:
        if self.direction not in ("higher", "lower"):
            raise ValueError(f"metric {self.name!r}: direction must be 'higher' or 'lower', got {self.direction!r}")
        bad = [s for s in self.splits if s not in ("iid", "ood", "all")]
        if bad:
            raise ValueError(f"metric {self.name!r}: splits must be among iid, ood, all, got {bad}")
        if not isinstance(self.support, Support) or not isinstance(self.reading, Reading):
            raise ValueError(f"metric {self.name!r}: support must be a Support and reading a Reading")
        if self.reading.baseline_of == self.name:
            raise ValueError(f"metric {self.name!r}: baseline_of must name another metric of the task, "
                             f"got {self.name!r}")
        object.__setattr__(self, "splits", tuple(self.splits))
        if not self.per_measure:
            object.__setattr__(self, "per_aggregation", False)
        if not self.label:
            object.__setattr__(self, "label", self.name)

    def to_dict(self) -> dict:
        """The metric as the runner records it in ``components.json``: one flat mapping of every
        field (:class:`Support`'s and :class:`Reading`'s beside the metric's own)."""
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("support", "reading")}
        return {**own, "splits": list(self.splits), **asdict(self.reading), **asdict(self.support),
                "varies": list(self.support.varies)}


@dataclass
class EvaluationResult:
    """Everything the tasks need from one (dataset, seed, backbone, prediction model)."""

    context: dict[str, Any]  # dataset, scenario, seed, backbone, prediction_model, family
    cases: pd.DataFrame  # CASE_COLUMNS + per-case quantities (+ meta); test cases and stages' splits
    scores: pd.DataFrame  # SCORE_COLUMNS
    per_measure: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(PER_MEASURE_COLUMNS)))
    outputs: dict[str, Any] = field(default_factory=dict)  # payload quantity -> its stored output
    measure_types: dict[str, str] = field(default_factory=dict)  # measure -> PU|AU|EU under this family
    stages: dict[str, Any] = field(default_factory=dict)  # stage name -> its result for this combination
    _views: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def _view(self, key, make):
        """A derived frame, built once per result (every task reads the same views; treat as read-only)."""
        if key not in self._views:
            self._views[key] = make()
        return self._views[key]

    def test_cases(self, subset: str = "all") -> pd.DataFrame:
        """Test cases of ``subset``: "iid", "ood" or "all"."""
        if subset not in ("iid", "ood", "all"):
            raise ValueError(f"unknown subset {subset!r}; use 'iid', 'ood' or 'all'")
        test = self._view("test", lambda: self.cases[self.cases["split"] == "test"])
        if subset == "all":
            return test
        return self._view(("test", subset), lambda: test[test["ood"] == (subset == "ood")])

    def test_scores(self) -> pd.DataFrame:
        """Scores of the test cases joined with their ``ood`` flag (and ``dice`` where computed)."""
        def make():
            test = self.test_cases("all")[["case_id", "ood"] + (["dice"] if "dice" in self.cases else [])]
            return self.scores[self.scores["split"] == "test"].merge(test, on="case_id", how="inner")

        return self._view("scores", make)

    def measure_values(self, quantity: str, subset: str = "all") -> pd.DataFrame:
        """A per-measure quantity of the test cases of ``subset``: rows (case_id, measure, value
        named ``quantity``); empty where it was not computed."""
        columns = ["case_id", "measure", quantity]
        if quantity not in self.per_measure:
            return pd.DataFrame(columns=columns)
        table = self.per_measure[self.per_measure["split"] == "test"][columns]
        return table.merge(self.test_cases(subset)[["case_id"]], on="case_id", how="inner")

    def output(self, quantity: str, default: Any = None) -> Any:
        """The stored output of a payload quantity (e.g. "calibration_bins"); ``default`` where not computed."""
        return self.outputs.get(quantity, default)


class Task:
    """Base class of task plugins: ``score(result)`` returns the metric rows (:func:`row`) of one
    evaluation and, optionally, ``bootstrap(result, resamples)`` their values on the resampled test
    cases, from which the runner makes each row's interval; a task whose metrics are statistics of
    test cases gets both from one definition by subclassing :class:`CaseStatisticTask`.

    A task declares ``name``; ``label`` (the column group of the downstream table, e.g. "OoD-D");
    ``metrics``, one :class:`Metric` per metric it reports; the ``uncertainty_types`` it suits
    (Figure 3 averages only those; active learning queries only with those); ``consumes``, the
    per-case quantities it reads (:mod:`values_seg.components.quantity`: ``"dice"`` a column of
    ``result.cases``, ``"ncc"`` of ``result.per_measure``, ``"calibration_bins"`` an output;
    the evaluation computes exactly the union over the sweep); and ``stages``, extra stages it
    needs (:class:`values_seg.components.stage.Stage`), whose results it reads from ``result.stages``.
    """

    name: ClassVar[str] = "task"
    label: ClassVar[str] = ""
    metrics: ClassVar[tuple[Metric, ...]] = ()
    uncertainty_types: ClassVar[tuple[str, ...]] = ("PU", "AU", "EU")
    consumes: ClassVar[tuple[str, ...]] = ()
    stages: ClassVar[tuple[type, ...]] = ()

    def score(self, result: EvaluationResult) -> list[dict]:
        raise NotImplementedError

    def bootstrap(self, result: EvaluationResult, resamples: "CaseResamples") -> list[dict]:
        """Per metric row of :meth:`score`, its value on each resample of the test cases: rows of
        :func:`samples_row` (``samples`` ``[B]``, NaN where undefined), keyed like the score rows.
        ``resamples.of(case_ids)`` gives the resample indices into a metric's cases. The default
        returns none (the rows get no interval unless they carry their own)."""
        return []

    @classmethod
    def declaration(cls) -> dict:
        """What the runner records about this task for the report."""
        return {"metrics": [m.to_dict() for m in cls.metrics], "uncertainty_types": list(cls.uncertainty_types),
                "consumes": list(cls.consumes), "stages": [s.name for s in cls.stages]}


def row(task: str, metric: str, split: str, value: float, measure: str | None = None, aggregation: str | None = None,
        versus: str | None = None, ci_low: float | None = None, ci_high: float | None = None) -> dict:
    """One metric row, e.g. ``{"task": "failure_detection", "metric": "aurc", "split": "iid",
    "measure": "mutual_information", "aggregation": "patch", "value": 0.12, ...}``: ``split`` one of
    "iid" (test cases with ``ood == False``), "ood" or "all"; ``measure`` / ``aggregation`` ``None``
    for a metric that does not depend on them (Dice, GED); ``versus`` the second measure of a row
    comparing two; ``ci_low``/``ci_high`` only for an interval the task computes itself (e.g. a
    Monte-Carlo interval; bootstrap intervals come from :meth:`Task.bootstrap`). The runner adds
    the identifying columns (dataset, scenario, seed, backbone, prediction_model, uncertainty_type)."""
    return {
        "task": task,
        "metric": metric,
        "split": split,
        "measure": measure,
        "aggregation": aggregation,
        "versus": versus,
        "value": float(value),
        "ci_low": None if ci_low is None else float(ci_low),
        "ci_high": None if ci_high is None else float(ci_high),
    }


#: The fields that identify a metric row of one evaluation (score rows and bootstrap rows match on them).
ROW_KEY = ("metric", "split", "measure", "aggregation", "versus")


def samples_row(task: str, metric: str, split: str, samples, measure: str | None = None,
                aggregation: str | None = None, versus: str | None = None) -> dict:
    """One row of :meth:`Task.bootstrap`: the metric's values on the resamples, ``[B]`` float64."""
    return {"task": task, "metric": metric, "split": split, "measure": measure, "aggregation": aggregation,
            "versus": versus, "samples": np.asarray(samples, dtype=np.float64).reshape(-1)}


@dataclass(frozen=True, eq=False)
class CaseStatistic:
    """A metric row whose value is a statistic of test cases: ``statistic(indices [B, n]) -> [B]``
    evaluates the metric on the cases ``case_ids[indices[b]]`` of each row ``b`` (e.g. a
    ``functools.partial`` of a :mod:`values_seg.statistics.batched` function with the cases' data,
    in ``case_ids`` order). Its value is the statistic on all cases (indices ``0 .. n - 1``)."""

    metric: str
    split: str
    case_ids: Sequence[str]
    statistic: Callable[[np.ndarray], np.ndarray]
    measure: str | None = None
    aggregation: str | None = None
    versus: str | None = None

    def value(self) -> float:
        n = len(self.case_ids)
        return float(np.asarray(self.statistic(np.arange(n, dtype=np.int64)[None]), dtype=np.float64).reshape(-1)[0])


class CaseStatisticTask(Task):
    """A task whose metrics are statistics of test cases: implement :meth:`statistics`; :meth:`score`
    (the value on all cases, rows where it is defined) and :meth:`bootstrap` (the same statistic
    on every resample) follow from it."""

    def statistics(self, result: EvaluationResult) -> Iterable[CaseStatistic]:
        raise NotImplementedError

    def _statistics(self, result: EvaluationResult) -> list[CaseStatistic]:
        """:meth:`statistics` of ``result``, built once for its score and its bootstrap."""
        cached = getattr(self, "_cached_statistics", None)
        if cached is None or cached[0] is not result:
            cached = (result, list(self.statistics(result)))
            self._cached_statistics = cached
        return cached[1]

    def score(self, result: EvaluationResult) -> list[dict]:
        out = []
        for s in self._statistics(result):
            value = s.value()
            if np.isfinite(value):
                out.append(row(self.name, s.metric, s.split, value, s.measure, s.aggregation, s.versus))
        return out

    def bootstrap(self, result: EvaluationResult, resamples: "CaseResamples") -> list[dict]:
        return [samples_row(self.name, s.metric, s.split, s.statistic(resamples.of(s.case_ids)), s.measure,
                            s.aggregation, s.versus) for s in self._statistics(result)]
