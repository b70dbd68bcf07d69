"""Fused per-case evaluation: one pass over a case computes everything the tasks need.

For one case (probability samples ``[S, C, *spatial]`` and rater masks ``[R, *spatial]``) and a
set of C2 measures and fitted C3 aggregations, :func:`evaluate_case` validates the samples once,
computes each measure's map once, returns every (measure, aggregation) score and computes the
per-case quantities the tasks consume (:mod:`values_seg.components.quantity`; the built-ins are plugins in
``plugins/quantities/``) from inputs derived once and shared. The numerical helpers of the
built-in quantities live here: calibration bins of Platt-scaled confidences (eq. 11), the
validation histograms that fit Platt scaling, and the voxel-level retention of Shifts 2.0
(:func:`case_ndsc`, :func:`case_ndsc_rauc`). Nothing is kept between cases, so memory does not
grow with the number of cases.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from values_seg.numerics import kernels
from values_seg import metrics
from values_seg.components.aggregation import SAMPLES, aggregate, reads_scores
from values_seg.components.case_context import CaseContext
from values_seg.components.measure import SampleStatistics
from values_seg.components.quantity import CaseInputs, CaseView, Quantity
from values_seg.numerics.stored_samples import StoredSamples
from values_seg.components.unchanged import Unchanged, message, modified, private
from values_seg.numerics.labels import class_argmax  # noqa: F401 - re-exported: the evaluation's label maps
from values_seg.numerics.validation import check_probabilities

FLOAT16_CODES = 1 << 16


class ComponentError(ValueError):
    """A measure or aggregation failed on a case (it raised, or returned a non-finite value).

    ``kind`` is "measure" or "aggregation"; ``measure`` the measure's name and ``aggregation``
    the aggregation's (``None`` for a measure), so a caller can drop exactly that component;
    ``cause``: the failure in one line, ``component (kind) on case X: ExceptionType: message``."""

    def __init__(self, kind: str, measure: str, aggregation: str | None, case_id: str, problem: str):
        self.kind, self.measure, self.aggregation, self.case_id = kind, measure, aggregation, case_id
        what = f"measure {measure!r}" if kind == "measure" else f"aggregation {aggregation!r} (of measure {measure!r})"
        component = f"{measure} (measure)" if kind == "measure" else f"{aggregation} (aggregation, of measure {measure})"
        self.cause = f"{component} on case {case_id}: {problem.removeprefix('raised ')}"
        super().__init__(f"case {case_id!r}: {what} {problem}")


@dataclass
class UncertaintyHistogram:
    """Pixel counts per float16 value of an uncertainty map, split by correctness.

    A bounded-memory, mergeable summary of (uncertainty, correct) pairs over many cases, from
    which Platt scaling is fitted with one weighted point per distinct value (appendix A.5).
    """

    correct: np.ndarray = field(default_factory=lambda: np.zeros(FLOAT16_CODES, np.int64))
    total: np.ndarray = field(default_factory=lambda: np.zeros(FLOAT16_CODES, np.int64))

    def add(self, umap: torch.Tensor, correct: torch.Tensor, n_raters: int = 1,
            n_valid: torch.Tensor | None = None) -> None:
        """Add pixels; ``correct`` counts per pixel how many of ``n_raters`` raters agree (with
        ``n_valid``: of the ``n_valid`` raters per pixel that do not mark it ignored)."""
        codes = umap.detach().to(torch.float16).view(torch.int16).reshape(-1).numpy().view(np.uint16)
        if n_valid is None:
            self.total += np.bincount(codes, minlength=FLOAT16_CODES) * n_raters
        else:
            raters = n_valid.reshape(-1).to(torch.float64).numpy()
            self.total += np.rint(np.bincount(codes, weights=raters, minlength=FLOAT16_CODES)).astype(np.int64)
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
    """What the fused pass computed for one case: the (measure, aggregation) scores and, per
    quantity name, its value (a float, or per measure a dict) or, on validation, its fit summary."""

    case_id: str
    meta: dict
    scores: dict[tuple[str, str], float] = field(default_factory=dict)  # (measure, aggregation) -> score
    values: dict[str, Any] = field(default_factory=dict)  # quantity -> float | {measure: value}
    summaries: dict[str, Any] = field(default_factory=dict)  # quantity -> its validation summary
    maps: dict[str, torch.Tensor] = field(default_factory=dict)
    prediction: torch.Tensor | None = None


def compute_map(measure: Callable, stats: SampleStatistics) -> torch.Tensor:
    """A measure's map, from the shared statistics when the measure supports it."""
    from_statistics = getattr(measure, "from_statistics", None)
    return from_statistics(stats) if from_statistics else measure(stats.samples)


