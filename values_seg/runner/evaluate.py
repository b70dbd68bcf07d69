"""The evaluation stage of one combination: fit on validation, one streaming pass over test (and the
splits stages add).

The per-case quantities computed are exactly those the sweep's tasks and stages consume
(:mod:`values_seg.quantity`), each case read once:

1. Validation split (only where something is fitted): aggregations that learn something
   (threshold, appendix F.2) are fitted on the validation maps and predictions; quantities with a
   validation part (calibration's Platt scaling, appendix A.5) on their merged per-case summaries.
2. Test split: :func:`values_seg.evaluation.evaluate_case` per case, one case in memory: the
   (measure, aggregation) scores, one column per per-case quantity (``cases.parquet``), one per
   per-measure quantity (``per_measure.parquet``), the payload quantities' own files, and a few
   maps kept for the montage figure.
   In the same pass, where a quantity declares ``splits`` with "val": those quantities on every
   validation case and, once fitted, the aggregations' scores (from the kept maps), rows of split
   "val" (e.g. conformal calibration).
3. Extra splits of stages (e.g. active learning's pool): the aggregated scores only.

Failures are contained at the finest grain: a measure or aggregation that raises or returns
non-finite values on any case is dropped with all its rows and recorded (component and case
named); the other components of the combination complete. A case that cannot be loaded,
predicted or evaluated (a ``ValueError``: e.g. NaN voxels, invalid samples) is left out and
recorded (``case <split>/<id>``); the other cases complete.

Outputs go to one folder keyed by a hash of everything that determines them: the combination's
config, the evaluation settings, the prediction key, the quantities computed and the extra splits,
and the code of the measures, aggregations, quantities, dataset and evaluation stage
(:mod:`values_seg.provenance`). ``done.json``, written last, lists every file with its sha256 and
size; a folder is reused only when it is complete, had no failure (failures are never cached as
results) and its files match; it is verified again when read. A damaged folder is reported with
its path, set aside (``*.corrupt``) and recomputed.
"""

from __future__ import annotations

import json
import logging
import traceback
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd
import torch

from values_seg.aggregation import Aggregation
from values_seg.engine import CheckpointStore, PredictionCache, predict_split, prediction_key
from values_seg.engine.device import fixed_threads
from values_seg.engine.specs import sha256_json
from values_seg.evaluation import ComponentError, evaluate_case
from values_seg.evaluation import _aggregate_stack as aggregate_stack
from values_seg.provenance import code_digest
from values_seg.quantity import resolve
from values_seg.run_files import (CHECKPOINTS, EVALUATION_CASES, EVALUATION_FITTED, EVALUATION_MONTAGE,
                                  EVALUATION_PER_MEASURE, EVALUATION_SCORES, EVALUATIONS, PREDICTIONS)
from values_seg.runner.evaluation_store import (  # noqa: F401 - the stage's folder API, re-exported
    MANIFEST,
    failures,
    load_evaluation,
    montage_bytes,
    parquet,
    payload_file,
    reusable,
    set_aside,
    verify,
    write,
)
from values_seg.sweep import Combination
from values_seg.task import PER_MEASURE_COLUMNS, SCORE_COLUMNS

log = logging.getLogger("values_seg.runner")

EVALUATION_VERSION = 6  # bump when the stored evaluation changes
#: Column names of the results tables that case metadata must not shadow (renamed case_<key>).
RESERVED = {"dataset", "scenario", "seed", "backbone", "prediction_model", "family", "measure",
            "uncertainty_type", "aggregation", "score", "ncc", "task", "metric", "value"}


