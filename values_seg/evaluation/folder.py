"""The folder of one combination's evaluation, a folder the store writes whole with its manifest
(``done.json``: every file's integrity record, written last; :func:`values_seg.storage.cache_store.write_folder`),
reused only when complete and intact, verified when read, set aside (``*.corrupt``) when damaged;
and read back as the tasks' :class:`EvaluationResult`."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from values_seg.storage import cache_store
from values_seg.storage.failure_record import cause_of
from values_seg.components.quantity import resolve
from values_seg.storage.run_files import EVALUATION_CASES, EVALUATION_FITTED, EVALUATION_PER_MEASURE, EVALUATION_SCORES
from values_seg.storage.run_files import EVALUATION_MANIFEST as MANIFEST
from values_seg.config.sweep import Combination
from values_seg.components.task import EvaluationResult

WHAT = "evaluation"


def payload_file(quantity: str, file: str) -> str:
    """The folder's name of a payload quantity's file."""
    return f"{quantity}.{file}"


def parquet(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.reset_index(drop=True).to_parquet(buf)
    return buf.getvalue()


def write(out: Path, outputs: dict[str, bytes], info: dict) -> None:
    """Write the outputs as one folder (:func:`values_seg.storage.cache_store.write_folder`), complete when no
    component or case failed."""
    failed = json.loads(outputs[EVALUATION_FITTED]).get("failed", {})
    cache_store.write_folder(out, outputs, info, MANIFEST, complete=not failed)


def set_aside(folder: Path, problem: str) -> None:
    """Report a damaged evaluation folder with its path and move it out of the way (``*.corrupt``)."""
    cache_store.set_folder_aside(folder, WHAT, problem)


def reusable(folder: Path) -> bool:
    """Whether ``folder`` holds a complete evaluation without failures whose files have the
    recorded sizes (their hashes are checked when read); a damaged one is set aside."""
    return cache_store.folder_reusable(folder, WHAT, MANIFEST)


def verify(folder: str | Path) -> None:
    """Check every file of an evaluation folder against its manifest; :class:`~values_seg.storage.cache_store.CorruptFileError`
    naming the file otherwise."""
    _read_all(Path(folder))


def _read_all(folder: Path) -> dict[str, bytes]:
    return cache_store.read_folder(folder, WHAT, MANIFEST)


def montage_bytes(entries: list, measure_names: list, combo: Combination) -> bytes:
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


def failures(folder: str | Path) -> dict[str, tuple[str, str]]:
    """The components and cases that failed in an evaluation (``"measure X"`` / ``"aggregation A
    (measure X)"`` / ``"case <split>/<id>"`` -> (its cause in one line, its traceback or error))."""
    fitted = json.loads(_read_all(Path(folder))[EVALUATION_FITTED])
    causes = fitted.get("causes", {})
    return {what: (causes.get(what) or cause_of(error), error) for what, error in fitted.get("failed", {}).items()}


def load_evaluation(folder: str | Path, combo: Combination, stages: dict[str, Any] | None = None) -> EvaluationResult:
    """The stored output of an evaluation as the tasks' :class:`EvaluationResult`, every file
    verified against the folder's manifest; ``stages``: the stages' results for this combination."""
    files = _read_all(Path(folder))
    fitted = json.loads(files[EVALUATION_FITTED])
    live = set(fitted["measures"])  # without the measures that failed
    outputs = {}
    for name, quantity in resolve(fitted.get("quantities", [])).items():
        if quantity.payload:
            prefix = payload_file(name, "")
            outputs[name] = quantity.load({f[len(prefix):]: data for f, data in files.items() if f.startswith(prefix)})
    return EvaluationResult(
        context=combo.context,
        cases=pd.read_parquet(io.BytesIO(files[EVALUATION_CASES])),
        scores=pd.read_parquet(io.BytesIO(files[EVALUATION_SCORES])),
        per_measure=pd.read_parquet(io.BytesIO(files[EVALUATION_PER_MEASURE])),
        outputs=outputs,
        measure_types={m: t for m, t in combo.measure_types().items() if t is not None and m in live},
        stages=dict(stages or {}),
    )
