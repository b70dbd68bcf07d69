"""Separation of AU and EU (paper section 4.1, Q1-Q4; Figure 2a, Table 4) for one prediction model.

Per pair of an AU and an EU measure, the paired differences ``ncc_au_minus_eu`` (Q1 vs Q2) and
``auroc_eu_minus_au`` (Q3 vs Q4); their definitions and when no row is emitted: docs/design-rationale.md,
"Separation task".
"""

from __future__ import annotations

from functools import partial

import numpy as np

from values_seg import hookimpl
from values_seg.statistics import batched
from values_seg.components.task import CaseStatistic, CaseStatisticTask, EvaluationResult, Metric, Reading

from ._common import case_ids, floats, has_both_classes, is_ood, ncc_table, score_groups


def _difference(first, second):
    """The statistic ``first(indices) - second(indices)``."""
    return lambda indices: first(indices) - second(indices)


class SeparationTask(CaseStatisticTask):
    """AU/EU separation (Q1-Q4): NCC of AU minus EU measures on i.i.d. data, AUROC of EU minus AU measures."""

    name = "separation"
    label = "Separation"
    metrics = (
        Metric("ncc_au_minus_eu", "higher", "ΔNCC (AU − EU)", splits=("iid",), per_aggregation=False,
               reading=Reading(table=False, separation_role="AU-EU")),
        Metric("auroc_eu_minus_au", "higher", "ΔAUROC (EU − AU)", splits=("all",),
               reading=Reading(table=False, separation_role="EU-AU")),
    )
    uncertainty_types = ("AU", "EU")
    consumes = ("ncc",)

    def statistics(self, result: EvaluationResult):
        types = result.measure_types or {}
        au_measures = sorted(m for m, t in types.items() if t == "AU")
        eu_measures = sorted(m for m, t in types.items() if t == "EU")
        if not au_measures or not eu_measures:
            return
        ncc = ncc_table(result, "iid")
        ncc_mean = {m: partial(batched.mean, values=ncc[m].to_numpy(float), ignore_nan=True)
                    for m in ncc.columns if np.isfinite(ncc[m].to_numpy(float)).any()}
        scores = {key: rows.sort_values("case_id") for key, rows in score_groups(result)}
        for au in au_measures:
            for eu in eu_measures:
                if au in ncc_mean and eu in ncc_mean:
                    yield CaseStatistic("ncc_au_minus_eu", "iid", ncc.index.astype(str).tolist(),
                                        _difference(ncc_mean[au], ncc_mean[eu]), au, versus=eu)
                for aggregation in sorted({a for m, a in scores if m == au} & {a for m, a in scores if m == eu}):
                    rows_au, rows_eu = scores[(au, aggregation)], scores[(eu, aggregation)]
                    labels = is_ood(rows_au)
                    if case_ids(rows_au) != case_ids(rows_eu) or not has_both_classes(labels):
                        continue
                    auroc = {m: partial(batched.auroc, is_ood=labels, uncertainty=floats(r, "score"))
                             for m, r in ((au, rows_au), (eu, rows_eu))}
                    yield CaseStatistic("auroc_eu_minus_au", "all", case_ids(rows_au),
                                        _difference(auroc[eu], auroc[au]), au, aggregation, versus=eu)


@hookimpl
def values_seg_tasks():
    return [SeparationTask]
