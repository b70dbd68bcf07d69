"""The runner's side of the experiment trackers (:mod:`values_seg.components.tracker`): create the
configured ones before any work, and after the run log what is final and cached, in this process.

What each record holds and its key: docs/design-rationale.md, "Experiment trackers".
"""

from __future__ import annotations

import logging
import re
import time
import warnings
from pathlib import Path

import pandas as pd

from values_seg.storage import run_files
from values_seg.storage.canonical import sha256_json
from values_seg.engine import Checkpoints
from values_seg.config.experiment import Experiment
from values_seg.storage.redaction import redact
from values_seg.storage.cache_store import CacheStore
from values_seg.config.sweep import expand
from values_seg.components.tracker import Record, Tracker

log = logging.getLogger("values_seg.runner")

#: The report files attached to the sweep's record (relative to the run directory; globs).
REPORT_FILES = (run_files.REPORT, run_files.REPORT_HTML, run_files.RESULTS_CSV, f"{run_files.FIGURES}/*.png")


class TrackerWarning(UserWarning):
    """A tracker failed; the run and its results are not affected."""


def log_sweep(active: list[Tracker], cfg: Experiment, run_dir: Path, cache_dir: Path) -> None:
    """Log the sweep's new trainings and combinations to every tracker in ``active`` (see the module docstring)."""
    if not active:
        return
    run_dir = Path(run_dir)
    sweep = Record("sweep", str(cfg.name), sha256_json({"run_dir": str(run_dir.absolute()), "name": str(cfg.name)}),
                   params={"run_dir": str(run_dir.absolute()), "seeds": str(list(cfg.seeds))})
    records = _records(cfg, run_dir, cache_dir)
    for tracker in active:
        _guarded(tracker, lambda t=tracker: _log(t, sweep, records, run_dir))


def _log(tracker: Tracker, sweep: Record, records: list[Record], run_dir: Path) -> None:
    start = time.perf_counter()
    tracker.open(sweep)
    try:
        new = [r for r in records if not tracker.has(r)]
        for r in new:
            tracker.log(r)
        if new:
            files = sorted(p for pattern in REPORT_FILES for p in run_dir.glob(pattern) if p.is_file() and not p.is_symlink())
            for folder in sorted({f.parent for f in files}):  # the report's layout, so its links resolve
                rel = folder.relative_to(run_dir).as_posix()
                tracker.attach([f for f in files if f.parent == folder], "report" if rel == "." else f"report/{rel}")
        log.info("tracker %s: %d new record(s), %d already logged, in %.1f s", tracker.name, len(new),
                 len(records) - len(new), time.perf_counter() - start)
    finally:
        tracker.close()


def _guarded(tracker: Tracker, fn) -> None:
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - a tracker never fails a run
        message = redact(f"tracker {tracker.name} failed, nothing more is logged to it in this run: {type(e).__name__}: {e}")
        log.warning("%s", message)
        warnings.warn(message, TrackerWarning, stacklevel=2)


def _records(cfg: Experiment, run_dir: Path, cache_dir: Path) -> list[Record]:
    """The trainings with a checkpoint and the combinations with rows in ``results.csv``."""
    store = Checkpoints.of(CacheStore(cache_dir))
    results_path = run_dir / run_files.RESULTS_CSV
    results = pd.read_csv(results_path) if results_path.exists() else pd.DataFrame()
    combos = expand(cfg)
    out, seen = [], set()
    for combo in combos:
        for spec in combo.specs:
            meta = store.meta(spec)
            if meta is None or spec.key() in seen:
                continue
            seen.add(spec.key())
            out.append(_training(spec, meta))
    for combo in combos:
        rows = _rows(results, combo.context)
        if not rows.empty:
            out.append(_combination(combo, rows))
    return out


def _training(spec, meta: dict) -> Record:
    curve = meta.get("curve") or {}
    series = {"loss": [(e, float(v)) for e, v in enumerate(curve.get("epoch_loss", []), start=1)],
              "val_dice": [(int(e), float(v)) for e, v in curve.get("val_dice", [])]}
    params = _flat(spec.to_dict())
    metrics = {k: float(meta[k]) for k in ("final_loss", "train_seconds") if isinstance(meta.get(k), (int, float))}
    return Record("training", spec.describe(), spec.key(), params=params,
                  tags={"checkpoint_key": spec.key(), "values_seg.kind": "training"},
                  series={k: v for k, v in series.items() if v}, metrics=metrics)


def _combination(combo, rows: pd.DataFrame) -> Record:
    metrics: dict[str, float] = {}
    for r in rows.itertuples(index=False):
        name = metric_name(r)
        for suffix, value in (("", r.value), ("_ci_low", r.ci_low), ("_ci_high", r.ci_high)):
            if pd.notna(value):
                metrics[name + suffix] = float(value)
    key = sha256_json({"combination": combo.name, "rows": sorted(metrics.items())})
    params = {k: str(v) for k, v in combo.context.items()}
    params["trainings"] = " ".join(s.key()[:12] for s in combo.specs)
    return Record("combination", combo.name, key, params=params,
                  tags={"values_seg.kind": "combination"}, metrics=metrics)


def metric_name(row) -> str:
    """``task/metric/split/measure/aggregation/versus`` (the parts a row has), in the characters
    trackers accept."""
    parts = [row.task, row.metric, row.split, row.measure, row.aggregation, getattr(row, "versus", None)]
    text = "/".join(str(p) for p in parts if pd.notna(p) and str(p))
    return re.sub(r"[^A-Za-z0-9_\-./ ]", "_", text)


def _rows(results: pd.DataFrame, context: dict) -> pd.DataFrame:
    if results.empty:
        return results
    mask = pd.Series(True, index=results.index)
    for k, v in context.items():
        if k in results.columns:
            mask &= results[k].astype(str) == str(v)
    return results[mask]


def _flat(d: dict, prefix: str = "") -> dict[str, str]:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = str(v)[:500]
    return out
