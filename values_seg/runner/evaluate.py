"""The evaluation stage of one combination: fit on validation, one streaming pass over test (and pool).

1. Validation split: per measure, a histogram of (uncertainty, correct) pixels fits Platt
   scaling (appendix A.5), and aggregations that learn something (threshold, appendix F.2) are
   fitted on the validation maps and predictions.
2. Test split: :func:`values_seg.evaluation.evaluate_case` per case, one case in memory; per-case
   rows, calibration bins summed per measure and subset (i.i.d./OoD) and kept per case at a
   finer resolution (for the bootstrap and the ACE reference), with the "retention" stage the
   per-case nDSC and nDSC R-AUC, a few maps kept for the montage figure.
3. Pool split (active learning): the aggregated scores that rank the unlabeled cases.

Outputs go to one folder keyed by a hash of everything that determines them, written atomically.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import shutil
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from values_seg import metrics
from values_seg.aggregation import Aggregation, aggregate
from values_seg.engine import CheckpointStore, PredictionCache, predict_split, prediction_key
from values_seg.engine.specs import sha256_json
from values_seg.evaluation import UncertaintyHistogram, evaluate_case
from values_seg.runner import case_calibration
from values_seg.sweep import Combination
from values_seg.task import RETENTION_COLUMNS, ActiveLearningResult, EvaluationResult

EVALUATION_VERSION = 4  # bump when the stored evaluation changes
#: per-case calibration bins are kept at this multiple of the ACE's bins (``coarsen_bins`` merges
#: them back): the ACE reference simulates each fine bin, whose variance the histogram overstates
#: by at most its width (values_seg.metrics.calibration_reference): 1 % at 100 bins (5 % at 20),
#: at half the simulation cost of 200 bins
FINE_BINS = 5
#: Column names of the results tables that case metadata must not shadow (renamed case_<key>).
RESERVED = {"dataset", "scenario", "seed", "backbone", "prediction_model", "family", "measure",
            "uncertainty_type", "aggregation", "score", "ncc", "task", "metric", "value"}


def evaluation_key(combo: Combination, eval_cfg: dict, stages: Iterable[str]) -> str:
    model = combo.model.create()
    return sha256_json({
        "version": EVALUATION_VERSION,
        "prediction": prediction_key(model, combo.specs),
        "dataset": combo.dataset.key(),
        "measures": [(m.label, m.to_dict()) for m, _ in combo.measures],
        "aggregations": [(a.label, a.to_dict()) for a in combo.aggregations],
        "evaluation": eval_cfg,
        "calibration_resolution": FINE_BINS,
        "stages": sorted(stages),
    })


def _fits(agg: Aggregation) -> bool:
    return type(agg).fit is not Aggregation.fit


def _montage_slice(image: np.ndarray, raters: np.ndarray) -> tuple:
    """For 3D, the slice (along the first axis) with the most rater foreground."""
    if raters.ndim == 3:  # [R, H, W]: 2D already
        return (slice(None),) * 2
    depth = (raters > 0).sum(axis=(0, 2, 3))
    return (int(depth.argmax()),)


def _case_row(case_id: str, split: str, meta: dict, ev) -> dict:
    row = {"case_id": case_id, "split": split, "dice": ev.dice, "ged": ev.ged, "predicted_fraction": ev.predicted_fraction}
    if ev.ndsc is not None:
        row["ndsc"] = ev.ndsc
    row["ood"] = bool(meta.get("ood", False))
    row["shift"] = str(meta.get("shift", "none"))
    for key, value in meta.items():
        if isinstance(value, (bool, int, float, str)):
            name = f"case_{key}" if key in RESERVED else key
            row.setdefault(name, value)
    return row


def run_evaluation(combo: Combination, cache_dir: Path, eval_cfg: dict, stages: Iterable[str], pool_split: str,
                   device: str | None = None, progress: bool = True) -> str:
    """Evaluate a combination (predicting whatever is not cached); returns the output folder.

    ``stages`` (:data:`values_seg.task.STAGES`) the tasks require: "calibration" fits Platt
    scaling and bins the test pixels; "active_learning" also scores the unlabeled pool."""
    stages = set(stages)
    with_pool, with_calibration = "active_learning" in stages, "calibration" in stages
    key = evaluation_key(combo, eval_cfg, stages)
    out = Path(cache_dir) / "evaluations" / key
    if (out / "done.json").exists():
        return str(out)
    store = CheckpointStore(Path(cache_dir) / "checkpoints")
    cache = PredictionCache(Path(cache_dir) / "predictions", dtype=eval_cfg.get("prediction_dtype", "float16"))
    model = combo.model.create()
    dataset = combo.dataset.create()
    measures = {m.label: m.create() for m, _ in combo.measures}
    n_bins = int(eval_cfg.get("n_bins", 20))
    num_classes, ignore = dataset.num_classes, dataset.ignore_index

    def handles(split: str):
        return predict_split(model, combo.specs, store, combo.dataset, split, cache, device=device, progress=progress)

    def cases(split: str) -> Iterable:
        for handle in handles(split):
            yield handle.case_id, dataset.load(handle.case_id), handle.load()

    # 0. a measure or aggregation that fails on the first validation case is dropped and
    #    reported; the rest of the combination goes on
    aggregations = {(m, a.label): a.create() for m in measures for a in combo.aggregations}
    val_cases = cases("val")
    first = next(val_cases, None)
    failed = _probe(measures, aggregations, first, num_classes, ignore)

    # 1. validation: Platt scaling and fitted aggregations
    needs_maps = any(_fits(agg) for agg in aggregations.values())
    histograms = {m: UncertaintyHistogram() for m in measures}
    val_maps: dict[str, list] = {m: [] for m in measures}
    val_predictions = []
    for case_id, case, samples in itertools.chain([first] if first else [], val_cases):  # each case read once
        ev = evaluate_case(samples, case.raters, measures, case_id=case_id, num_classes=num_classes,
                           ignore_index=ignore, collect_histograms=with_calibration, keep_maps=needs_maps)
        for m in measures:
            if with_calibration:
                histograms[m] = histograms[m] + ev.histograms[m]
            if needs_maps:
                val_maps[m].append(ev.maps[m])
        if needs_maps:
            val_predictions.append(ev.prediction)
    platt = {m: histograms[m].platt_fit() for m in measures} if with_calibration else {}
    for (m, _), agg in aggregations.items():
        if _fits(agg):
            agg.fit(val_maps[m], val_predictions)
    del val_maps, val_predictions

    # 2. test: one pass, one case at a time
    case_rows, score_rows, ncc_rows, retention_rows, case_bins = [], [], [], [], {}
    ndsc_r = float(eval_cfg.get("ndsc_r", 0.001)) if "retention" in stages else None
    calibration = {(m, s): metrics.CalibrationBins.empty(n_bins) for m in measures for s in ("iid", "ood")}
    montage = {"iid": [], "ood": []}
    keep = int(eval_cfg.get("montage_cases", 3))
    shown: set = set()  # (subset, shift, blurred) groups with a montage case
    for case_id, case, samples in cases("test"):
        subset = "ood" if case.meta.get("ood") else "iid"
        group = (subset, case.meta.get("shift"), case.meta.get("blurred"))
        # the first few cases of each subset, and the first of every other shift / blur group
        want_maps = keep > 0 and (len(montage[subset]) < keep or (group not in shown and len(montage[subset]) < 2 * keep))
        shown.add(group)
        ev = evaluate_case(samples, case.raters, measures, aggregations, case_id=case_id, num_classes=num_classes,
                           ignore_index=ignore, platt=platt, n_bins=n_bins * FINE_BINS, keep_maps=want_maps,
                           reference_variance=case.reference_variance, ndsc_r=ndsc_r)
        case_rows.append(_case_row(case_id, "test", case.meta, ev))
        score_rows += [(case_id, "test", m, a, s) for (m, a), s in ev.scores.items()]
        ncc_rows += [(case_id, "test", m, v) for m, v in ev.ncc.items()]
        retention_rows += [(case_id, "test", m, v) for m, v in ev.ndsc_rauc.items()]
        for m, bins in ev.calibration.items():
            case_bins[(case_id, m)] = bins
            calibration[(m, subset)] = calibration[(m, subset)] + metrics.coarsen_bins(bins, n_bins)
        if want_maps:
            where = _montage_slice(case.image, case.raters)
            montage[subset].append({
                "case_id": case_id, "ood": subset == "ood",
                "image": case.image[0][where], "raters": case.raters[(slice(None), *where)],
                "prediction": ev.prediction.numpy()[where],
                "maps": {m: ev.maps[m].numpy()[where] for m in measures},
            })

    # 3. pool: scores that rank the unlabeled cases for active learning
    if with_pool:
        for case_id, case, samples in cases(pool_split):
            ev = evaluate_case(samples, case.raters, measures, aggregations, case_id=case_id,
                               num_classes=num_classes, ignore_index=ignore)
            case_rows.append(_case_row(case_id, "pool", case.meta, ev))
            score_rows += [(case_id, "pool", m, a, s) for (m, a), s in ev.scores.items()]

    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    pd.DataFrame(case_rows).to_parquet(tmp / "cases.parquet")
    pd.DataFrame(score_rows, columns=["case_id", "split", "measure", "aggregation", "score"]).to_parquet(tmp / "scores.parquet")
    pd.DataFrame(ncc_rows, columns=["case_id", "split", "measure", "ncc"]).to_parquet(tmp / "ncc.parquet")
    if ndsc_r is not None:
        pd.DataFrame(retention_rows, columns=list(RETENTION_COLUMNS)).to_parquet(tmp / "retention.parquet")
    case_calibration.save(tmp / case_calibration.FILE, case_bins)
    bins = [{"measure": m, "subset": s, "count": b.count.tolist(), "confidence_sum": b.confidence_sum.tolist(),
             "correct_sum": b.correct_sum.tolist()} for (m, s), b in calibration.items() if b.count.sum()]
    fitted = {"platt": platt, "aggregations": [{"measure": m, "aggregation": a, "state": agg.state()}
                                               for (m, a), agg in aggregations.items()],
              "failed": failed}
    (tmp / "calibration.json").write_text(json.dumps(bins))
    (tmp / "fitted.json").write_text(json.dumps(fitted, default=float))
    _save_montage(tmp / "montage.npz", montage["iid"] + montage["ood"], list(measures), combo)
    (tmp / "done.json").write_text(json.dumps({"combination": combo.name, "key": key}))
    if out.exists():  # a concurrent or earlier partial write
        shutil.rmtree(out)
    os.replace(tmp, out)
    return str(out)


def _probe(measures: dict, aggregations: dict, first, num_classes: int, ignore_index) -> dict[str, str]:
    """Try every measure and aggregation on one case; remove (in place) and report failures."""
    import traceback

    failed = {}
    if first is None:
        return failed
    case_id, case, samples = first
    prediction = samples.mean(dim=0).argmax(dim=0)
    for name in list(measures):
        try:
            ev = evaluate_case(samples, case.raters, {name: measures[name]}, case_id=case_id, keep_maps=True,
                               num_classes=num_classes, ignore_index=ignore_index)
            umap = ev.maps[name]
        except Exception:  # noqa: BLE001
            failed[f"measure {name}"] = traceback.format_exc()
            del measures[name]
            for key in [k for k in aggregations if k[0] == name]:
                del aggregations[key]
            continue
        for key in [k for k in aggregations if k[0] == name]:
            try:
                probe = copy.deepcopy(aggregations[key]).fit([umap], [prediction])
                aggregate(probe, umap, prediction)
            except Exception:  # noqa: BLE001
                failed[f"aggregation {key[1]} (measure {name})"] = traceback.format_exc()
                del aggregations[key]
    return failed


def _save_montage(path: Path, entries: list, measure_names: list, combo: Combination) -> None:
    if not entries:
        return
    arrays = {
        "image": np.stack([e["image"] for e in entries]).astype(np.float32),
        "raters": np.stack([e["raters"] for e in entries]).astype(np.uint8),
        "prediction": np.stack([e["prediction"] for e in entries]).astype(np.uint8),
        "case_ids": np.array([e["case_id"] for e in entries]),
        "ood": np.array([e["ood"] for e in entries]),
        "meta": np.array(json.dumps(combo.context)),
    }
    for m in measure_names:
        arrays[f"map__{m}"] = np.stack([e["maps"][m] for e in entries]).astype(np.float32)
    np.savez_compressed(path, **arrays)


def load_evaluation(folder: str | Path, combo: Combination, active_learning: ActiveLearningResult | None = None) -> EvaluationResult:
    """The stored output of :func:`run_evaluation` as the tasks' :class:`EvaluationResult`."""
    folder = Path(folder)
    raw = json.loads((folder / "calibration.json").read_text())
    calibration = {}
    for entry in raw:
        calibration[(entry["measure"], entry["subset"])] = metrics.CalibrationBins(
            np.asarray(entry["count"]), np.asarray(entry["confidence_sum"]), np.asarray(entry["correct_sum"]))
    retention = folder / "retention.parquet"
    return EvaluationResult(
        context=combo.context,
        cases=pd.read_parquet(folder / "cases.parquet"),
        scores=pd.read_parquet(folder / "scores.parquet"),
        ncc=pd.read_parquet(folder / "ncc.parquet"),
        calibration=calibration,
        measure_types={m: t for m, t in combo.measure_types().items() if t is not None},
        active_learning=active_learning,
        case_calibration=case_calibration.load(folder / case_calibration.FILE),
        retention=pd.read_parquet(retention) if retention.exists() else None,
    )


def case_dice(handles, dataset, case_ids: set[str], num_classes: int, ignore) -> dict[str, float]:
    """Per case of ``case_ids``, the eq. 3 Dice of the mean prediction against every rater."""
    values = {}
    for handle in handles:
        if handle.case_id not in case_ids:
            continue
        samples = handle.load()
        prediction = samples.mean(dim=0).argmax(dim=0).numpy()
        case = dataset.load(handle.case_id)
        values[handle.case_id] = float(metrics.mean_dice_over_raters(prediction, case.raters, num_classes=num_classes,
                                                                     ignore_index=ignore))
    if not values:
        raise ValueError("active learning: the test split has no OoD cases to measure the improvement on")
    return values
