"""Per-case calibration bins (appendix A.5, eq. 11) of Platt-scaled confidences, Platt scaling fitted
on the validation split.

Validation: per measure, a histogram of (uncertainty, agreeing raters) pixels per case
(:class:`~values_seg.evaluation.per_case.UncertaintyHistogram`), merged over the cases; Platt scaling is
fitted on it (a measure whose fit fails is dropped from the combination). Test: per case and
measure, calibration bins over all (pixel, rater) pairs at :data:`FINE_BINS` times the ACE's
``evaluation.n_bins`` (the bootstrap and the ACE reference use them), summed per measure and
subset (i.i.d./OoD) at the ACE's bins in pass order (the ACE merges sparse bins to its minimum
mass only after summing, :func:`values_seg.metrics.ace_bin_groups`, so sums stay exact). The stored output
(:class:`CalibrationOutput`) also fills the run directory's ``calibration.csv``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from values_seg import hookimpl, metrics
from values_seg.evaluation.per_case import UncertaintyHistogram, calibration_from_counts, platt_confidence
from values_seg.components.quantity import Quantity
from values_seg.components.settings import EvaluationSettings
from values_seg.runner import case_calibration

#: per-case calibration bins are kept at this multiple of the ACE's bins (``coarsen_bins`` merges
#: them back): the ACE reference simulates each fine bin, whose variance the histogram overstates
#: by at most its width (values_seg.metrics.calibration_reference): 1 % at 100 bins (5 % at 20),
#: at half the simulation cost of 200 bins
FINE_BINS = 5
SUBSETS = ("iid", "ood")


@dataclass
class CalibrationOutput:
    """``bins``: (measure, "iid"|"ood") -> the summed bins at the ACE's resolution;
    ``case_bins``: measure -> test case id -> that case's bins at :data:`FINE_BINS` times it."""

    bins: dict = field(default_factory=dict)
    case_bins: dict = field(default_factory=dict)


class Calibration(Quantity):
    """Per measure, the calibration bins of the Platt-scaled confidence (fitted on validation) over all (pixel, rater) pairs."""

    name = "calibration_bins"
    needs = ("maps", "prediction", "references")
    per_measure = True
    payload = True
    table = "calibration.csv"

    def fit_case(self, case):
        n_correct, n_valid = case.agreement()
        out = []
        for umap in case.maps:
            histogram = UncertaintyHistogram()
            histogram.add(umap, n_correct, n_raters=len(case.raters), n_valid=n_valid)
            out.append(histogram)
        return out

    def fit(self, summary):
        return summary.platt_fit()

    def compute(self, case, fitted=None):
        n_correct, n_valid = case.agreement()
        confidence = platt_confidence(case.maps, [fitted[m] for m in case.measures])
        n_bins = case.settings.n_bins * FINE_BINS
        return calibration_from_counts(confidence, n_correct, len(case.raters), n_bins, n_valid=n_valid)

    def save(self, entries, measures, settings: EvaluationSettings):
        n_bins = settings.n_bins
        summed = {(m, s): metrics.CalibrationBins.empty(n_bins) for m in measures for s in SUBSETS}
        per_case = {}
        for case_id, meta, bins in entries:  # in pass order: the sums are those of the same additions
            subset = "ood" if meta.get("ood") else "iid"
            for m, b in bins.items():
                if m in measures:
                    per_case[(case_id, m)] = b
                    summed[(m, subset)] = summed[(m, subset)] + metrics.coarsen_bins(b, n_bins)
        summary = [{"measure": m, "subset": s, "count": b.count.tolist(), "confidence_sum": b.confidence_sum.tolist(),
                    "correct_sum": b.correct_sum.tolist()} for (m, s), b in summed.items() if b.count.sum()]
        files = {"bins.json": json.dumps(summary).encode()}
        if per_case:
            files["cases.npz"] = case_calibration.to_bytes(per_case)
        return files

    def load(self, files):
        bins = {(e["measure"], e["subset"]): metrics.CalibrationBins(
                    np.asarray(e["count"]), np.asarray(e["confidence_sum"]), np.asarray(e["correct_sum"]))
                for e in json.loads(files["bins.json"])}
        return CalibrationOutput(bins, case_calibration.from_bytes(files.get("cases.npz")))

    def table_rows(self, output):
        return [{"measure": measure, "subset": subset, "bin": b, "count": float(bins.count[b]),
                 "confidence_sum": float(bins.confidence_sum[b]), "correct_sum": float(bins.correct_sum[b])}
                for (measure, subset), bins in sorted(output.bins.items()) for b in range(bins.n_bins)]


@hookimpl
def values_seg_quantities():
    return [Calibration]
