"""Failure detection (paper appendix A.3, eq. 4-8; Traub et al. 2024): rank cases by confidence to
defer failures. AURC, E-AURC, AUGRC, E-AUGRC per (measure, aggregation) and subset, risk ``1 - Dice``;
E-AURC can fall below 0 with tied confidences (:data:`EAURC_NOTE`): docs/design-rationale.md,
"Failure-detection task".
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd

from values_seg import hookimpl, metrics
from values_seg.statistics import batched
from values_seg.components.task import CaseStatistic, CaseStatisticTask, EvaluationResult, Metric, Reading

from ._common import RANKING_SUPPORT, SELECTIVE_RISK, case_ids, floats, score_subsets

AREAS = ("aurc", "eaurc", "augrc", "eaugrc")
#: Why E-AURC can be negative, and by how much (the bound is derived in values_seg.metrics.selective).
EAURC_NOTE = (
    "E-AURC = AURC − the oracle's AURC. As in fd-shifts, cases of equal confidence form one step of the "
    "risk-coverage curve, interpolated linearly, while the oracle ranks every case strictly; so where confidences "
    "tie, E-AURC can fall below 0, by at most ½ · w · (mean risk − lowest risk), w the largest group of tied "
    "confidences as a share of all cases (with risks all 0 or 1, w is at least 1/N: the oracle's area is then its "
    "continuous limit). Without ties (and risks not all 0 or 1) it is never below 0. Bootstrap resamples repeat "
    "cases, which then tie, so an interval can reach slightly below 0. E-AUGRC is never below 0."
)


class _Areas:
    """The four areas of one score's cases on the same resamples, from one sort per resample
    (:func:`values_seg.statistics.batched.selective`), remembered for the last indices."""

    def __init__(self, risks, confidences):
        self.risks, self.confidences = risks, confidences
        self._last: tuple = (None, None)

    def __call__(self, indices, name: str):
        if self._last[0] is not indices:
            self._last = (indices, batched.selective(indices, self.risks, self.confidences))
        return self._last[1][name]


class FailureDetectionTask(CaseStatisticTask):
    """Failure detection: AURC, E-AURC, AUGRC and E-AUGRC with risk 1 - Dice and confidence -uncertainty, i.i.d. and OoD."""

    name = "failure_detection"
    label = "Failure Detection"
    metrics = (
        Metric("aurc", "lower", "AURC", primary=True, support=RANKING_SUPPORT, reading=Reading(evidence=SELECTIVE_RISK)),
        Metric("eaurc", "lower", "E-AURC", note=EAURC_NOTE, support=RANKING_SUPPORT,
               reading=Reading(evidence=SELECTIVE_RISK, oracle_excess=True)),
        Metric("augrc", "lower", "AUGRC", support=RANKING_SUPPORT, reading=Reading(evidence=SELECTIVE_RISK)),
        Metric("eaugrc", "lower", "E-AUGRC", support=RANKING_SUPPORT,
               reading=Reading(table=False, evidence=SELECTIVE_RISK, oracle_excess=True)),
    )
    uncertainty_types = ("PU", "AU", "EU")
    consumes = ("dice",)

    def statistics(self, result: EvaluationResult):
        for measure, aggregation, subset, part in score_subsets(result):
            areas = _Areas(1.0 - floats(part, "dice"), -floats(part, "score"))
            ids = case_ids(part)
            for metric in AREAS:
                yield CaseStatistic(metric, subset, ids, partial(areas, name=metric), measure, aggregation)

    def curves(self, result: EvaluationResult) -> pd.DataFrame:
        """The risk-coverage and generalized-risk-coverage curves (``curve``) that the areas integrate, per
        measure, aggregation and subset, from the same risks and confidences; ``ranking`` "oracle" (measure and
        aggregation empty): the cases ranked by their risk. Columns: :data:`CURVE_COLUMNS`."""
        rows, oracles = [], {}
        for measure, aggregation, subset, part in score_subsets(result):
            risks, confidences = 1.0 - floats(part, "dice"), -floats(part, "score")
            ok = np.isfinite(risks) & np.isfinite(confidences)
            if ok.any():
                rows += curve_rows("uncertainty", measure, aggregation, subset, risks[ok], confidences[ok])
                oracles.setdefault(subset, risks[ok])
        for subset, risks in oracles.items():
            rows += curve_rows("oracle", "", "", subset, risks, -risks)
        return pd.DataFrame(rows, columns=CURVE_COLUMNS)


#: The curves :meth:`FailureDetectionTask.curves` writes: (name, points, area under them).
CURVES = (("risk_coverage", metrics.risk_coverage_curve, metrics.aurc),
          ("generalized_risk_coverage", metrics.generalized_risk_coverage_curve, metrics.augrc))
CURVE_COLUMNS = ["curve", "ranking", "measure", "aggregation", "split", "point", "coverage", "risk", "area", "n"]


def curve_rows(ranking: str, measure: str, aggregation: str, subset: str, risks, confidences) -> list[tuple]:
    """One row per point of each curve of :data:`CURVES`, coverage from 1 down to 0."""
    out = []
    for name, points, area_of in CURVES:
        coverage, risk = points(risks, confidences)
        area = float(area_of(risks, confidences))
        out += [(name, ranking, measure, aggregation, subset, i, float(c), float(r), area, len(risks))
                for i, (c, r) in enumerate(zip(coverage, risk))]
    return out


@hookimpl
def values_seg_tasks():
    return [FailureDetectionTask]
