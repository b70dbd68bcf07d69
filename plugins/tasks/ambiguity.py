"""Ambiguity modeling (paper appendix A.6, eq. 12-14): uncertainty maps vs rater disagreement.

Rows ``ncc`` per measure and ``ged`` per prediction model, i.i.d. and OoD; how each is averaged and
when no row is emitted: docs/design-rationale.md, "Ambiguity task".
"""

from __future__ import annotations

from functools import partial

from values_seg import hookimpl
from values_seg.statistics import batched
from values_seg.components.task import CaseStatistic, CaseStatisticTask, EvaluationResult, Metric, Reading

from ._common import SUBSETS, case_ids, floats, ncc_table


class AmbiguityTask(CaseStatisticTask):
    """Ambiguity modeling: mean NCC with the raters' variance per measure, and GED per model, i.i.d. and OoD."""

    name = "ambiguity"
    label = "Ambiguity Modeling"
    metrics = (
        Metric("ncc", "higher", "NCC", per_aggregation=False, primary=True, reading=Reading(separation_role="AU")),
        Metric("ged", "lower", "GED", per_measure=False),
    )
    uncertainty_types = ("PU", "AU")
    consumes = ("ncc", "ged")

    def statistics(self, result: EvaluationResult):
        for subset in SUBSETS:
            ncc = ncc_table(result, subset)
            for measure in sorted(ncc.columns):
                yield CaseStatistic("ncc", subset, ncc.index.astype(str).tolist(),
                                    partial(batched.mean, values=ncc[measure].to_numpy(float), ignore_nan=True),
                                    str(measure))
            cases = result.test_cases(subset)
            if "ged" in cases and not cases.empty:
                yield CaseStatistic("ged", subset, case_ids(cases),
                                    partial(batched.mean, values=floats(cases, "ged"), ignore_nan=True))


@hookimpl
def values_seg_tasks():
    return [AmbiguityTask]
