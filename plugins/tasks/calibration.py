"""Calibration (paper appendix A.5): pixel-level ACE of Platt-scaled confidences, the paper's (eq. 11)
and with sparse bins merged, the ACE a perfectly calibrated model would get (after Pernot 2024), and
the NLL of the probabilities. Its rows: docs/design-rationale.md, "Calibration task"."""

from __future__ import annotations

import numpy as np
import pandas as pd

from values_seg import hookimpl, metrics
from values_seg.statistics import batched
from values_seg.components.task import EvaluationResult, Metric, Reading, Task, row, samples_row

from values_seg_plugins.quantities.calibration import CalibrationOutput

from ._common import SUBSETS


MERGED_NOTE = (f"20 equal-width bins, those holding under {metrics.MIN_BIN_MASS:.1%} of the pixel–rater pairs merged "
               "with their neighbours, every merged bin weighted equally: not the paper's eq. 11 (appendix A.5), "
               "which weighs a bin of a few pixels as much as one of millions; the paper's is ACE (paper eq. 11). "
               "The ✓ reference is computed on these merged bins.")
NLL_NOTE = ("Mean over the test cases of each case's mean -log p(rater's label) under the mean prediction, every "
            "(pixel, rater) pair, ignored labels left out, p floored at 1e-8: of the probabilities themselves, "
            "not of the Platt-scaled maps.")
EQ11_NOTE = ("The paper's eq. 11 (appendix A.5): 20 equal-width bins, every non-empty bin weighted equally, no "
             "merging (as netcal and MONAI compute it); compare it with the paper's values.")


class CalibrationTask(Task):
    """Calibration: ACE per measure, i.i.d. and OoD, with sparse bins merged (beside a calibrated model's) and as eq. 11."""

    name = "calibration"
    label = "Calibration"
    metrics = (
        Metric("ace_eq11", "lower", "ACE (paper eq. 11)", per_aggregation=False, note=EQ11_NOTE,
               reading=Reading(evidence="ace", variant_of="ace")),
        Metric("ace", "lower", "ACE (merged bins)", per_aggregation=False, primary=True, note=MERGED_NOTE,
               reading=Reading(evidence="ace")),
        Metric("ace_reference", "lower", "ACE (merged bins), calibrated", per_aggregation=False,
               reading=Reading(reference_of="ace")),
        Metric("nll", "lower", "NLL", per_measure=False, note=NLL_NOTE),
    )
    uncertainty_types = ("PU", "AU", "EU")
    consumes = ("calibration_bins", "nll")

    def __init__(self, reference_samples: int = 1000, level: float = 0.95):
        if int(reference_samples) != reference_samples or reference_samples < 2:
            raise ValueError(f"calibration: reference_samples must be an integer >= 2, got {reference_samples!r}")
        if not 0 < level < 1:
            raise ValueError(f"calibration: level must lie in (0, 1), got {level!r}")
        self.reference_samples = int(reference_samples)
        self.level = float(level)

    def _case_bins(self, result: EvaluationResult, measure: str, subset: str) -> tuple[list[str], list]:
        """The subset's test cases and their bins (all cases of the subset, or none)."""
        per_case = result.output("calibration_bins", CalibrationOutput()).case_bins.get(measure, {})
        ids = sorted(result.test_cases(subset)["case_id"].astype(str))
        if not ids or any(c not in per_case for c in ids):
            return [], []
        return ids, [per_case[c] for c in ids]

    def score(self, result: EvaluationResult) -> list[dict]:
        out = []
        calibration = result.output("calibration_bins", CalibrationOutput()).bins
        for measure in sorted({m for m, _ in calibration}):
            for subset in SUBSETS:
                bins = calibration.get((measure, subset))
                if bins is None or not (bins.count > 0).any():
                    continue
                out.append(row(self.name, "ace", subset, metrics.ace_from_bins(bins), measure))
                out.append(row(self.name, "ace_eq11", subset, metrics.ace_from_bins(bins, min_bin_mass=0.0), measure))
                _, case_bins = self._case_bins(result, measure, subset)
                fine = sum(case_bins) if case_bins else bins
                ref = metrics.ace_reference(fine, n_bins=bins.n_bins, n_samples=self.reference_samples,
                                            level=self.level, seed=0)
                out.append(row(self.name, "ace_reference", subset, ref.mean, measure, ci_low=ref.ci_low,
                               ci_high=ref.ci_high))
        for subset, ids, values in _nll(result):
            out.append(row(self.name, "nll", subset, batched.mean(np.arange(len(ids))[None], values, ignore_nan=True)[0]))
        return out

    def bootstrap(self, result: EvaluationResult, resamples) -> list[dict]:
        out = []
        calibration = result.output("calibration_bins", CalibrationOutput()).bins
        for measure in sorted({m for m, _ in calibration}):
            for subset in SUBSETS:
                bins = calibration.get((measure, subset))
                ids, case_bins = self._case_bins(result, measure, subset)
                if bins is None or not case_bins:
                    continue
                coarse = [metrics.coarsen_bins(b, bins.n_bins) for b in case_bins]
                indices = resamples.of(ids)
                out.append(samples_row(self.name, "ace", subset, batched.ace(indices, coarse), measure))
                out.append(samples_row(self.name, "ace_eq11", subset, batched.ace(indices, coarse, min_bin_mass=0.0),
                                       measure))
        for subset, ids, values in _nll(result):
            out.append(samples_row(self.name, "nll", subset, batched.mean(resamples.of(ids), values, ignore_nan=True)))
        return out

    def curves(self, result: EvaluationResult) -> pd.DataFrame:
        """The reliability bins (``curve`` "reliability") of every measure and subset the ACE is computed from,
        with that ACE as ``area``. Columns: :data:`CURVE_COLUMNS`."""
        rows = []
        for (measure, subset), bins in sorted(result.output("calibration_bins", CalibrationOutput()).bins.items()):
            if not (bins.count > 0).any():
                continue
            ace = metrics.ace_from_bins(bins)
            rows += [("reliability", measure, subset, b, float(bins.count[b]), float(bins.confidence_sum[b]),
                      float(bins.correct_sum[b]), ace) for b in range(bins.n_bins)]
        return pd.DataFrame(rows, columns=CURVE_COLUMNS)


def _nll(result: EvaluationResult):
    """(subset, case ids, per-case NLL) of each subset whose cases have a finite NLL."""
    for subset in SUBSETS:
        cases = result.test_cases(subset)
        if "nll" in cases and np.isfinite(values := cases["nll"].to_numpy(float)).any():
            yield subset, cases["case_id"].astype(str).tolist(), values


CURVE_COLUMNS = ["curve", "measure", "split", "bin", "count", "confidence_sum", "correct_sum", "area"]


@hookimpl
def values_seg_tasks():
    return [CalibrationTask]