def platt_confidence(maps: torch.Tensor, params: Sequence[tuple[float, float]]) -> torch.Tensor:
    """:func:`values_seg.metrics.platt_apply` for a stack of maps ``[M, ...]``, one (a, b) per map:
    ``1 / (1 + exp(a * (-u) + b))``, batched in torch."""
    a, b = (torch.tensor(v, dtype=maps.dtype).reshape(-1, *([1] * (maps.ndim - 1))) for v in zip(*params))
    return torch.mul(a, maps).sub_(b).sigmoid_()  # one buffer, changed in place


def calibration_from_counts(confidence: torch.Tensor, n_correct: torch.Tensor, n_raters: int, n_bins: int,
                            n_valid: torch.Tensor | None = None):
    """Calibration bins over all (pixel, rater) pairs for a stack of confidence maps ``[M, ...]``.

    ``n_correct`` counts per pixel how many raters agree with the prediction; every rater sees
    the same confidence, so one binning serves all raters: one compiled pass over the maps
    (:func:`values_seg.numerics.kernels.calibration_counts`) counts the pixels per (bin, number of agreeing
    raters) and sums the confidences per bin, from which every bin statistic follows. ``n_valid``:
    per pixel, the raters that do not mark it ignored (each pixel then counts once per such rater;
    :func:`_bins_with_ignored`).
    """
    M = confidence.shape[0]
    conf = confidence.reshape(M, -1)
    if n_valid is not None:
        return [_bins_with_ignored(conf[m], n_correct.reshape(-1), n_valid.reshape(-1), n_bins) for m in range(M)]
    if conf.dtype not in (torch.float32, torch.float64):
        conf = conf.float()
    values = np.ascontiguousarray(conf.detach().cpu().numpy())
    agreeing = np.ascontiguousarray(n_correct.reshape(-1).cpu().numpy())
    counts, sums = kernels.calibration_counts(values, agreeing, n_bins, values.dtype.type(n_bins), n_raters + 1)
    return [bins_from_agreement(counts[m], sums[m], n_raters) for m in range(M)]


def bins_from_agreement(counts: np.ndarray, confidence_sums: np.ndarray, n_raters: int):
    """The calibration bins over all (pixel, rater) pairs of one map, from its pixel counts per (bin,
    number of agreeing raters) ``[n_bins, n_raters + 1]`` and its confidence sum per bin: every rater
    sees the pixel's confidence, and ``k`` of them count it correct."""
    return metrics.CalibrationBins(counts.sum(axis=1).astype(np.float64) * n_raters, confidence_sums * n_raters,
                                   counts.astype(np.float64) @ np.arange(n_raters + 1, dtype=np.float64))


def _bins_with_ignored(conf: torch.Tensor, n_correct: torch.Tensor, n_valid: torch.Tensor, n_bins: int):
    """Calibration bins of one flat confidence map where raters ignore some pixels: a pixel counts
    once per rater that labels it (``n_valid``), ``n_correct`` of them agreeing."""
    index = (conf * n_bins).to(torch.int64).clamp_(max=n_bins - 1)  # c >= 0: the conversion truncates
    raters = n_valid.to(torch.float64)
    count = torch.bincount(index, weights=raters, minlength=n_bins)
    conf_sum = torch.bincount(index, weights=conf.to(torch.float64) * raters, minlength=n_bins)
    correct = torch.bincount(index, weights=n_correct.to(torch.float64), minlength=n_bins)
    return metrics.CalibrationBins(count.numpy(), conf_sum.numpy(), correct.numpy())


