"""The evaluation stage of one combination: fit on validation, one streaming pass over test (and pool).

1. Validation split: per measure, a histogram of (uncertainty, correct) pixels fits Platt
   scaling (appendix A.5), and aggregations that learn something (threshold, appendix F.2) are
   fitted on the validation maps and predictions.
2. Test split: :func:`values_seg.evaluation.evaluate_case` per case, one case in memory; per-case
   rows, calibration bins summed per measure and subset (i.i.d./OoD) and kept per case at a
   finer resolution (for the bootstrap and the ACE reference), with the "retention" stage the
   per-case nDSC and nDSC R-AUC, a few maps kept for the montage figure.
3. Pool split (active learning): the aggregated scores that rank the unlabeled cases.

Failures are contained at the finest grain: a measure or aggregation that raises or returns
non-finite values on any case is dropped with all its rows and recorded (component and case
named); the other components of the combination complete. A case that cannot be loaded,
predicted or evaluated (a ``ValueError``: e.g. NaN voxels, invalid samples) is left out and
recorded (``case <split>/<id>``); the other cases complete.

Outputs go to one folder keyed by a hash of everything that determines them: the combination's
config, the evaluation settings, the prediction key and the code of the measures, aggregations,
dataset and evaluation stage (:mod:`values_seg.provenance`). ``done.json``, written last, lists
every file with its sha256 and size; a folder is reused only when it is complete, had no failure
(failures are never cached as results) and its files match; it is verified again when read. A
damaged folder is reported with its path, set aside (``*.corrupt``) and recomputed.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import shutil
import traceback
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from values_seg import metrics
from values_seg.aggregation import Aggregation
from values_seg.checked_files import replacing
from values_seg.engine import CheckpointStore, CorruptFileError, PredictionCache, predict_split, prediction_key
from values_seg.engine.device import fixed_threads
from values_seg.engine.specs import sha256_json
from values_seg.evaluation import ComponentError, UncertaintyHistogram, class_argmax, evaluate_case
from values_seg.provenance import code_digest
from values_seg.runner import case_calibration
from values_seg.sweep import Combination
from values_seg.task import RETENTION_COLUMNS, ActiveLearningResult, EvaluationResult

log = logging.getLogger("values_seg.runner")

EVALUATION_VERSION = 5  # bump when the stored evaluation changes
MANIFEST = "done.json"
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
    components = [m.component().obj for m, _ in combo.measures] + [a.component().obj for a in combo.aggregations]
    return sha256_json({
        "version": EVALUATION_VERSION,
        "prediction": prediction_key(model, combo.specs, eval_cfg.get("threads", 1)),
        "dataset": combo.dataset.key(),
        "measures": [(m.label, m.to_dict()) for m, _ in combo.measures],
        "aggregations": [(a.label, a.to_dict()) for a in combo.aggregations],
        "evaluation": eval_cfg,
        "calibration_resolution": FINE_BINS,
        "stages": sorted(stages),
        "code": code_digest(combo.dataset.component().obj, *components, stage="evaluation"),
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
    out = evaluation_folder(combo, cache_dir, eval_cfg, stages)
    if reusable(out):
        return str(out)
    with fixed_threads(eval_cfg.get("threads", 1)):
        outputs = _evaluate(combo, Path(cache_dir), eval_cfg, stages, pool_split, device, progress)
    _write(out, outputs, {"combination": combo.name, "key": out.name})
    return str(out)


def evaluation_folder(combo: Combination, cache_dir: str | Path, eval_cfg: dict, stages: Iterable[str]) -> Path:
    """Where the evaluation of ``combo`` with these settings is (or will be) cached."""
    return Path(cache_dir) / "evaluations" / evaluation_key(combo, eval_cfg, set(stages))


def _evaluate(combo: Combination, cache_dir: Path, eval_cfg: dict, stages: set, pool_split: str, device,
              progress: bool) -> dict[str, bytes]:
    with_pool, with_calibration = "active_learning" in stages, "calibration" in stages
    threads = eval_cfg.get("threads", 1)
    store = CheckpointStore(cache_dir / "checkpoints")
    cache = PredictionCache(cache_dir / "predictions", dtype=eval_cfg.get("prediction_dtype", "float16"))
    model = combo.model.create()
    dataset = combo.dataset.create()
    measures = {m.label: m.create() for m, _ in combo.measures}
    live = LiveComponents(measures, {(m, a.label): a.create() for m in measures for a in combo.aggregations})
    n_bins = int(eval_cfg.get("n_bins", 20))
    common = {"num_classes": dataset.num_classes, "ignore_index": dataset.ignore_index,
              "background": dataset.background}

    def cases(split: str) -> Iterable:
        """(case id, case, samples) of the split; a case that fails to load or predict loses only itself."""
        bad: dict[str, str] = {}
        handles = predict_split(model, combo.specs, store, combo.dataset, split, cache, device=device,
                                progress=progress, threads=threads, failed=bad)
        for case_id, error in bad.items():
            live.drop_case(split, case_id, error)
        for handle in handles:
            try:
                loaded = handle.case_id, dataset.load(handle.case_id), handle.load()
            except ValueError as e:
                live.drop_case(split, handle.case_id, f"{type(e).__name__}: {e}")
                continue
            yield loaded

    # 1. validation: Platt scaling and fitted aggregations
    needs_maps = any(_fits(agg) for agg in live.aggregations.values())
    histograms = {m: UncertaintyHistogram() for m in measures}
    val_maps: dict[str, list] = {m: [] for m in measures}
    val_predictions = []
    for case_id, case, samples in cases("val"):  # each case read once
        ev = live.evaluate(samples, case.raters, aggregate=False, case_id=case_id, collect_histograms=with_calibration,
                           keep_maps=needs_maps, reference_variance=case.reference_variance, split="val", **common)
        if ev is None:
            continue
        for m in live.measures:
            if with_calibration:
                histograms[m] = histograms[m] + ev.histograms[m]
            if needs_maps:
                val_maps[m].append(ev.maps[m])
        if needs_maps:
            val_predictions.append(ev.prediction)
    platt = {}
    for m in list(live.measures) if with_calibration else []:
        try:
            platt[m] = histograms[m].platt_fit()
        except Exception:  # noqa: BLE001 - e.g. a map without any spread
            live.drop_measure(m, f"Platt scaling on the validation split failed:\n{traceback.format_exc()}")
    for (m, a), agg in list(live.aggregations.items()):
        if _fits(agg):
            try:
                agg.fit(val_maps[m], val_predictions)
            except Exception:  # noqa: BLE001
                live.drop_aggregation(m, a, f"fit on the validation split failed:\n{traceback.format_exc()}")
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
        ev = live.evaluate(samples, case.raters, case_id=case_id, platt={m: platt[m] for m in live.measures if m in platt},
                           n_bins=n_bins * FINE_BINS, keep_maps=want_maps, reference_variance=case.reference_variance,
                           ndsc_r=ndsc_r, **common)
        if ev is None:
            continue
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
                "maps": {m: ev.maps[m].numpy()[where] for m in live.measures},
            })

    # 3. pool: scores that rank the unlabeled cases for active learning
    if with_pool:
        for case_id, case, samples in cases(pool_split):
            ev = live.evaluate(samples, case.raters, case_id=case_id, reference_variance=case.reference_variance,
                               split=pool_split, **common)
            if ev is None:
                continue
            case_rows.append(_case_row(case_id, "pool", case.meta, ev))
            score_rows += [(case_id, "pool", m, a, s) for (m, a), s in ev.scores.items()]

    # a component dropped mid-stream loses the rows of the cases before too
    scores = pd.DataFrame(score_rows, columns=["case_id", "split", "measure", "aggregation", "score"])
    scores = scores[[k in live.aggregations for k in zip(scores["measure"], scores["aggregation"])]]
    ncc = pd.DataFrame(ncc_rows, columns=["case_id", "split", "measure", "ncc"])
    ncc = ncc[ncc["measure"].isin(list(live.measures))]
    retention = pd.DataFrame(retention_rows, columns=list(RETENTION_COLUMNS))
    retention = retention[retention["measure"].isin(list(live.measures))]
    bins = [{"measure": m, "subset": s, "count": b.count.tolist(), "confidence_sum": b.confidence_sum.tolist(),
             "correct_sum": b.correct_sum.tolist()} for (m, s), b in calibration.items()
            if b.count.sum() and m in live.measures]
    fitted = {"measures": list(live.measures), "platt": {m: p for m, p in platt.items() if m in live.measures},
              "aggregations": [{"measure": m, "aggregation": a, "state": agg.state()}
                               for (m, a), agg in live.aggregations.items()],
              "failed": live.failed}
    outputs = {"cases.parquet": _parquet(pd.DataFrame(case_rows)), "scores.parquet": _parquet(scores),
               "ncc.parquet": _parquet(ncc), "calibration.json": json.dumps(bins).encode(),
               "fitted.json": json.dumps(fitted, default=float).encode()}
    if ndsc_r is not None:
        outputs["retention.parquet"] = _parquet(retention)
    case_bins = {(c, m): b for (c, m), b in case_bins.items() if m in live.measures}
    if case_bins:
        outputs[case_calibration.FILE] = case_calibration.to_bytes(case_bins)
    entries = [{**e, "maps": {m: v for m, v in e["maps"].items() if m in live.measures}}
               for e in montage["iid"] + montage["ood"]]
    if entries:
        outputs["montage.npz"] = _montage_bytes(entries, list(live.measures), combo)
    return outputs


def _parquet(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.reset_index(drop=True).to_parquet(buf)
    return buf.getvalue()


def _write(out: Path, outputs: dict[str, bytes], info: dict) -> None:
    """Write the outputs into a fresh folder, ``done.json`` (every file's sha256 and size) last,
    and move it into place atomically."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with replacing(out) as tmp:  # removed if anything fails, Ctrl-C included
        tmp.mkdir()
        files = {}
        for name, data in outputs.items():
            (tmp / name).write_bytes(data)
            files[name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        failed = json.loads(outputs["fitted.json"]).get("failed", {})
        (tmp / MANIFEST).write_text(json.dumps({**info, "files": files, "complete": not failed}, sort_keys=True))
        if out.exists():  # an earlier incomplete or damaged write
            shutil.rmtree(out)


def _manifest(folder: Path) -> dict | None:
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and isinstance(manifest.get("files"), dict) else None


def set_aside(folder: Path, problem: str) -> None:
    """Report a damaged evaluation folder with its path and move it out of the way (``*.corrupt``)."""
    log.warning("corrupt evaluation %s: %s; set aside as *.corrupt and recomputing", folder, problem)
    target = folder.with_name(folder.name + ".corrupt")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(folder, target)


def reusable(folder: Path) -> bool:
    """Whether ``folder`` holds a complete evaluation without failures whose files have the
    recorded sizes (their hashes are checked when read); a damaged one is set aside."""
    if not folder.exists():
        return False
    manifest = _manifest(folder)
    problem = None
    if manifest is None:
        problem = f"{MANIFEST} is missing or unreadable"
    else:
        for name, meta in manifest["files"].items():
            path = folder / name
            if not path.exists() or path.stat().st_size != meta.get("size"):
                problem = f"{name} is missing or has the wrong size"
                break
    if problem is not None:
        set_aside(folder, problem)
        return False
    return bool(manifest.get("complete"))


def verify(folder: str | Path) -> None:
    """Check every file of an evaluation folder against its manifest; :class:`CorruptFileError`
    naming the file otherwise."""
    _read_all(Path(folder))


def _read_all(folder: Path) -> dict[str, bytes]:
    manifest = _manifest(folder)
    if manifest is None:
        raise CorruptFileError(f"evaluation {folder}: {MANIFEST} is missing or unreadable")
    out = {}
    for name, meta in manifest["files"].items():
        path = folder / name
        try:
            data = path.read_bytes()
        except OSError as e:
            raise CorruptFileError(f"evaluation file {path} cannot be read: {e}") from e
        if hashlib.sha256(data).hexdigest() != meta.get("sha256"):
            raise CorruptFileError(f"evaluation file {path} does not match its recorded sha256 (changed or damaged)")
        out[name] = data
    return out


def _montage_bytes(entries: list, measure_names: list, combo: Combination) -> bytes:
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
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def failures(folder: str | Path) -> dict[str, str]:
    """The components and cases that failed in an evaluation (``"measure X"`` / ``"aggregation A
    (measure X)"`` / ``"case <split>/<id>"`` -> traceback or error)."""
    return json.loads(_read_all(Path(folder))["fitted.json"]).get("failed", {})


def load_evaluation(folder: str | Path, combo: Combination, active_learning: ActiveLearningResult | None = None) -> EvaluationResult:
    """The stored output of :func:`run_evaluation` as the tasks' :class:`EvaluationResult`, every
    file verified against the folder's manifest."""
    files = _read_all(Path(folder))
    calibration = {}
    for entry in json.loads(files["calibration.json"]):
        calibration[(entry["measure"], entry["subset"])] = metrics.CalibrationBins(
            np.asarray(entry["count"]), np.asarray(entry["confidence_sum"]), np.asarray(entry["correct_sum"]))
    live = set(json.loads(files["fitted.json"])["measures"])  # without the measures that failed
    retention = files.get("retention.parquet")
    return EvaluationResult(
        context=combo.context,
        cases=pd.read_parquet(io.BytesIO(files["cases.parquet"])),
        scores=pd.read_parquet(io.BytesIO(files["scores.parquet"])),
        ncc=pd.read_parquet(io.BytesIO(files["ncc.parquet"])),
        calibration=calibration,
        measure_types={m: t for m, t in combo.measure_types().items() if t is not None and m in live},
        active_learning=active_learning,
        case_calibration=case_calibration.from_bytes(files.get(case_calibration.FILE)),
        retention=None if retention is None else pd.read_parquet(io.BytesIO(retention)),
    )


def case_dice(handles, dataset, case_ids: set[str], num_classes: int, ignore) -> dict[str, float]:
    """Per case of ``case_ids``, the eq. 3 Dice of the mean prediction against every rater."""
    values = {}
    for handle in handles:
        if handle.case_id not in case_ids:
            continue
        samples = handle.load()
        prediction = class_argmax(samples.mean(dim=0), dim=0).numpy()
        case = dataset.load(handle.case_id)
        values[handle.case_id] = float(metrics.mean_dice_over_raters(
            prediction, case.raters, num_classes=num_classes, ignore_index=ignore, background=dataset.background))
    if not values:
        raise ValueError("active learning: the test split has no OoD cases to measure the improvement on")
    return values