def evaluation_key(combo: Combination, eval_cfg: dict, quantities: Iterable[str], splits: Iterable[str] = ()) -> str:
    """The key of a combination's evaluation computing ``quantities`` and scoring the extra ``splits``."""
    model = combo.model.create()
    components = [m.component().obj for m, _ in combo.measures] + [a.component().obj for a in combo.aggregations]
    names = sorted(set(quantities))
    return sha256_json({
        "version": EVALUATION_VERSION,
        "prediction": prediction_key(model, combo.specs, eval_cfg.get("threads", 1)),
        "dataset": combo.dataset.key(),
        "measures": [(m.label, m.to_dict()) for m, _ in combo.measures],
        "aggregations": [(a.label, a.to_dict()) for a in combo.aggregations],
        "evaluation": eval_cfg,
        "quantities": names,
        "splits": sorted(set(splits)),
        "code": code_digest(combo.dataset.component().obj, *components,
                            *(type(q) for q in resolve(names).values()), stage="evaluation"),
    })


def _fits(agg: Aggregation) -> bool:
    return type(agg).fit is not Aggregation.fit


class LiveComponents:
    """The measures and aggregations of one combination still in its evaluation.

    A measure or aggregation that fails is dropped (a measure with its aggregations) and its
    traceback recorded; :meth:`evaluate` retries the case without it, so the others complete."""

    def __init__(self, measures: dict, aggregations: dict):
        self.measures, self.aggregations = measures, aggregations
        self.failed: dict[str, str] = {}

    def drop_measure(self, measure: str, error: str) -> None:
        self.failed[f"measure {measure}"] = error
        self.measures.pop(measure, None)
        for key in [k for k in self.aggregations if k[0] == measure]:
            del self.aggregations[key]

    def drop_case(self, split: str, case_id: str, error: str) -> None:
        """A case that cannot be loaded, predicted or evaluated loses only itself."""
        log.warning("case %s of %s left out of the evaluation: %s", case_id, split, error.strip().splitlines()[-1])
        self.failed[f"case {split}/{case_id}"] = error

    def drop_aggregation(self, measure: str, aggregation: str, error: str) -> None:
        self.failed[f"aggregation {aggregation} (measure {measure})"] = error
        self.aggregations.pop((measure, aggregation), None)

    def evaluate(self, samples, raters, aggregate: bool = True, split: str = "test", **kwargs):
        """:func:`evaluate_case` with the live components (the aggregations only with
        ``aggregate``: not before they are fitted), dropping each one that fails; ``None`` for a
        case whose inputs are invalid (recorded, see :meth:`drop_case`)."""
        while True:
            try:
                return evaluate_case(samples, raters, self.measures, self.aggregations if aggregate else {}, **kwargs)
            except ComponentError as e:
                log.warning("%s; it is dropped from this combination, the others go on", e)
                if e.kind == "measure":
                    self.drop_measure(e.measure, traceback.format_exc())
                else:
                    self.drop_aggregation(e.measure, e.aggregation, traceback.format_exc())
            except ValueError as e:
                self.drop_case(split, kwargs.get("case_id", "?"), f"{type(e).__name__}: {e}")
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


def run_evaluation(combo: Combination, cache_dir: Path, eval_cfg: dict, quantities: Iterable[str],
                   splits: Iterable[str] = (), device: str | None = None, progress: bool = True) -> str:
    """Evaluate a combination (predicting whatever is not cached); returns the output folder.

    ``quantities``: the per-case quantities to compute (names); ``splits``: extra splits to score
    (e.g. active learning's pool)."""
    out = evaluation_folder(combo, cache_dir, eval_cfg, quantities, splits)
    if reusable(out):
        return str(out)
    with fixed_threads(eval_cfg.get("threads", 1)):
        outputs = _evaluate(combo, Path(cache_dir), eval_cfg, resolve(quantities), list(splits), device, progress)
    write(out, outputs, {"combination": combo.name, "key": out.name})
    return str(out)


def evaluation_folder(combo: Combination, cache_dir: str | Path, eval_cfg: dict, quantities: Iterable[str],
                      splits: Iterable[str] = ()) -> Path:
    """Where the evaluation of ``combo`` with these settings is (or will be) cached."""
    return Path(cache_dir) / EVALUATIONS / evaluation_key(combo, eval_cfg, quantities, splits)


