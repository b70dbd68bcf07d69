"""Downstream-task contract: per-case evaluation records in, tidy metric rows out (appendix A).

The runner evaluates every (dataset, seed, backbone, prediction model) once (the fused
evaluation of :mod:`values_seg.evaluation`) and hands the result to each task as an
:class:`EvaluationResult`. A task plugin turns it into metric rows::

    {"task": "failure_detection", "metric": "aurc", "split": "iid",
     "measure": "mutual_information", "aggregation": "patch", "value": 0.12}

``measure`` / ``aggregation`` are ``None`` for metrics that do not depend on them (Dice, GED).
The runner adds the identifying columns (dataset, scenario, seed, backbone, prediction_model,
uncertainty_type) to make the tidy results table of DESIGN.md.

Splits of the test set: ``"iid"`` (cases with ``ood == False``), ``"ood"`` (``ood == True``)
and ``"all"`` (both, e.g. OoD detection needs both).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from values_seg.metrics import CalibrationBins

#: Columns of ``EvaluationResult.cases`` (one row per evaluated case; more meta columns may follow).
CASE_COLUMNS = ("case_id", "split", "ood", "shift", "dice", "ged", "predicted_fraction")
#: Columns of ``EvaluationResult.scores`` (one row per case x measure x aggregation).
SCORE_COLUMNS = ("case_id", "split", "measure", "aggregation", "score")
#: Columns of ``EvaluationResult.ncc`` (one row per case x measure).
NCC_COLUMNS = ("case_id", "split", "measure", "ncc")


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
    """Base class of task plugins: ``score(result) -> list of metric-row dicts``.

    ``metrics`` documents (metric name -> "higher"/"lower" is better) for reports; ``requires``
    what it reads.
    ``uncertainty_types`` lists the types a task is meaningful for (Figure 3 excludes the others
    from its averages; active learning queries only with these).
    """

    name: str = "task"
    metrics: dict[str, str] = {}
    uncertainty_types: tuple[str, ...] = ("PU", "AU", "EU")
    #: what the task reads: "test", "calibration" and/or "active_learning" (a second training cycle)
    requires: tuple[str, ...] = ("test",)

    def score(self, result: EvaluationResult) -> list[dict]:
        raise NotImplementedError


def row(task: str, metric: str, split: str, value: float, measure: str | None = None, aggregation: str | None = None) -> dict:
    """One metric row (see the module docstring)."""
    return {
        "task": task,
        "metric": metric,
        "split": split,
        "measure": measure,
        "aggregation": aggregation,
        "value": float(value),
    }
