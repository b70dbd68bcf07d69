"""Volume uncertainty: does the spread of the samples' volumes predict the volume error?

From :mod:`values_seg_plugins.quantities.volumes`, per prediction model: ``volume_spread_error``
(Spearman's ρ), ``volume_crps``, ``volume_error`` (docs/design-rationale.md, "Volume task").
"""

from __future__ import annotations

from functools import partial

import numpy as np

from values_seg import hookimpl
from values_seg.statistics import batched
from values_seg.components.task import CaseStatistic, CaseStatisticTask, EvaluationResult, Metric

from ._common import SUBSETS, case_ids, floats


def spearman(indices: np.ndarray, spread: np.ndarray, error: np.ndarray) -> np.ndarray:
    """``[B]``: Spearman's rho of ``spread`` and ``error`` on the cases of each row where both are finite
    (NaN with fewer than 3 such cases or where one is constant). Rows whose cases are all finite are
    ranked at once (``rankdata`` along the rows), the others one by one."""
    from scipy.stats import rankdata  # here, not at import: a no-op rerun imports no scipy.stats

    indices = np.asarray(indices)
    out = np.full(len(indices), np.nan)
    finite = np.isfinite(spread) & np.isfinite(error)
    whole = finite[indices].all(axis=1) if indices.size else np.zeros(len(indices), bool)
    if whole.any() and indices.shape[1] >= 3:
        out[whole] = _rho(rankdata(spread[indices[whole]], axis=1), rankdata(error[indices[whole]], axis=1))
    for b in np.flatnonzero(~whole):
        row = indices[b][finite[indices[b]]]
        if row.size >= 3:
            out[b] = _rho(rankdata(spread[row])[None], rankdata(error[row])[None])[0]
    return out


def _rho(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson's r of each row of the ranks ``x``, ``y`` ``[B, n]``; NaN where one row is constant."""
    x, y = x - x.mean(axis=1, keepdims=True), y - y.mean(axis=1, keepdims=True)
    denominator = np.sqrt((x * x).sum(axis=1) * (y * y).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (x * y).sum(axis=1) / denominator, np.nan)


class VolumeTask(CaseStatisticTask):
    """Whether the samples' volume spread ranks the volume error (Spearman), with the volume CRPS and error."""

    name = "volume_uncertainty"
    label = "Volume"
    metrics = (
        Metric("volume_spread_error", "higher", "Volume spread-error ρ", per_measure=False, primary=True,
               note="Spearman's ρ between the samples' volume CV and the relative volume error; 0 = no ranking."),
        Metric("volume_crps", "lower", "Volume CRPS", per_measure=False),
        Metric("volume_error", "lower", "Rel. volume error", per_measure=False),
    )
    uncertainty_types = ("PU", "AU", "EU")
    consumes = ("volume", "rater_volume", "volume_cv", "volume_crps")

    def statistics(self, result: EvaluationResult):
        for subset in SUBSETS:
            cases = result.test_cases(subset)
            if cases.empty or "volume" not in cases:
                continue
            ids, reference = case_ids(cases), floats(cases, "rater_volume")
            error = np.abs(floats(cases, "volume") - reference) / np.where(reference > 0, reference, np.nan)
            yield CaseStatistic("volume_error", subset, ids, partial(batched.mean, values=error, ignore_nan=True))
            yield CaseStatistic("volume_crps", subset, ids,
                                partial(batched.mean, values=floats(cases, "volume_crps"), ignore_nan=True))
            yield CaseStatistic("volume_spread_error", subset, ids,
                                partial(spearman, spread=floats(cases, "volume_cv"), error=error))


@hookimpl
def values_seg_tasks():
    return [VolumeTask]