def evaluate_case(
    samples,
    raters,
    measures: Mapping[str, Callable],
    aggregations: Mapping[tuple[str, str], Callable] | None = None,
    *,
    quantities: Mapping[str, Quantity] | None = None,
    fitted: Mapping[str, Any] | None = None,
    fit: bool = False,
    context: CaseContext = CaseContext(),
    keep_maps: bool = False,
) -> CaseEvaluation:
    """Evaluate one case in one pass (see the module docstring).

    ``aggregations`` maps (measure name, aggregation name) to a fitted aggregation, so that
    fitted state (e.g. a threshold) can differ per measure. ``quantities`` (name -> instance) are
    computed from one shared :class:`~values_seg.components.quantity.CaseInputs`, each through a view of
    what it declares it needs; ``fitted`` holds the fitted state of those with a validation part
    (per measure for a per-measure one). With ``fit`` (validation) those get their
    ``fit_case`` summary instead (the others passed are computed as on test). ``keep_maps`` returns the maps and
    prediction (to fit aggregations, or to plot). ``context``: the case, its data set, the typed
    evaluation settings and the device (:class:`~values_seg.components.case_context.CaseContext`); on
    ``context.device`` (e.g. CUDA) the samples go there once, the maps and the mean prediction come
    back in one transfer, and the aggregations and quantities then run on the CPU. ``samples`` may
    also be the prediction cache's :class:`~values_seg.numerics.stored_samples.StoredSamples` (known valid:
    not checked again; their statistics computed from the stored values, the float32 samples made
    only for a component that asks for them).
    """
    case_id = context.case_id
    where = f"case {case_id!r}"
    if not isinstance(samples, StoredSamples):
        checked = check_probabilities(samples, where=where)
        samples = private(checked, samples)  # components never get the caller's
    raters = torch.as_tensor(raters)
    if raters.ndim != samples.ndim - 1 or tuple(raters.shape[1:]) != tuple(samples.shape[2:]):
        raise ValueError(f"{where}: raters {tuple(raters.shape)} do not match samples {tuple(samples.shape)} ([R, *spatial])")
    if raters.shape[0] == 0:
        raise ValueError(f"{where}: no rater masks")
    aggregations = aggregations or {}
    unknown = sorted({m for m, _ in aggregations} - set(measures) - {SAMPLES})
    if unknown:
        raise ValueError(f"{where}: aggregations given for unknown measure(s) {unknown}")

    names = list(measures)
    stats, maps = _statistics_and_maps(samples, measures, names, case_id, context.device)
    prediction = class_argmax(stats.mean, dim=0)
    shared = Unchanged(maps=maps, prediction=prediction, raters=raters)  # no component may change them
    result = CaseEvaluation(case_id=case_id, meta=dict(context.meta), prediction=prediction if keep_maps else None)
    # every aggregation scores the whole stack of maps at once (one instance per measure)
    for agg_name in dict.fromkeys(a for (m, a), agg in aggregations.items() if m != SAMPLES and not reads_scores(agg)):
        rows = [i for i, name in enumerate(names) if (name, agg_name) in aggregations]
        scores = score_stack([aggregations[(names[i], agg_name)] for i in rows], _rows(maps, rows),
                             prediction, [names[i] for i in rows], agg_name, case_id)
        for i, score in zip(rows, scores):
            result.scores[(names[i], agg_name)] = score
    for (measure, agg_name), agg in aggregations.items():  # sample-based: the samples, no map
        if measure == SAMPLES:
            result.scores[(SAMPLES, agg_name)] = _score(lambda: agg(stats.samples), SAMPLES, agg_name, case_id,
                                                        stats.unchanged)
    for (measure, agg_name), agg in aggregations.items():  # meta-aggregations: the scores above too
        if measure != SAMPLES and reads_scores(agg):
            others = {a: s for (m, a), s in result.scores.items() if m == measure}
            umap = maps[names.index(measure)]
            result.scores[(measure, agg_name)] = _score(lambda: agg(umap, prediction=prediction, scores=others),
                                                        measure, agg_name, case_id, shared)
    inputs = CaseInputs(context, raters, stats, prediction, maps, names)
    for name, quantity in (quantities or {}).items():
        if quantity.per_measure and not names:
            continue
        view = CaseView(inputs, quantity)
        if fit and quantity.fits():
            result.summaries[name] = _per_measure(quantity, quantity.fit_case(view), names, raw=True)
        else:  # (with ``fit``, one without a validation part is computed: e.g. the Dice a learned aggregation fits on)
            result.values[name] = _per_measure(quantity, quantity.compute(view, (fitted or {}).get(name)), names)
        if changed := modified(stats.unchanged, shared, inputs.unchanged):
            raise RuntimeError(f"{where}: quantity {name!r} {message(changed)}")
    if keep_maps:
        result.maps = dict(zip(names, maps)) if maps is not None else {}
    return result


