"""The validation part of a combination's evaluation (:mod:`values_seg.evaluation.combination`): one
pass over the validation split fits what learns and keeps the validation cases' records.

Why nothing of a test case, and no in-sample score, reaches them: docs/design-rationale.md,
"The validation fit".
"""

from __future__ import annotations

import traceback
from typing import Any, Iterable, Mapping, Protocol

import numpy as np
import torch

from values_seg.components.aggregation import SAMPLES, Aggregation, reads_samples, reads_scores
from values_seg.evaluation.per_case import CaseEvaluation, ComponentError, score_stack
from values_seg.components.quantity import Quantity, resolve
from values_seg.components.unchanged import Unchanged, copies, message


class Components(Protocol):
    """The live components of a combination (:class:`values_seg.evaluation.combination.LiveComponents`):
    one that fails is dropped, with its error, and the others go on."""

    measures: dict[str, Any]
    aggregations: dict[tuple[str, str], Aggregation]

    def drop_measure(self, measure: str, error: str) -> None: ...

    def drop_aggregation(self, measure: str, aggregation: str, error: str) -> None: ...


class ValidationPass(Protocol):
    """What the validation part reads of a combination's evaluation pass
    (:class:`values_seg.evaluation.combination.EvaluationPass`): its live components, the loaded cases of
    a split and the fused evaluation of one of them."""

    live: Components

    def cases(self, split: str) -> Iterable[tuple[str, Any, Any]]:
        """(case id, :class:`values_seg.components.dataset.Case`, cached samples) of ``split``: the samples
        (:class:`~values_seg.engine.predictions.CaseSamples`) are read when the case is evaluated."""

    def evaluate(self, case_id: str, case: Any, samples: Any, split: str, *, aggregate: bool = True,
                 quantities: Mapping[str, Quantity] | None = None, fitted: Mapping[str, Any] | None = None,
                 fit: bool = False, keep_maps: bool = False) -> CaseEvaluation | None:
        """:func:`values_seg.evaluation.per_case.evaluate_case` of one case (``None``: it was left out)."""


def _fits(agg: Aggregation) -> bool:
    return type(agg).fit is not Aggregation.fit


def fit_validation(run: ValidationPass, quantities: Mapping[str, Quantity]) -> tuple[dict, list]:
    """Validation: fit the aggregations that learn and the quantities with a validation part; returns
    the quantities' fitted states (per measure for a per-measure one) and, from the same pass, the
    records ``(case id, meta, evaluation)`` of the validation cases for the quantities that declare
    "val", with the fitted aggregations' scores. Only the validation split is read: nothing of a test
    case reaches a fit."""
    live, fitting = run.live, {n: q for n, q in quantities.items() if q.fits()}
    on_val = {n: q for n, q in quantities.items() if "val" in q.splits}
    learners = [k for k, agg in live.aggregations.items() if _fits(agg) and k[0] != SAMPLES]  # samples: no fit
    needs = {n for k in learners for n in getattr(live.aggregations[k], "fit_needs", ())}
    if not fitting and not learners and not on_val:
        return {}, []
    risk = resolve(["dice"]) if "risks" in needs else {}  # the failure risk 1 - Dice (eq. 4)
    summaries: dict = {}
    val_maps: dict[str, list] = {m: [] for m in live.measures}
    val_predictions, extras, records = [], {"risks": [], "ood": []}, []
    for case_id, case, samples in run.cases("val"):  # each case read once
        ev = run.evaluate(case_id, case, samples, "val", aggregate=bool(on_val) and not learners, fit=True,
                          quantities={**fitting, **risk, **on_val}, keep_maps=bool(learners))
        if ev is None:
            continue
        for name, summary in ev.summaries.items():
            summaries[name] = _merge(summaries.get(name), summary)
        if learners:
            for m in live.measures:
                val_maps[m].append(ev.maps[m])
            val_predictions.append(ev.prediction)
            extras["ood"].append(bool(case.meta.get("ood", False)))
            if risk:
                extras["risks"].append(1.0 - ev.values["dice"])
        if on_val:
            records.append((case_id, case.meta, ev))
    fitted = {name: _fit_quantity(live, q, summaries.get(name)) for name, q in fitting.items()}
    # the meta-aggregations last: they fit on the other aggregations' validation scores
    learners = [k for k in learners if k in live.aggregations]  # a measure that failed on validation: gone
    metas = [k for k in learners if reads_scores(live.aggregations[k])]
    val_scores = None
    for m, a in [k for k in learners if k not in metas] + metas:
        agg = live.aggregations.get((m, a))
        if agg is None or m not in live.measures:
            continue
        try:
            kwargs = {n: extras[n] for n in getattr(agg, "fit_needs", ()) if n in extras}
            if reads_scores(agg):
                val_scores = val_scores or _validation_scores(live, val_maps, val_predictions)
                kwargs["scores"] = val_scores[m]
            # its own copies of the maps: a fit that changes them harms no other fit, and is named
            maps, predictions = copies(val_maps[m]), copies(val_predictions)
            given = Unchanged(maps=maps, predictions=predictions)
            agg.fit(maps, predictions, **kwargs)
            if changed := given.modified():
                raise ValueError(message(changed))
        except Exception:  # noqa: BLE001
            live.drop_aggregation(m, a, f"fit on the validation split failed:\n{traceback.format_exc()}")
    if records and learners:  # the validation records' scores, now that the aggregations are fitted
        for i, (_, _, ev) in enumerate(records):
            ev.scores = _score_kept(live, {m: val_maps[m][i] for m in live.measures}, val_predictions[i], ev.case_id)
            ev.maps, ev.prediction = {}, None
    return fitted, records


