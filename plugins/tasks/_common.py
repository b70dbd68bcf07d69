"""Helpers shared by the task plugins (not a plugin: the leading underscore keeps it out of discovery).

The conventions every task follows (scores, subsets, when no row is emitted, one definition for value and
bootstrap): docs/design-rationale.md, "Tasks"; the contract: :mod:`values_seg.components.task`.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pandas as pd

from values_seg import metrics
from values_seg.components.task import EvaluationResult, Support

#: The two test subsets over which the per-subset tasks report (appendix A.3, A.5, A.6).
SUBSETS = ("iid", "ood")
#: Evidence group (:attr:`values_seg.components.task.Reading.evidence`) of the areas under a risk-coverage
#: curve of one ranking: AURC, AUGRC (failure detection), Dice R-AUC (= AUGRC with risk 1 - Dice).
SELECTIVE_RISK = "selective risk of one ranking"
#: What a ranking of cases by confidence against their risk (1 - Dice) needs to mean anything
#: (:mod:`values_seg.runner.support`): 4 cases (a perfect ranking by chance: 1/4! = 0.042), scores that are
#: not all tied and risks that are not all equal.
RANKING_SUPPORT = Support(min_cases=4, varies=("score", "dice"))


def finite_mean(values) -> float | None:
    """Mean of the finite entries of ``values``; ``None`` when there is none (e.g. all NaN)."""
    a = np.asarray(values, dtype=np.float64).reshape(-1)
    a = a[np.isfinite(a)]
    return float(a.mean()) if a.size else None


def score_groups(result: EvaluationResult) -> Iterator[tuple[tuple[str, str], pd.DataFrame]]:
    """``((measure, aggregation), rows)`` over the test scores, sorted by measure then aggregation.

    ``rows`` has the columns of :meth:`EvaluationResult.test_scores` (score, ood, dice, ...).
    """
    scores = result.test_scores()
    if scores.empty:
        return
    for (measure, aggregation), rows in scores.groupby(["measure", "aggregation"], sort=True):
        yield (str(measure), str(aggregation)), rows


def is_ood(rows: pd.DataFrame) -> np.ndarray:
    """The per-case OoD labels of ``rows`` as booleans."""
    return rows["ood"].to_numpy().astype(bool)


def subset_rows(rows: pd.DataFrame, subset: str) -> pd.DataFrame:
    """The rows of ``subset`` ("iid", "ood" or "all") by their ``ood`` flag."""
    if subset == "all":
        return rows
    if subset not in SUBSETS:
        raise ValueError(f"unknown subset {subset!r}; use 'iid', 'ood' or 'all'")
    return rows[is_ood(rows) == (subset == "ood")]


def score_subsets(result: EvaluationResult) -> Iterator[tuple[str, str, str, pd.DataFrame]]:
    """``(measure, aggregation, subset, rows)``: :func:`score_groups` split into the non-empty
    :data:`SUBSETS`."""
    for (measure, aggregation), rows in score_groups(result):
        for subset in SUBSETS:
            part = subset_rows(rows, subset)
            if not part.empty:
                yield measure, aggregation, subset, part


def has_both_classes(labels: np.ndarray) -> bool:
    """Whether binary ``labels`` contain both i.i.d. (False) and OoD (True) cases (AUROC defined)."""
    n = int(labels.sum())
    return 0 < n < labels.shape[0]


def ncc_rows(result: EvaluationResult, subset: str) -> pd.DataFrame:
    """NCC rows (case_id, measure, ncc) of the test cases of ``subset`` (quantity ``"ncc"``)."""
    return result.measure_values("ncc", subset)


def mean_ncc(result: EvaluationResult, subset: str) -> dict[str, float]:
    """Per measure, the NaN-ignoring mean NCC over the test cases of ``subset``.

    A case's NCC is NaN where the raters agree everywhere (or the map is constant); a measure
    whose NCC is NaN on every case of the subset is left out.
    """
    out = {}
    for measure, rows in ncc_rows(result, subset).groupby("measure", sort=True):
        value = finite_mean(rows["ncc"].to_numpy(dtype=np.float64))
        if value is not None:
            out[str(measure)] = value
    return out


def auroc_by_score(result: EvaluationResult) -> dict[tuple[str, str], float]:
    """AUROC of OoD detection per (measure, aggregation); only where both classes are present."""
    out = {}
    for key, rows in score_groups(result):
        labels = is_ood(rows)
        if has_both_classes(labels):
            out[key] = metrics.auroc(labels, rows["score"].to_numpy(dtype=float))
    return out


def case_ids(rows: pd.DataFrame) -> list[str]:
    """The ``case_id`` column as a list (the order of a statistic's data)."""
    return rows["case_id"].astype(str).tolist()


def floats(rows: pd.DataFrame, column: str) -> np.ndarray:
    return rows[column].to_numpy(dtype=np.float64)


def ncc_table(result: EvaluationResult, subset: str) -> pd.DataFrame:
    """NCC of the test cases of ``subset``, one row per case (sorted ids), one column per measure."""
    rows = ncc_rows(result, subset)
    if rows.empty:
        return pd.DataFrame()
    return rows.pivot(index="case_id", columns="measure", values="ncc").sort_index()
