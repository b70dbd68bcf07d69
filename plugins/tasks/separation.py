"""Separation of AU and EU (paper section 4.1, Q1-Q4; Figure 2a, Table 4) for one prediction model.

The model's measures are typed by its family (``result.measure_types``: measure -> PU/AU/EU,
DESIGN.md). For every pair of an AU measure ``au`` and an EU measure ``eu`` the rows carry the
pair as ``measure=au`` and ``versus=eu``:

* ``ncc_au_minus_eu`` (``split="iid"``, ``aggregation=None``; Q1 vs Q2): the mean NCC with the
  raters' variance over the i.i.d. test cases of the AU measure minus that of the EU measure
  (each the NaN-ignoring mean of the ``ambiguity`` task's ``ncc`` row). Positive: the AU measure
  captures rater disagreement better than the EU measure, as the theory claims.
* ``auroc_eu_minus_au`` per aggregation (``split="all"``; Q3 vs Q4): the OoD-detection AUROC of
  the EU measure minus that of the AU measure (the ``ood_detection`` task's ``auroc`` rows).
  Positive: the EU measure detects the distribution shift better, as the theory claims.

No rows for a model without both an AU and an EU measure (a deterministic model), nor where the
data lack what a difference needs (NCC undefined on every i.i.d. case; no OoD or no i.i.d. cases).
"""

from __future__ import annotations

from values_seg import hookimpl
from values_seg.task import EvaluationResult, Metric, Task, row

from ._common import auroc_by_score, mean_ncc

class SeparationTask(Task):
    """AU/EU separation (Q1-Q4): NCC of AU minus EU measures on i.i.d. data, AUROC of EU minus AU measures."""

    name = "separation"
    label = "Separation"
    metrics = (
        Metric("ncc_au_minus_eu", "higher", "ΔNCC (AU − EU)", splits=("iid",), per_aggregation=False, table=False),
        Metric("auroc_eu_minus_au", "higher", "ΔAUROC (EU − AU)", splits=("all",), table=False),
    )
    uncertainty_types = ("AU", "EU")
    requires = ("test",)

    def score(self, result: EvaluationResult) -> list[dict]:
        types = result.measure_types or {}
        au_measures = sorted(m for m, t in types.items() if t == "AU")
        eu_measures = sorted(m for m, t in types.items() if t == "EU")
        if not au_measures or not eu_measures:
            return []
        ncc = mean_ncc(result, "iid")
        auroc = auroc_by_score(result)
        aggregations = sorted({a for _, a in auroc})
        out = []
        for au in au_measures:
            for eu in eu_measures:
                if au in ncc and eu in ncc:
                    out.append(row(self.name, "ncc_au_minus_eu", "iid", ncc[au] - ncc[eu], au, versus=eu))
                for aggregation in aggregations:
                    if (au, aggregation) in auroc and (eu, aggregation) in auroc:
                        value = auroc[(eu, aggregation)] - auroc[(au, aggregation)]
                        out.append(row(self.name, "auroc_eu_minus_au", "all", value, au, aggregation, versus=eu))
        return out


@hookimpl
def values_seg_tasks():
    return [SeparationTask]
