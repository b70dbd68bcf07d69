"""The folder of one combination's evaluation: written atomically with a manifest (``done.json``: every
file's sha256 and size, written last), reused only when complete and intact, verified when read,
set aside (``*.corrupt``) when damaged; and read back as the tasks' :class:`EvaluationResult`."""

from __future__ import annotations

import io
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from values_seg import checked_files
from values_seg.checked_files import entry, replacing
from values_seg.engine import CorruptFileError
from values_seg.quantity import resolve
from values_seg.run_files import EVALUATION_CASES, EVALUATION_FITTED, EVALUATION_PER_MEASURE, EVALUATION_SCORES
from values_seg.run_files import EVALUATION_MANIFEST as MANIFEST
from values_seg.sweep import Combination
from values_seg.task import EvaluationResult

log = logging.getLogger("values_seg.runner")


def payload_file(quantity: str, file: str) -> str:
    """The folder's name of a payload quantity's file."""
    return f"{quantity}.{file}"


def parquet(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.reset_index(drop=True).to_parquet(buf)
    return buf.getvalue()


def write(out: Path, outputs: dict[str, bytes], info: dict) -> None:
    """Write the outputs into a fresh folder, ``done.json`` (every file's sha256 and size) last,
    and move it into place atomically."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with replacing(out) as tmp:  # removed if anything fails, Ctrl-C included
        tmp.mkdir()
        files = {}
        for name, data in outputs.items():
            (tmp / name).write_bytes(data)
            files[name] = entry(data)
        failed = json.loads(outputs[EVALUATION_FITTED]).get("failed", {})
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
    checked_files.set_aside(folder)


def reusable(folder: Path) -> bool:
    """Whether ``folder`` holds a complete evaluation without failures whose files have the
    recorded sizes (their hashes are checked when read); a damaged one is set aside."""
    if not folder.exists():
        return False
    manifest = _manifest(folder)
    wrong = None
    if manifest is None:
        wrong = f"{MANIFEST} is missing or unreadable"
    else:
        for name, record in manifest["files"].items():
            path = folder / name
            if not path.exists() or checked_files.problem(record, size=path.stat().st_size) is not None:
                wrong = f"{name} is missing or has the wrong size"
                break
    if wrong is not None:
        set_aside(folder, wrong)
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
    for name, record in manifest["files"].items():
        path = folder / name
        try:
            data = path.read_bytes()
        except OSError as e:
            raise CorruptFileError(f"evaluation file {path} cannot be read: {e}") from e
        wrong = checked_files.problem(record, data=data)
        if wrong is not None:
            raise CorruptFileError(f"evaluation file {path} does not match its recorded sha256 and size "
                                   f"(changed or damaged: {wrong})")
        out[name] = data
    return out


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


def failures(folder: str | Path) -> dict[str, str]:
    """The components and cases that failed in an evaluation (``"measure X"`` / ``"aggregation A
    (measure X)"`` / ``"case <split>/<id>"`` -> traceback or error)."""
    return json.loads(_read_all(Path(folder))[EVALUATION_FITTED]).get("failed", {})


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
