"""Failure detection (paper appendix A.3, eq. 4-8; Traub et al. 2024): rank cases by confidence to
defer failures.

Rows per (measure, aggregation) and per subset (``split`` in ``"iid"``/``"ood"``, computed on
each separately), all lower is better, with the per-case risk ``1 - Dice`` (eq. 4, Dice of
eq. 3) and the confidence ``-score`` (the negative aggregated uncertainty): ``aurc`` and
``eaurc`` (the paper's), ``augrc`` and ``eaugrc`` (the area under the generalized-risk-coverage
curve and its excess over the oracle, as fd-shifts reports them today). Ties in confidence form
one curve step (:mod:`values_seg.metrics.selective`), so E-AURC can fall below 0 (bounded:
:data:`EAURC_NOTE`, which the report prints under its tables). Any non-empty subset is scored (one case
gives a defined AURC); an empty subset yields no row.
"""

from __future__ import annotations

from functools import partial

from values_seg import hookimpl
from values_seg.statistics import batched
from values_seg.task import CaseStatistic, CaseStatisticTask, EvaluationResult, Metric

from ._common import SELECTIVE_RISK, case_ids, floats, score_subsets

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
        Metric("aurc", "lower", "AURC", primary=True, evidence=SELECTIVE_RISK),
        Metric("eaurc", "lower", "E-AURC", note=EAURC_NOTE, evidence=SELECTIVE_RISK, oracle_excess=True),
        Metric("augrc", "lower", "AUGRC", evidence=SELECTIVE_RISK),
        Metric("eaugrc", "lower", "E-AUGRC", table=False, evidence=SELECTIVE_RISK, oracle_excess=True),
    )
    uncertainty_types = ("PU", "AU", "EU")
    consumes = ("dice",)

    def statistics(self, result: EvaluationResult):
        for measure, aggregation, subset, part in score_subsets(result):
            areas = _Areas(1.0 - floats(part, "dice"), -floats(part, "score"))
            ids = case_ids(part)
            for metric in AREAS:
                yield CaseStatistic(metric, subset, ids, partial(areas, name=metric), measure, aggregation)


@hookimpl
def values_seg_tasks():
    return [FailureDetectionTask]
