"""Ambiguity modeling (paper appendix A.6, eq. 12-14): uncertainty maps vs rater disagreement.

Rows, each for ``split`` in ``"iid"``/``"ood"``:

* ``ncc`` per measure (``aggregation=None``; higher is better): the NaN-ignoring mean over the
  subset's cases of the NCC between the measure's map and the raters' per-pixel variance. A case's
  NCC is NaN where the raters agree everywhere; a measure that is NaN on every case gets no row.
* ``ged`` per prediction model (``measure=None``, ``aggregation=None``; lower is better): the mean
  over the subset's cases of the generalised energy distance between the argmax of each sample and
  the raters.

An empty subset yields no row.
"""

from __future__ import annotations

from values_seg import hookimpl
from values_seg.task import EvaluationResult, Metric, Task, row

from ._common import SUBSETS, finite_mean, mean_ncc


class AmbiguityTask(Task):
    """Ambiguity modeling: mean NCC with the raters' variance per measure, and GED per model, i.i.d. and OoD."""

    name = "ambiguity"
    label = "Ambiguity Modeling"
    metrics = (
        Metric("ncc", "higher", "NCC", per_aggregation=False, primary=True),
        Metric("ged", "lower", "GED", per_measure=False, per_aggregation=False),
    )
    uncertainty_types = ("PU", "AU")
    requires = ("test",)

    def score(self, result: EvaluationResult) -> list[dict]:
        out = []
        for subset in SUBSETS:
            for measure, value in mean_ncc(result, subset).items():
                out.append(row(self.name, "ncc", subset, value, measure))
            cases = result.test_cases(subset)
            if "ged" in cases:
                value = finite_mean(cases["ged"].to_numpy(dtype=float))
                if value is not None:
                    out.append(row(self.name, "ged", subset, value))
        return out


@hookimpl
def values_seg_tasks():
    return [AmbiguityTask]
