"""Per-case negative log-likelihood (NLL) of the raters' labels under the mean prediction: the
calibration task reports it beside the ACE, a proper scoring rule of the probabilities themselves
(the ACE scores the Platt-scaled uncertainty maps)."""

from __future__ import annotations

import math

import torch

from values_seg import hookimpl
from values_seg.components.quantity import Quantity

#: probabilities are floored here before the log: a stored float16 probability below 3e-8 reads as
#: 0 (its log -inf), so one such pixel would make the NLL infinite; -log(1e-8) = 18.4 per pair at most
FLOOR = 1e-8


def nll(mean: torch.Tensor, raters: torch.Tensor, ignore_index: int | None = None) -> float:
    """Mean over the (pixel, rater) pairs of ``-log max(mean[label], FLOOR)``, ``mean`` ``[C, *spatial]``
    the predicted probabilities, ``raters`` ``[R, *spatial]`` the labels; pairs labelled
    ``ignore_index`` are left out; NaN where none is left."""
    labels = raters.long()
    valid = torch.ones_like(labels, dtype=torch.bool) if ignore_index is None else labels != ignore_index
    count = int(valid.sum())
    if count == 0:
        return math.nan
    log_p = mean.double().clamp_min(FLOOR).log()
    picked = log_p.unsqueeze(0).expand(len(labels), *log_p.shape).gather(
        1, labels.clamp(0, log_p.shape[0] - 1).unsqueeze(1)).squeeze(1)
    return float(-(picked * valid).sum() / count)


class NegativeLogLikelihood(Quantity):
    """Mean over the (pixel, rater) pairs of -log p(rater's label) under the mean prediction; ignored labels left out."""

    name = "nll"
    needs = ("samples", "references")

    def compute(self, case, fitted=None):
        return nll(case.stats.mean, case.raters, case.ignore_index)


@hookimpl
def values_seg_quantities():
    return [NegativeLogLikelihood]
