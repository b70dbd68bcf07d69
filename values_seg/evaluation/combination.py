"""The evaluation stage of one combination: fit on validation, one streaming pass over test (and the
splits stages add), each case read once, failures contained per component and per case.

The passes, the failure rules and the cached folder: docs/design-rationale.md,
"One combination's evaluation".
"""

from __future__ import annotations

import contextlib
import json
import logging
import traceback
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from values_seg.components.aggregation import SAMPLES, reads_samples
from values_seg.runtime.allocator import keep_freed_memory
from values_seg.engine import Checkpoints, PredictionCache, predict_split
from values_seg.engine.device import fixed_threads
from values_seg.components.case_context import CaseContext
from values_seg.evaluation.per_case import CaseEvaluation, ComponentError, evaluate_case
from values_seg.storage.failure_record import cause_of, one_line
from values_seg.components.quantity import Quantity, resolve
from values_seg.storage.redaction import redact
from values_seg.runtime.progress import counted
from values_seg.storage.run_lock import writing_entry
from values_seg.evaluation.validation_fit import fit_validation
from values_seg.storage.run_files import (EVALUATION_CASES, EVALUATION_FITTED, EVALUATION_MONTAGE, EVALUATION_PER_MEASURE,
                                  EVALUATION_SCORES)
from values_seg.evaluation.folder import montage_bytes, parquet, payload_file, reusable, write
from values_seg.evaluation.inputs import EvaluationInputs
from values_seg.components.settings import EvaluationSettings
from values_seg.storage.cache_store import CacheStore
from values_seg.config.sweep import Combination
from values_seg.components.task import PER_MEASURE_COLUMNS, SCORE_COLUMNS

log = logging.getLogger("values_seg.runner")

#: Column names of the results tables that case metadata must not shadow (renamed case_<key>).
RESERVED = {"dataset", "scenario", "seed", "backbone", "prediction_model", "family", "measure",
            "uncertainty_type", "aggregation", "score", "ncc", "task", "metric", "value"}


def evaluation_key(combo: Combination, settings: Mapping, quantities: Iterable[str], splits: Iterable[str] = ()) -> str:
    """The key of a combination's evaluation computing ``quantities`` and scoring the extra ``splits``
    with these :class:`~values_seg.components.settings.EvaluationSettings` (a mapping of some of them: the rest
    default): the digest of its declared :class:`EvaluationInputs`."""
    return EvaluationInputs.of(combo, settings, quantities, splits).key()


class LiveComponents:
    """The measures and aggregations of one combination still in its evaluation.

    A measure or aggregation that fails is dropped (a measure with its aggregations) and its
    traceback recorded (``failed``), with its cause in one line (``causes``); :meth:`evaluate`
    retries the case without it, so the others complete."""

    def __init__(self, measures: dict, aggregations: dict):
        self.measures, self.aggregations = measures, aggregations
        self.failed: dict[str, str] = {}
        self.causes: dict[str, str] = {}

    def _record(self, what: str, error: str, cause: str | None = None) -> None:
        self.failed[what] = error = redact(error)  # kept in the cache: no credentials (values_seg.storage.redaction)
        self.causes[what] = one_line(redact(cause)) if cause is not None else cause_of(error)

    def drop_measure(self, measure: str, error: str, cause: str | None = None) -> None:
        self._record(f"measure {measure}", error, cause)
        self.measures.pop(measure, None)
        for key in [k for k in self.aggregations if k[0] == measure]:
            del self.aggregations[key]

    def drop_case(self, split: str, case_id: str, error: str) -> None:
        """A case that cannot be loaded, predicted or evaluated loses only itself."""
        log.warning("case %s of %s left out of the evaluation: %s", case_id, split,
                    redact(error.strip().splitlines()[-1]))
        self._record(f"case {split}/{case_id}", error)

    def drop_aggregation(self, measure: str, aggregation: str, error: str, cause: str | None = None) -> None:
        self._record(f"aggregation {aggregation} (measure {measure})", error, cause)
        self.aggregations.pop((measure, aggregation), None)

    def evaluate(self, samples, raters, context: CaseContext = CaseContext(), split: str = "test", *,
                 aggregate: bool = True, quantities: Mapping[str, Quantity] | None = None,
                 fitted: Mapping[str, Any] | None = None,
                 fit: bool = False, keep_maps: bool = False) -> CaseEvaluation | None:
        """:func:`evaluate_case` with the live components (the aggregations only with
        ``aggregate``: not before they are fitted), dropping each one that fails; ``None`` for a
        case whose inputs are invalid or cannot be read (recorded, see :meth:`drop_case`).
        ``samples``: a tensor, or the cached samples (:class:`~values_seg.engine.predictions.CaseSamples`),
        opened for each try and handed over as they are stored (the float32 samples a component asks
        for are made for that try: the retry after a component that changed them has fresh ones)."""
        cached = hasattr(samples, "opened")
        while True:
            try:
                with samples.opened() if cached else contextlib.nullcontext(samples) as given:
                    return evaluate_case(given, raters, self.measures, self.aggregations if aggregate else {},
                                         quantities=quantities, fitted=fitted, fit=fit, context=context,
                                         keep_maps=keep_maps)
            except ComponentError as e:
                log.warning("%s; it is dropped from this combination, the others go on", redact(str(e)))
                if e.kind == "measure":
                    self.drop_measure(e.measure, traceback.format_exc(), e.cause)
                else:
                    self.drop_aggregation(e.measure, e.aggregation, traceback.format_exc(), e.cause)
            except ValueError as e:
                self.drop_case(split, context.case_id, f"{type(e).__name__}: {e}")
                return None


