"""Fused per-case evaluation: one pass over a case computes everything the tasks need.

For one case (probability samples ``[S, C, *spatial]`` and rater masks ``[R, *spatial]``) and a
set of C2 measures and fitted C3 aggregations, :func:`evaluate_case` validates the samples once,
computes each measure's map once, and returns every (measure, aggregation) score together with
the per-case task inputs: Dice per rater (eq. 2-3), NCC against the raters' variance (eq. 12-13),
GED (eq. 14), calibration bin statistics (eq. 11, with Platt-scaled confidences) and, on the
validation split, the statistics to fit Platt scaling and thresholds. Nothing is kept between
cases, so memory does not grow with the number of cases.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
import torch

from values_seg import metrics
from values_seg.measure import SampleStatistics
from values_seg.validation import check_probabilities

FLOAT16_CODES = 1 << 16


@dataclass
class UncertaintyHistogram:
    """Pixel counts per float16 value of an uncertainty map, split by correctness.

    A bounded-memory, mergeable summary of (uncertainty, correct) pairs over many cases, from
    which Platt scaling is fitted with one weighted point per distinct value (appendix A.5).
    """

    correct: np.ndarray = field(default_factory=lambda: np.zeros(FLOAT16_CODES, np.int64))
    total: np.ndarray = field(default_factory=lambda: np.zeros(FLOAT16_CODES, np.int64))

    def add(self, umap: torch.Tensor, correct: torch.Tensor, n_raters: int = 1) -> None:
        """Add pixels; ``correct`` counts per pixel how many of ``n_raters`` raters agree."""
        codes = umap.detach().to(torch.float16).view(torch.int16).reshape(-1).numpy().view(np.uint16)
        self.total += np.bincount(codes, minlength=FLOAT16_CODES) * n_raters
        weights = correct.reshape(-1).to(torch.float64).numpy()
        self.correct += np.rint(np.bincount(codes, weights=weights, minlength=FLOAT16_CODES)).astype(np.int64)

    def __add__(self, other: "UncertaintyHistogram") -> "UncertaintyHistogram":
        return UncertaintyHistogram(self.correct + other.correct, self.total + other.total)

    def platt_fit(self) -> tuple[float, float]:
        """Platt parameters fitted on all accumulated pixels (:func:`values_seg.metrics.platt_fit`)."""
        used = np.flatnonzero(self.total)
        if used.size == 0:
            raise ValueError("Platt scaling: no validation pixels were accumulated")
        values = used.astype(np.uint16).view(np.float16).astype(np.float64)
        right, wrong = self.correct[used], self.total[used] - self.correct[used]
        u = np.concatenate([values, values])
        y = np.concatenate([np.ones_like(values), np.zeros_like(values)])
        w = np.concatenate([right, wrong]).astype(np.float64)
        keep = w > 0
        return metrics.platt_fit(u[keep], y[keep], sample_weight=w[keep])


@dataclass
class CaseEvaluation:
    """Everything the downstream tasks need from one case."""

    case_id: str
    meta: dict
    dice: float  # eq. 3: mean over raters of Dice(mean prediction, rater)
    dice_per_rater: list[float]
    predicted_fraction: float  # share of pixels predicted as foreground
    scores: dict[tuple[str, str], float]  # (measure, aggregation) -> aggregated uncertainty
    ncc: dict[str, float]  # measure -> NCC(raters' variance, map); NaN when either is constant
    ged: float  # eq. 14 between the argmax of each sample and the raters
    calibration: dict[str, metrics.CalibrationBins] = field(default_factory=dict)
    histograms: dict[str, UncertaintyHistogram] = field(default_factory=dict)
    maps: dict[str, torch.Tensor] = field(default_factory=dict)
    prediction: torch.Tensor | None = None


def class_argmax(probabilities: torch.Tensor, dim: int) -> torch.Tensor:
    """``argmax`` over the class axis; moving it last first is ~10x faster on CPU."""
    return probabilities.movedim(dim, -1).contiguous().argmax(dim=-1)


def compute_map(measure: Callable, stats: SampleStatistics) -> torch.Tensor:
    """A measure's map, from the shared statistics when the measure supports it."""
    from_statistics = getattr(measure, "from_statistics", None)
    return from_statistics(stats) if from_statistics else measure(stats.samples)


