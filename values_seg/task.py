"""Downstream-task contract: per-case evaluation records in, tidy metric rows out (appendix A).

The runner evaluates every (dataset, seed, backbone, prediction model) once (the fused
evaluation of :mod:`values_seg.evaluation`) and hands the result to each task as an
:class:`EvaluationResult`. A task plugin turns it into metric rows::

    {"task": "failure_detection", "metric": "aurc", "split": "iid",
     "measure": "mutual_information", "aggregation": "patch", "value": 0.12}

``measure`` / ``aggregation`` are ``None`` for metrics that do not depend on them (Dice, GED).
A row comparing two measures (the separation study) names the second one in ``versus``. The
runner adds the identifying columns (dataset, scenario, seed, backbone, prediction_model,
uncertainty_type) to make the tidy results table of DESIGN.md.

Splits of the test set: ``"iid"`` (cases with ``ood == False``), ``"ood"`` (``ood == True``)
and ``"all"`` (both, e.g. OoD detection needs both).

A task declares what it is; the runner records the declaration in the run directory and the
report reads it from there (so a new task's metrics reach the tables, plots and LaTeX with no
edit to the report):

* ``name``, ``label`` (the column group of the downstream table, e.g. "OoD-D");
* ``metrics``: one :class:`Metric` per metric it reports (direction, label, splits, whether it
  depends on the measure and aggregation, whether it is the task's primary metric, shown in
  the per-component deviation plots of Figure 3);
* ``uncertainty_types`` it suits (Figure 3 averages only those; active learning queries only
  with those);
* ``requires``: the stages it needs (:data:`STAGES`; e.g. ``"active_learning"`` makes the
  runner run a second training cycle).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal

import pandas as pd

from values_seg.metrics import CalibrationBins

#: Columns of ``EvaluationResult.cases`` (one row per evaluated case; more meta columns may follow).
CASE_COLUMNS = ("case_id", "split", "ood", "shift", "dice", "ged", "predicted_fraction")
#: Columns of ``EvaluationResult.scores`` (one row per case x measure x aggregation).
SCORE_COLUMNS = ("case_id", "split", "measure", "aggregation", "score")
#: Columns of ``EvaluationResult.ncc`` (one row per case x measure).
NCC_COLUMNS = ("case_id", "split", "measure", "ncc")


#: Stages a task may require. "test": the fused evaluation of the test split (always run);
#: "calibration": Platt scaling on validation and calibration bins on test; "active_learning":
#: the unlabeled pool is scored and a second training cycle is run per query (appendix A.4).
STAGES = ("test", "calibration", "active_learning")


@dataclass(frozen=True)
class Metric:
    """A metric a task reports, as the report needs to know it.

    ``direction``: which values are better. ``splits``: the splits its rows carry ("iid", "ood",
    "all"). ``per_measure`` / ``per_aggregation``: whether its rows name a measure / an
    aggregation (Dice and GED do neither; ACE and NCC no aggregation). ``primary``: the task's
    headline metric (Figure 3 shows one per task). ``table``: a column of the downstream table.
    """

    name: str
    direction: Literal["higher", "lower"]
    label: str = ""
    splits: tuple[str, ...] = ("iid", "ood")
    per_measure: bool = True
    per_aggregation: bool = True
    primary: bool = False
    table: bool = True

    def __post_init__(self) -> None:
        if self.direction not in ("higher", "lower"):
            raise ValueError(f"metric {self.name!r}: direction must be 'higher' or 'lower', got {self.direction!r}")
        bad = [s for s in self.splits if s not in ("iid", "ood", "all")]
        if bad:
            raise ValueError(f"metric {self.name!r}: splits must be among iid, ood, all, got {bad}")
        if not self.label:
            object.__setattr__(self, "label", self.name)

    def to_dict(self) -> dict:
        return {**asdict(self), "splits": list(self.splits)}


@dataclass
class ActiveLearningResult:
    """Mean OoD-test Dice of the first cycle, of random querying, and per (measure, aggregation)
    of the second cycle after querying with that score (paper eq. 9-10)."""

    first_dice: float
    random_dice: float
    method_dice: dict[tuple[str, str], float] = field(default_factory=dict)


@dataclass
class EvaluationResult:
    """Everything the tasks need from one (dataset, seed, backbone, prediction model)."""

    context: dict[str, Any]  # dataset, scenario, seed, backbone, prediction_model, family
    cases: pd.DataFrame  # CASE_COLUMNS (+ meta), test split (and "pool" rows for active learning)
    scores: pd.DataFrame  # SCORE_COLUMNS
    ncc: pd.DataFrame  # NCC_COLUMNS
    calibration: dict[tuple[str, str], CalibrationBins] = field(default_factory=dict)  # (measure, iid|ood)
    measure_types: dict[str, str] = field(default_factory=dict)  # measure -> PU|AU|EU under this family
    active_learning: ActiveLearningResult | None = None

    def test_cases(self, subset: str = "all") -> pd.DataFrame:
        """Test cases of ``subset``: "iid", "ood" or "all"."""
        test = self.cases[self.cases["split"] == "test"]
        if subset == "all":
            return test
        if subset not in ("iid", "ood"):
            raise ValueError(f"unknown subset {subset!r}; use 'iid', 'ood' or 'all'")
        return test[test["ood"] == (subset == "ood")]

    def test_scores(self) -> pd.DataFrame:
        """Scores of the test cases joined with their ``ood`` flag and ``dice``."""
        test = self.test_cases("all")[["case_id", "ood", "dice"]]
        return self.scores[self.scores["split"] == "test"].merge(test, on="case_id", how="inner")


class Task:
    """Base class of task plugins: ``score(result) -> list of metric-row dicts`` (see the module
    docstring for what a task declares)."""

    name: ClassVar[str] = "task"
    label: ClassVar[str] = ""
    metrics: ClassVar[tuple[Metric, ...]] = ()
    uncertainty_types: ClassVar[tuple[str, ...]] = ("PU", "AU", "EU")
    requires: ClassVar[tuple[str, ...]] = ("test",)

    def score(self, result: EvaluationResult) -> list[dict]:
        raise NotImplementedError

    @classmethod
    def declaration(cls) -> dict:
        """What the runner records about this task for the report."""
        return {"metrics": [m.to_dict() for m in cls.metrics], "uncertainty_types": list(cls.uncertainty_types),
                "requires": list(cls.requires)}


def row(task: str, metric: str, split: str, value: float, measure: str | None = None, aggregation: str | None = None,
        versus: str | None = None) -> dict:
    """One metric row (see the module docstring)."""
    return {
        "task": task,
        "metric": metric,
        "split": split,
        "measure": measure,
        "aggregation": aggregation,
        "versus": versus,
        "value": float(value),
    }