def _montage_slice(image: np.ndarray, raters: np.ndarray) -> tuple:
    """For 3D, the slice (along the first axis) with the most rater foreground."""
    if raters.ndim == 3:  # [R, H, W]: 2D already
        return (slice(None),) * 2
    depth = (raters > 0).sum(axis=(0, 2, 3))
    return (int(depth.argmax()),)


def _case_row(case_id: str, split: str, meta: dict, ev) -> dict:
    row = {"case_id": case_id, "split": split, **{k: v for k, v in ev.values.items() if isinstance(v, float)}}
    row["ood"] = bool(meta.get("ood", False))
    row["shift"] = str(meta.get("shift", "none"))
    for key, value in meta.items():
        if isinstance(value, (bool, int, float, str)):
            name = f"case_{key}" if key in RESERVED else key
            row.setdefault(name, value)
    return row


def run_evaluation(combo: Combination, cache_dir: Path, settings: Mapping, quantities: Iterable[str],
                   splits: Iterable[str] = (), device: str | None = None, progress: bool = True) -> str:
    """Evaluate a combination (predicting whatever is not cached); returns the output folder.

    ``quantities``: the per-case quantities to compute (names); ``splits``: extra splits to score
    (e.g. active learning's pool)."""
    inputs = EvaluationInputs.of(combo, settings, quantities, splits)
    out = inputs.path(cache_dir)
    if reusable(out):
        return str(out)
    with writing_entry(out):  # another run sharing the cache may be writing it: wait, then reuse it
        if reusable(out):
            return str(out)
        with fixed_threads(inputs.settings.threads):  # the evaluation reads its declared inputs only
            outputs = _evaluate(inputs.combination, Path(cache_dir), inputs.settings, resolve(inputs.quantities),
                                list(inputs.splits), device, progress)
        write(out, outputs, {"combination": combo.name, "key": out.name})
    return str(out)


def evaluation_folder(combo: Combination, cache_dir: str | Path, settings: Mapping, quantities: Iterable[str],
                      splits: Iterable[str] = ()) -> Path:
    """Where the evaluation of ``combo`` with these settings is (or will be) cached."""
    return EvaluationInputs.of(combo, settings, quantities, splits).path(cache_dir)