class _Pass:
    """The loaded components of one combination's evaluation and the cases of a split."""

    def __init__(self, combo: Combination, cache_dir: Path, eval_cfg: dict, device, progress: bool):
        self.combo, self.eval_cfg, self.device, self.progress = combo, eval_cfg, device, progress
        self.store = CheckpointStore(cache_dir / CHECKPOINTS)
        self.cache = PredictionCache(cache_dir / PREDICTIONS, dtype=eval_cfg.get("prediction_dtype", "float16"))
        self.model, self.dataset = combo.model.create(), combo.dataset.create()
        measures = {m.label: m.create() for m, _ in combo.measures}
        self.live = LiveComponents(measures, {(m, a.label): a.create() for m in measures for a in combo.aggregations})
        self.common = {"num_classes": self.dataset.num_classes, "ignore_index": self.dataset.ignore_index,
                       "background": self.dataset.background, "settings": eval_cfg,
                       "device": _map_device(device)}

    def cases(self, split: str) -> Iterable:
        """(case id, case, samples) of the split; a case that fails to load or predict loses only itself."""
        bad: dict[str, str] = {}
        handles = predict_split(self.model, self.combo.specs, self.store, self.combo.dataset, split, self.cache,
                                device=self.device, progress=self.progress, threads=self.eval_cfg.get("threads", 1),
                                failed=bad)
        for case_id, error in bad.items():
            self.live.drop_case(split, case_id, error)
        for handle in handles:
            try:
                loaded = handle.case_id, self.dataset.load(handle.case_id), handle.load()
            except ValueError as e:
                self.live.drop_case(split, handle.case_id, f"{type(e).__name__}: {e}")
                continue
            yield loaded

    def evaluate(self, case_id: str, case, samples, split: str, **kwargs):
        return self.live.evaluate(samples, case.raters, case_id=case_id, meta=case.meta, split=split,
                                  reference_variance=case.reference_variance, **self.common, **kwargs)


def _map_device(device):
    """Where the fused pass computes the measures' maps: the job's GPU when it has one, else ``None``
    (the CPU, where the cached samples are read)."""
    from values_seg.engine.device import resolve as resolve_device

    dev = resolve_device(device)
    return dev if dev.type == "cuda" else None


def _fit(run: _Pass, quantities: dict) -> tuple[dict, list]:
    """Validation: fit the aggregations that learn and the quantities with a validation part; returns
    the quantities' fitted states (per measure for a per-measure one) and, in the same pass, the
    records ``(case id, meta, evaluation)`` of the validation cases for the quantities that declare
    "val", with the fitted aggregations' scores."""
    live, fitting = run.live, {n: q for n, q in quantities.items() if q.fits()}
    on_val = {n: q for n, q in quantities.items() if "val" in q.splits}
    needs_maps = any(_fits(agg) for agg in live.aggregations.values())
    if not fitting and not needs_maps and not on_val:
        return {}, []
    summaries: dict = {}
    val_maps: dict[str, list] = {m: [] for m in live.measures}
    val_predictions, records = [], []
    for case_id, case, samples in run.cases("val"):  # each case read once
        ev = run.evaluate(case_id, case, samples, "val", aggregate=bool(on_val) and not needs_maps, fit=True,
                          quantities={**fitting, **on_val}, keep_maps=needs_maps)
        if ev is None:
            continue
        for name, summary in ev.summaries.items():
            summaries[name] = _merge(summaries.get(name), summary)
        if needs_maps:
            for m in live.measures:
                val_maps[m].append(ev.maps[m])
            val_predictions.append(ev.prediction)
        if on_val:
            records.append((case_id, case.meta, ev))
    fitted = {name: _fit_quantity(live, q, summaries.get(name)) for name, q in fitting.items()}
    for (m, a), agg in list(live.aggregations.items()):
        if _fits(agg):
            try:
                agg.fit(val_maps[m], val_predictions)
            except Exception:  # noqa: BLE001
                live.drop_aggregation(m, a, f"fit on the validation split failed:\n{traceback.format_exc()}")
    if records and needs_maps:  # the validation records' scores, now that the aggregations are fitted
        for i, (_, _, ev) in enumerate(records):
            ev.scores = _score_kept(live, {m: val_maps[m][i] for m in live.measures}, val_predictions[i], ev.case_id)
            ev.maps, ev.prediction = {}, None
    return fitted, records