def _statistics_and_maps(samples: torch.Tensor | StoredSamples, measures: Mapping[str, Callable], names: list[str],
                         case_id: str, device) -> tuple[SampleStatistics, torch.Tensor | None]:
    """The case's shared statistics (on the samples' device) and its stack of maps, computed on
    ``device``: one transfer of the samples there and one of the maps and the mean back."""
    stats = SampleStatistics(samples)
    device = torch.device(device) if device is not None else samples.device
    if device == samples.device:
        maps = torch.stack([_checked_map(name, measures[name], stats, case_id) for name in names]) if names else None
        return stats, maps
    remote = SampleStatistics(stats.samples.to(device, non_blocking=True))
    local = [_checked_map(name, measures[name], remote, case_id) for name in names]
    both = torch.cat([torch.stack(local), remote.mean.to(local[0].dtype)]) if names else remote.mean
    both = both.to(samples.device)
    stats.__dict__["mean"] = both[len(names):].to(stats.dtype)  # the cached_property, filled in
    stats.unchanged.add("statistic 'mean'", stats.mean)
    return stats, (both[:len(names)] if names else None)


def _per_measure(quantity: Quantity, value, names: list[str], raw: bool = False):
    """A quantity's output checked against its declaration: a float, or per measure a dict
    (``raw``: the values as returned, e.g. fit summaries or payloads)."""
    raw = raw or quantity.payload
    if not quantity.per_measure:
        return value if raw else float(value)
    values = list(value)
    if len(values) != len(names):
        raise TypeError(f"quantity {quantity.name!r} returned {len(values)} value(s) for {len(names)} measure(s)")
    return dict(zip(names, values if raw else (float(v) for v in values)))


def case_ndsc(prediction: np.ndarray, raters: np.ndarray, r: float, ignore_index: int | None = None,
              background: int | None = 0) -> float:
    """The nDSC of one case (Shifts 2.0, appendix C.2.1): of the predicted foreground (every class
    but ``background``) against each rater's, averaged over the raters; pixels a rater marks
    ``ignore_index`` are left out for that rater. Without a background class: the class-mean nDSC
    (:func:`values_seg.metrics.class_ndsc`; a rater that labels nothing: 1)."""
    if background is None:
        p, out = prediction.reshape(-1), []
        for rater, keep in _rater_pixels(raters, ignore_index):
            keep, g = keep.reshape(-1), rater.reshape(-1)
            out.append(metrics.class_ndsc(p[keep], g[keep], r) if keep.any() else 1.0)
        return float(np.mean(out))
    foreground = prediction != background
    if ignore_index is None or not (raters == ignore_index).any():
        return float(np.mean([metrics.ndsc(foreground, rater != background, r) for rater in raters]))
    return float(np.mean([metrics.ndsc(foreground[keep], rater[keep] != background, r)
                          for rater, keep in _rater_pixels(raters, ignore_index)]))


def case_ndsc_rauc(prediction: np.ndarray, raters: np.ndarray, maps: np.ndarray, r: float,
                   ignore_index: int | None = None, background: int | None = 0) -> list[float]:
    """For each map ``maps[i]``, the R-AUC of its voxel-level nDSC retention curve
    (:func:`values_seg.metrics.ndsc_rauc`, Table 11 of Shifts 2.0), averaged over the raters, with
    each rater's ignored pixels left out; the class-mean version without a background class
    (:func:`values_seg.metrics.class_ndsc_rauc_many`; a rater that labels nothing: 0)."""
    if background is None:
        p, flat_maps = prediction.reshape(-1), maps.reshape(maps.shape[0], -1)
        rauc = np.zeros(maps.shape[0])
        for rater, keep in _rater_pixels(raters, ignore_index):
            keep, g = keep.reshape(-1), rater.reshape(-1)
            if keep.any():
                rauc += metrics.class_ndsc_rauc_many(p[keep], g[keep], flat_maps[:, keep], r)
        return (rauc / len(raters)).tolist()
    foreground = prediction != background
    if ignore_index is None or not (raters == ignore_index).any():  # one sort per map serves every rater
        return metrics.ndsc_rauc_many(foreground, raters != background, maps, r).mean(axis=1).tolist()
    rauc = np.zeros(maps.shape[0])
    for rater, keep in _rater_pixels(raters, ignore_index):
        p, g = foreground[keep], rater[keep] != background
        rauc += [metrics.ndsc_rauc(p, g, umap[keep], r) for umap in maps]
    return (rauc / len(raters)).tolist()


