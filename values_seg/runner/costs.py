"""The run directory's cost table (``costs.csv``): one row per combination with its trainings' cost and
its inference cost per test case, read from the sidecars of its checkpoints and predictions in the
cache, never measured here (docs/design-rationale.md, "Cost").
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd

from values_seg.components.settings import EvaluationSettings
from values_seg.config.sweep import Combination
from values_seg.engine import derived
from values_seg.engine.checkpoints import Checkpoints
from values_seg.engine.inference import prediction_key
from values_seg.engine.predictions import PredictionCache
from values_seg.engine.costs import KEY
from values_seg.runner.results import CONTEXT
from values_seg.storage import run_directory
from values_seg.storage.cache_store import CacheStore, read_sidecar
from values_seg.storage.run_files import COSTS

#: the split whose cases' inference cost the table gives
SPLIT = "test"
COLUMNS = CONTEXT + ["trainings", "steps", "train_seconds", "train_device", "forward_passes", "flops_per_case",
                     "inference_seconds_per_case", "peak_memory_bytes", "inference_device", "measured_cases"]


def training_cost(combo: Combination, checkpoints: Checkpoints) -> dict:
    """What the combination's trainings cost as their checkpoints recorded it: how many, their optimizer
    steps, their seconds (a fused group's wall time shared equally among its members) and devices;
    steps and seconds empty where a checkpoint records none (or there is no training of values-seg's)."""
    metas = [read_sidecar(checkpoints.path(s)) or {} for s in combo.specs]
    steps = [m.get("steps") for m in metas]
    seconds = [m["train_seconds"] / max(int(m.get("fused_group") or 1), 1) for m in metas
               if m.get("train_seconds") is not None]
    known = bool(metas) and all(s is not None for s in steps) and len(seconds) == len(metas)
    return {"trainings": len(combo.specs), "steps": int(sum(steps)) if known else None,
            "train_seconds": round(sum(seconds), 3) if known else None,
            "train_device": ",".join(sorted({str(m["device"]) for m in metas if m.get("device")}))}


def inference_cost(records: Iterable[Mapping]) -> dict:
    """The cost per case of a prediction from its cases' cost records (:mod:`values_seg.engine.costs`):
    the mean forward passes, the median seconds (robust to a busy machine's stalls), the FLOPs counted
    (once per prediction), the largest peak memory and the devices; empty where no case has a record
    (e.g. samples cached before costs were kept)."""
    found = [r for r in records if isinstance(r, Mapping)]
    if not found:
        return {"forward_passes": None, "flops_per_case": None, "inference_seconds_per_case": None,
                "peak_memory_bytes": None, "inference_device": "", "measured_cases": 0}

    def mean(key):
        values = [float(r[key]) for r in found if r.get(key) is not None]
        return sum(values) / len(values) if values else None

    seconds = sorted(float(r["seconds"]) for r in found if r.get("seconds") is not None)
    median = (seconds[(len(seconds) - 1) // 2] + seconds[len(seconds) // 2]) / 2 if seconds else None
    passes, flops = mean("forward_passes"), mean("flops")
    peaks = [int(r["peak_memory_bytes"]) for r in found if r.get("peak_memory_bytes") is not None]
    return {"forward_passes": None if passes is None else round(passes, 3),
            "flops_per_case": None if flops is None else int(round(flops)),
            "inference_seconds_per_case": _round(median), "peak_memory_bytes": max(peaks) if peaks else None,
            "inference_device": ",".join(sorted({str(r["device"]) for r in found if r.get("device")})),
            "measured_cases": len(found)}


#: the cost counts that results.csv carries beside every row of a combination, as ``cost_<name>``:
#: those the config determines (the clocks' readings, memory and devices vary from run to run and
#: stay in costs.csv, so that the same config and seed give the same results.csv everywhere)
RESULT_COSTS = ("trainings", "steps", "forward_passes", "flops_per_case")


def result_columns(rows: list[dict]) -> pd.DataFrame:
    """Per combination (its context), the :data:`RESULT_COSTS` named ``cost_<name>``, as integers
    (empty where unknown); for :func:`values_seg.runner.results.write_tables` to join on the context."""
    frame = pd.DataFrame(rows, columns=COLUMNS)[CONTEXT + list(RESULT_COSTS)].drop_duplicates(CONTEXT)
    for c in RESULT_COSTS:
        frame[c] = pd.to_numeric(frame[c], errors="coerce").round().astype("Int64")
    return frame.rename(columns={c: f"cost_{c}" for c in RESULT_COSTS})


def _round(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.4g}")


def cost_rows(combos: Iterable[Combination], cache_dir: str | Path, settings: Mapping | None) -> list[dict]:
    """One row per combination: its context, :func:`training_cost` and :func:`inference_cost` of its
    test cases' cached predictions (the evaluation's prediction key, dtype and threads); a derived model
    (:mod:`values_seg.engine.derived`) those of the model it wraps, its transform of the samples not measured."""
    settings = EvaluationSettings.of(settings)
    store = CacheStore(Path(cache_dir))
    checkpoints, cache = Checkpoints.of(store), PredictionCache.of(store, settings.prediction_dtype)
    datasets: dict = {}
    rows = []
    for combo in combos:
        if combo.dataset not in datasets:
            datasets[combo.dataset] = combo.dataset.create()
        ds, dkey = datasets[combo.dataset], combo.dataset.key()
        model = combo.model.create()
        while (wrapped := derived.wrapped_model(model)) is not None:
            model = wrapped
        pkey = prediction_key(model, combo.specs, settings.threads)
        records = [(read_sidecar(cache.path(pkey, dkey, SPLIT, cid)) or {}).get(KEY) for cid in ds.case_ids(SPLIT)]
        rows.append({**combo.context, **training_cost(combo, checkpoints), **inference_cost(records)})
    return rows


def write_costs(run_dir: Path, rows: list[dict]) -> Path:
    """Write ``costs.csv`` (one row per combination, sorted by its context) and record it."""
    table = pd.DataFrame(rows, columns=COLUMNS).sort_values(CONTEXT, kind="stable")
    path = Path(run_dir) / COSTS
    run_directory.write_owned(path.parent, path, lambda tmp: table.to_csv(tmp, index=False))
    run_directory.record(run_dir, [path])
    return path
