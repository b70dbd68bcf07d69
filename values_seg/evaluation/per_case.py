"""Fused per-case evaluation: one pass over a case computes everything the tasks need.

:func:`evaluate_case` validates the samples once, computes each measure's map, every (measure,
aggregation) score and the per-case quantities from inputs derived once and shared, and keeps nothing
between cases (docs/design-rationale.md, "One case's evaluation").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from values_seg.components.aggregation import SAMPLES, aggregate, reads_scores
from values_seg.components.case_context import CaseContext
from values_seg.components.measure import SampleStatistics
from values_seg.components.quantity import CaseInputs, CaseView, Quantity
from values_seg.numerics.stored_samples import StoredSamples
from values_seg.components.unchanged import Unchanged, message, modified, private
from values_seg.numerics.labels import class_argmax  # noqa: F401 - re-exported: the evaluation's label maps
from values_seg.numerics.validation import check_probabilities

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