class EvaluationPass:
    """The loaded components of one combination's evaluation and the cases of a split (the test
    part here, the validation part in :mod:`values_seg.evaluation.validation_fit`)."""

    def __init__(self, combo: Combination, cache_dir: Path, settings: EvaluationSettings, device, progress: bool):
        self.combo, self.settings, self.device, self.progress = combo, settings, device, progress
        keep_freed_memory()  # case after case, the same large buffers: reused, not faulted in again
        store = CacheStore(cache_dir)
        self.store, self.cache = Checkpoints.of(store), PredictionCache.of(store, settings.prediction_dtype)
        self.model, self.dataset = combo.model.create(), combo.dataset.create()
        measures = {m.label: m.create() for m, _ in combo.measures}
        aggregations = {(m, a.label): a.create() for m in measures for a in combo.aggregations
                        if not reads_samples(a.component().obj)}
        aggregations.update({(SAMPLES, a.label): a.create() for a in combo.aggregations
                             if reads_samples(a.component().obj)})
        self.live = LiveComponents(measures, aggregations)
        self.networks: dict = {}  # loaded once, for every split of this evaluation
        self.context = CaseContext.of_dataset(self.dataset, settings, _map_device(device))

    def cases(self, split: str) -> Iterable:
        """(case id, case, cached samples: :class:`~values_seg.engine.predictions.CaseSamples`, read when the
        case is evaluated) of the split; a case that fails to load or predict loses only itself."""
        bad: dict[str, str] = {}
        handles = predict_split(self.model, self.combo.specs, self.store, self.combo.dataset, split, self.cache,
                                device=self.device, progress=self.progress, threads=self.settings.threads,
                                failed=bad, networks=self.networks)
        for case_id, error in bad.items():
            self.live.drop_case(split, case_id, error)
        # name the combination and count its cases (here, or relayed from a worker): a slow measure is visible
        handles = counted(handles, len(handles), f"evaluate {self.combo.name} {split}", self.progress)
        for handle in handles:
            try:
                case = self.dataset.load(handle.case_id)
            except ValueError as e:
                self.live.drop_case(split, handle.case_id, f"{type(e).__name__}: {e}")
                continue
            yield handle.case_id, case, handle

    def evaluate(self, case_id: str, case, samples, split: str, *, aggregate: bool = True,
                 quantities: Mapping[str, Quantity] | None = None, fitted: Mapping[str, Any] | None = None,
                 fit: bool = False, keep_maps: bool = False) -> CaseEvaluation | None:
        """One loaded case of ``split`` through :meth:`LiveComponents.evaluate`."""
        return self.live.evaluate(samples, case.raters, self.context.for_case(case_id, case), split,
                                  aggregate=aggregate, quantities=quantities, fitted=fitted, fit=fit,
                                  keep_maps=keep_maps)


def _map_device(device):
    """Where the fused pass computes the measures' maps: the job's GPU when it has one, else ``None``
    (the CPU, where the cached samples are read)."""
    from values_seg.engine.device import resolve as resolve_device

    dev = resolve_device(device)
    return dev if dev.type == "cuda" else None


def _evaluate(combo: Combination, cache_dir: Path, settings: EvaluationSettings, quantities: dict, splits: list,
              device, progress: bool) -> dict[str, bytes]:
    run = EvaluationPass(combo, cache_dir, settings, device, progress)
    live = run.live
    fitted, val_records = fit_validation(run, quantities)
    per_measure = [n for n, q in quantities.items() if q.per_measure and not q.payload]
    payloads = {n: [] for n, q in quantities.items() if q.payload}

    case_rows, score_rows, measure_rows = [], [], []
    for case_id, meta, ev in val_records:  # validation cases as records, from the fit's pass
        case_rows.append(_case_row(case_id, "val", meta, ev))
        score_rows += [(case_id, "val", m, a, s) for (m, a), s in ev.scores.items()]
        for name in ev.values.keys() & payloads.keys():
            payloads[name].append((case_id, meta, ev.values[name]))

    # test: one pass, one case at a time
    montage = {"iid": [], "ood": []}
    keep = settings.montage_cases
    shown: set = set()  # (subset, shift, blurred) groups with a montage case
    for case_id, case, samples in run.cases("test"):
        subset = "ood" if case.meta.get("ood") else "iid"
        group = (subset, case.meta.get("shift"), case.meta.get("blurred"))
        # the first few cases of each subset, and the first of every other shift / blur group
        want_maps = keep > 0 and (len(montage[subset]) < keep or (group not in shown and len(montage[subset]) < 2 * keep))
        shown.add(group)
        ev = run.evaluate(case_id, case, samples, "test", quantities=quantities, fitted=fitted, keep_maps=want_maps)
        if ev is None:
            continue
        case_rows.append(_case_row(case_id, "test", case.meta, ev))
        score_rows += [(case_id, "test", m, a, s) for (m, a), s in ev.scores.items()]
        if per_measure:
            measure_rows += [{"case_id": case_id, "split": "test", "measure": m,
                              **{n: ev.values[n][m] for n in per_measure}} for m in ev.values[per_measure[0]]]
        for name, entries in payloads.items():
            entries.append((case_id, case.meta, ev.values[name]))
        if want_maps:
            montage[subset].append(_montage_entry(case_id, subset, case, ev, live.measures))
    if not any(row["split"] == "test" for row in case_rows):
        raise ValueError(_no_test_case(live.failed))  # nothing to score: the combination fails

    for split in splits:  # scores that rank the cases of a stage's split (e.g. active learning's pool)
        for case_id, case, samples in run.cases(split):
            ev = run.evaluate(case_id, case, samples, split)
            if ev is not None:
                case_rows.append(_case_row(case_id, split, case.meta, ev))
                score_rows += [(case_id, split, m, a, s) for (m, a), s in ev.scores.items()]
    return _outputs(combo, run, quantities, fitted, case_rows, score_rows, measure_rows, payloads, montage)