def _rater_pixels(raters: np.ndarray, ignore_index: int | None):
    """``(rater, pixels it labels)`` per rater."""
    for rater in raters:
        yield rater, (np.ones(rater.shape, dtype=bool) if ignore_index is None else rater != ignore_index)


def _rows(maps: torch.Tensor, rows: list[int]) -> torch.Tensor:
    """``maps[rows]``, without the copy when ``rows`` are all of them in order."""
    return maps if rows == list(range(len(maps))) else maps[rows]


def _checked_map(name: str, measure: Callable, stats: SampleStatistics, case_id: str) -> torch.Tensor:
    """A measure's map, or a :class:`ComponentError` saying what is wrong with it."""
    try:
        umap = compute_map(measure, stats)
    except Exception as e:  # noqa: BLE001 - any failure of a plugin is reported as that plugin's
        raise ComponentError("measure", name, None, case_id, f"raised {type(e).__name__}: {e}") from e
    if changed := stats.unchanged.modified():
        raise ComponentError("measure", name, None, case_id, message(changed))
    spatial = stats.shape[2:]
    if not isinstance(umap, torch.Tensor):
        raise ComponentError("measure", name, None, case_id, f"must return a torch.Tensor, got {type(umap).__name__}")
    if tuple(umap.shape) != spatial:
        raise ComponentError("measure", name, None, case_id,
                             f"must return a map of the samples' spatial shape {spatial}, got {tuple(umap.shape)}")
    if not bool(torch.isfinite(umap.sum())):
        bad = int((~torch.isfinite(umap)).sum())
        if bad:
            raise ComponentError("measure", name, None, case_id, f"returned {bad} NaN or infinite value(s)")
    return umap.to(stats.dtype)


def score_stack(instances: list, maps: torch.Tensor, prediction, measures: list[str], aggregation: str,
                case_id: str) -> list[float]:
    """Scores of one aggregation over a stack of maps (one instance per measure), vectorised where
    the instances share a class; a failing or non-finite one is a :class:`ComponentError` naming it."""
    scores, shared = None, Unchanged(maps=maps, prediction=prediction)  # an aggregation may change neither
    if len({type(inst) for inst in instances}) == 1:
        try:
            scores = [float(s) for s in type(instances[0]).score_many(instances, maps, prediction=prediction)]
        except Exception:  # noqa: BLE001 - find out which instance fails, below
            scores = None
        if changed := shared.modified():  # the maps are no longer the measures': the case is evaluated again
            raise ComponentError("aggregation", measures[0], aggregation, case_id, message(changed))
    if scores is None or not all(np.isfinite(scores)):
        scores = [_score(lambda: aggregate(inst, umap, prediction), measure, aggregation, case_id, shared)
                  for inst, umap, measure in zip(instances, maps, measures)]
    return scores


def _score(call: Callable[[], Any], measure: str, aggregation: str, case_id: str, shared: Unchanged) -> float:
    """An aggregation's score (``call()``), or a :class:`ComponentError` naming it: it raised,
    returned a non-finite value, or changed one of the ``shared`` inputs."""
    try:
        value = float(call())
    except Exception as e:  # noqa: BLE001
        raise ComponentError("aggregation", measure, aggregation, case_id, f"raised {type(e).__name__}: {e}") from e
    if changed := shared.modified():
        raise ComponentError("aggregation", measure, aggregation, case_id, message(changed))
    if not np.isfinite(value):
        raise ComponentError("aggregation", measure, aggregation, case_id, f"returned {value}")
    return value


def aggregations_for(measures: Sequence[str], factories: Mapping[str, Callable[[], Callable]]) -> dict:
    """One fresh aggregation per (measure, aggregation name), so fitted state is per measure."""
    return {(m, a): make() for m in measures for a, make in factories.items()}