def _score_kept(live: LiveComponents, maps: dict, prediction, case_id: str) -> dict:
    """Every live aggregation's score of one case's kept maps; one that fails is dropped (recorded)."""
    scores = {}
    for name in dict.fromkeys(a for _, a in live.aggregations):
        while rows := [m for m in live.measures if (m, name) in live.aggregations]:
            try:
                values = aggregate_stack([live.aggregations[(m, name)] for m in rows],
                                         torch.stack([maps[m] for m in rows]), prediction, rows, name, case_id)
            except ComponentError as e:
                live.drop_aggregation(e.measure, name, traceback.format_exc())
                continue
            scores.update({(m, name): v for m, v in zip(rows, values)})
            break
    return scores


def _merge(total, summary):
    if total is None:
        return summary
    if isinstance(summary, dict):
        return {m: total[m] + s if m in total else s for m, s in summary.items()}
    return total + summary


def _fit_quantity(live: LiveComponents, quantity, summary):
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


def _evaluate(combo: Combination, cache_dir: Path, eval_cfg: dict, quantities: dict, splits: list, device,
              progress: bool) -> dict[str, bytes]:
    run = _Pass(combo, cache_dir, eval_cfg, device, progress)
    live = run.live
    fitted, val_records = _fit(run, quantities)
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
    keep = int(eval_cfg.get("montage_cases", 3))
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

    for split in splits:  # scores that rank the cases of a stage's split (e.g. active learning's pool)
        for case_id, case, samples in run.cases(split):
            ev = run.evaluate(case_id, case, samples, split)
            if ev is not None:
                case_rows.append(_case_row(case_id, split, case.meta, ev))
                score_rows += [(case_id, split, m, a, s) for (m, a), s in ev.scores.items()]
    return _outputs(combo, run, quantities, fitted, case_rows, score_rows, measure_rows, payloads, montage)


def _montage_entry(case_id: str, subset: str, case, ev, measures) -> dict:
    where = _montage_slice(case.image, case.raters)
    return {"case_id": case_id, "ood": subset == "ood", "image": case.image[0][where],
            "raters": case.raters[(slice(None), *where)], "prediction": ev.prediction.numpy()[where],
            "maps": {m: ev.maps[m].numpy()[where] for m in measures}}


def _outputs(combo, run: _Pass, quantities: dict, fitted: dict, case_rows, score_rows, measure_rows, payloads,
             montage) -> dict[str, bytes]:
    """The files of the evaluation folder; a component dropped mid-stream loses the rows of the
    cases before too."""
    live = run.live
    scores = pd.DataFrame(score_rows, columns=list(SCORE_COLUMNS))
    scores = scores[[k in live.aggregations for k in zip(scores["measure"], scores["aggregation"])]]
    columns = list(PER_MEASURE_COLUMNS) + [n for n, q in quantities.items() if q.per_measure and not q.payload]
    per_measure = pd.DataFrame(measure_rows, columns=columns)
    per_measure = per_measure[per_measure["measure"].isin(list(live.measures))]
    fitted_json = {"measures": list(live.measures), "quantities": list(quantities),
                   "fitted": {n: ({m: s for m, s in f.items() if m in live.measures} if isinstance(f, dict) else f)
                              for n, f in fitted.items()},
                   "aggregations": [{"measure": m, "aggregation": a, "state": agg.state()}
                                    for (m, a), agg in live.aggregations.items()],
                   "failed": live.failed}
    outputs = {EVALUATION_CASES: parquet(pd.DataFrame(case_rows)), EVALUATION_SCORES: parquet(scores),
               EVALUATION_PER_MEASURE: parquet(per_measure),
               EVALUATION_FITTED: json.dumps(fitted_json, default=_json_value).encode()}
    for name, entries in payloads.items():
        for file, data in quantities[name].save(entries, list(live.measures), run.eval_cfg).items():
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