def _no_test_case(failed: Mapping[str, str]) -> str:
    """Why an evaluation holds no test case: every one was left out (how many, the first's error)."""
    left_out = [error for what, error in failed.items() if what.startswith("case test/")]
    if not left_out:
        return "the test split has no case"
    return f"every test case left out (all {len(left_out)}), the first: {left_out[0].strip().splitlines()[-1]}"


def _montage_entry(case_id: str, subset: str, case, ev, measures) -> dict:
    where = _montage_slice(case.image, case.raters)
    return {"case_id": case_id, "ood": subset == "ood", "image": case.image[0][where],
            "raters": case.raters[(slice(None), *where)], "prediction": ev.prediction.numpy()[where],
            "maps": {m: ev.maps[m].numpy()[where] for m in measures}}


def _outputs(combo, run: EvaluationPass, quantities: dict, fitted: dict, case_rows, score_rows, measure_rows, payloads,
             montage) -> dict[str, bytes]:
    """The files of the evaluation folder; a component dropped mid-stream loses the rows of the
    cases before too."""
    live = run.live
    scores = pd.DataFrame(score_rows, columns=list(SCORE_COLUMNS))
    live_rows = [k in live.aggregations for k in zip(scores["measure"], scores["aggregation"])]
    scores = scores.loc[pd.Series(live_rows, index=scores.index, dtype=bool)]  # (a list would pick columns when empty)
    columns = list(PER_MEASURE_COLUMNS) + [n for n, q in quantities.items() if q.per_measure and not q.payload]
    per_measure = pd.DataFrame(measure_rows, columns=columns)
    per_measure = per_measure[per_measure["measure"].isin(list(live.measures))]
    fitted_json = {"measures": list(live.measures), "quantities": list(quantities),
                   "fitted": {n: ({m: s for m, s in f.items() if m in live.measures} if isinstance(f, dict) else f)
                              for n, f in fitted.items()},
                   "aggregations": [{"measure": m, "aggregation": a, "state": agg.state()}
                                    for (m, a), agg in live.aggregations.items()],
                   "failed": live.failed, "causes": live.causes}
    outputs = {EVALUATION_CASES: parquet(pd.DataFrame(case_rows)), EVALUATION_SCORES: parquet(scores),
               EVALUATION_PER_MEASURE: parquet(per_measure),
               EVALUATION_FITTED: json.dumps(fitted_json, default=_json_value).encode()}
    for name, entries in payloads.items():
        for file, data in quantities[name].save(entries, list(live.measures), run.settings).items():
            outputs[payload_file(name, file)] = data
    entries = [{**e, "maps": {m: v for m, v in e["maps"].items() if m in live.measures}}
               for e in montage["iid"] + montage["ood"]]
    if entries:
        outputs[EVALUATION_MONTAGE] = montage_bytes(entries, list(live.measures), combo)
    return outputs


def _json_value(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return repr(value)