def calibration_from_counts(confidence: torch.Tensor, n_correct: torch.Tensor, n_raters: int, n_bins: int):
    """Calibration bins over all (pixel, rater) pairs, given per pixel how many raters agree
    with the prediction: every rater sees the same confidence, so one binning serves all."""
    conf = confidence.double().reshape(-1)
    idx = (conf * n_bins).long().clamp_(0, n_bins - 1)
    count = torch.bincount(idx, minlength=n_bins).double() * n_raters
    conf_sum = torch.bincount(idx, weights=conf, minlength=n_bins) * n_raters
    correct_sum = torch.bincount(idx, weights=n_correct.reshape(-1).double(), minlength=n_bins)
    return metrics.CalibrationBins(count.numpy(), conf_sum.numpy(), correct_sum.numpy())


def evaluate_case(
    samples,
    raters,
    measures: Mapping[str, Callable],
    aggregations: Mapping[tuple[str, str], Callable] | None = None,
    *,
    case_id: str = "case",
    meta: dict | None = None,
    num_classes: int | None = None,
    ignore_index: int | None = None,
    platt: Mapping[str, tuple[float, float]] | None = None,
    n_bins: int = 20,
    collect_histograms: bool = False,
    keep_maps: bool = False,
) -> CaseEvaluation:
    """Evaluate one case in one pass (see the module docstring).

    ``aggregations`` maps (measure name, aggregation name) to a fitted aggregation, so that
    fitted state (e.g. a threshold) can differ per measure. ``platt`` maps a measure name to
    its Platt parameters from the validation split; those measures get calibration bins.
    ``collect_histograms`` (validation split) accumulates the data to fit Platt scaling;
    ``keep_maps`` returns the maps and prediction (to fit thresholds, or to plot).
    """
    where = f"case {case_id!r}"
    samples = check_probabilities(samples, where=where)
    raters = torch.as_tensor(raters)
    if raters.ndim != samples.ndim - 1 or tuple(raters.shape[1:]) != tuple(samples.shape[2:]):
        raise ValueError(f"{where}: raters {tuple(raters.shape)} do not match samples {tuple(samples.shape)} ([R, *spatial])")
    if raters.shape[0] == 0:
        raise ValueError(f"{where}: no rater masks")
    num_classes = num_classes or samples.shape[1]
    aggregations = aggregations or {}
    unknown = sorted({m for m, _ in aggregations} - set(measures))
    if unknown:
        raise ValueError(f"{where}: aggregations given for unknown measure(s) {unknown}")

    stats = SampleStatistics(samples)
    prediction = class_argmax(stats.mean, dim=0)
    pred_np, raters_np = prediction.numpy(), raters.numpy()
    dice_per_rater = [metrics.dice(pred_np, r, num_classes=num_classes, ignore_index=ignore_index) for r in raters_np]
    sample_masks = class_argmax(samples, dim=1).numpy()
    ged = metrics.ged(sample_masks, raters_np, num_classes=num_classes, ignore_index=ignore_index)
    variance = metrics.rater_variance(raters_np, num_classes=num_classes)
    n_correct = (raters == prediction).sum(dim=0)  # per pixel: raters agreeing with the prediction

    result = CaseEvaluation(
        case_id=case_id,
        meta=dict(meta or {}),
        dice=float(np.mean(dice_per_rater)),
        dice_per_rater=[float(d) for d in dice_per_rater],
        predicted_fraction=float((prediction > 0).double().mean()),
        scores={},
        ncc={},
        ged=float(ged),
        prediction=prediction if keep_maps else None,
    )
    for name, measure in measures.items():
        umap = compute_map(measure, stats)
        if tuple(umap.shape) != tuple(samples.shape[2:]) or not bool(torch.isfinite(umap.sum())):
            raise ValueError(
                f"{where}: measure {name!r} must return a finite map of shape {tuple(samples.shape[2:])}, "
                f"got shape {tuple(umap.shape)}"
            )
        for (m, agg_name), agg in aggregations.items():
            if m == name:
                result.scores[(name, agg_name)] = float(agg(umap, prediction=prediction))
        result.ncc[name] = metrics.ncc(variance, umap.numpy())
        if platt and name in platt:
            confidence = torch.from_numpy(np.asarray(metrics.platt_apply(umap.numpy(), *platt[name])))
            result.calibration[name] = calibration_from_counts(confidence, n_correct, len(raters), n_bins)
        if collect_histograms:
            result.histograms[name] = UncertaintyHistogram()
            result.histograms[name].add(umap, n_correct, n_raters=len(raters))
        if keep_maps:
            result.maps[name] = umap
    return result


def aggregations_for(measures: Sequence[str], factories: Mapping[str, Callable[[], Callable]]) -> dict:
    """One fresh aggregation per (measure, aggregation name), so fitted state is per measure."""
    return {(m, a): make() for m in measures for a, make in factories.items()}