def _score_kept(live: Components, maps: dict, prediction, case_id: str) -> dict:
    """Every live map aggregation's score of one validation case's kept maps (those reading the
    samples are left out: validation records keep no samples; those fitted on the validation risks
    or scores too: in-sample there); one that fails is dropped (recorded)."""
    scores = {}
    names = [a for (m, a), agg in live.aggregations.items()
             if m in live.measures and not getattr(agg, "fit_needs", ()) and not reads_samples(agg)]
    for name in dict.fromkeys(names):
        while rows := [m for m in live.measures if (m, name) in live.aggregations]:
            try:
                values = score_stack([live.aggregations[(m, name)] for m in rows],
                                     torch.stack([maps[m] for m in rows]), prediction, rows, name, case_id)
            except ComponentError as e:
                live.drop_aggregation(e.measure, name, traceback.format_exc())
                continue
            scores.update({(m, name): v for m, v in zip(rows, values)})
            break
    return scores


def _validation_scores(live: Components, maps: dict, predictions: list) -> dict[str, tuple[list, np.ndarray]]:
    """Per measure, (names, validation scores ``[N, A]``) of its fitted aggregations that learn nothing beyond
    the maps (a learned one's are in-sample), scored as the test pass does
    (:func:`values_seg.evaluation.per_case.score_stack`)."""
    keys = [k for k, agg in live.aggregations.items() if k[0] in live.measures and not getattr(agg, "fit_needs", ())]
    rows: dict = {k: [] for k in keys}
    for i, prediction in enumerate(predictions):
        for a in dict.fromkeys(a for _, a in keys):
            measures = [m for m, b in keys if b == a]
            stack = torch.stack([maps[m][i] for m in measures])
            scores = score_stack([live.aggregations[(m, a)] for m in measures], stack, prediction, measures, a,
                                 f"val/{i}")
            for m, score in zip(measures, scores):
                rows[(m, a)].append(score)
    out = {}
    for m in live.measures:
        names = [a for mm, a in keys if mm == m]
        out[m] = names, np.array([rows[(m, a)] for a in names], dtype=float).T.reshape(len(predictions), len(names))
    return out


def _merge(total, summary):
    if total is None:
        return summary
    if isinstance(summary, dict):
        return {m: total[m] + s if m in total else s for m, s in summary.items()}
    return total + summary


def _fit_quantity(live: Components, quantity: Quantity, summary):
    """A quantity's fitted state; per measure, a measure whose fit fails is dropped (recorded)."""
    if not quantity.per_measure:
        return quantity.fit(summary)
    fitted = {}
    for m in list(live.measures):
        try:
            if summary is None or m not in summary:
                raise ValueError("no validation case was evaluated")
            fitted[m] = quantity.fit(summary[m])
        except Exception:  # noqa: BLE001 - e.g. a map without any spread
            live.drop_measure(m, f"{quantity.name}: fit on the validation split failed:\n{traceback.format_exc()}")
    return fitted
