"""The prepared folder's records: manifest, progress journal, atomic writes, verification
(docs/design-rationale.md, "GTA5 → Cityscapes", the prepared folder's records).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterable

from values_seg.storage import atomic

KIND = "values-seg gta_cityscapes prepared data"
FORMAT = 1
MANIFEST = "manifest.json"
JOURNAL = "progress.jsonl"
SPLITS = "splits.json"
PROBLEMS = "problems.txt"
PREVIEW = "preview.png"


def preprocessing_key() -> str:
    """sha256 of what determines a prepared frame (format, crop, scale factor, label table)."""
    from values_seg_plugins.datasets._gta_cityscapes import labels, transform

    what = {"format": FORMAT, "crop": list(transform.CROP), "factor": transform.FACTOR,
            "label_table": labels.table().lut.tolist()}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def write_json_atomic(path: Path, obj) -> None:
    atomic.write(path, (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode(), fsync=True)


def file_digest(path: Path) -> tuple[int, str] | None:
    """``(size, sha256)`` of a file, or None if it is missing."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    return len(data), hashlib.sha256(data).hexdigest()


def outputs_intact(entry: dict, root: Path) -> bool:
    """Whether every output file of ``entry`` exists with its recorded size and sha256."""
    for out in entry["outputs"].values():
        if file_digest(root / out["path"]) != (out["size"], out["sha256"]):
            return False
    return True


def sources_unchanged(entry: dict, image: Path, label: Path) -> bool:
    """Whether the entry's source files are the given ones, with the recorded size and mtime."""
    for key, path in (("image", image), ("label", label)):
        rec = entry["sources"][key]
        try:
            stat = Path(path).stat()
        except FileNotFoundError:
            return False
        if rec["path"] != str(path) or rec["size"] != stat.st_size or rec["mtime_ns"] != stat.st_mtime_ns:
            return False
    return True


class Journal:
    """Append-only record of finished frames (one JSON object a line)."""

    def __init__(self, path: Path, key: str):
        self.path = Path(path)
        fresh = not self.path.exists()
        self._file = open(self.path, "a", encoding="utf-8")
        if fresh:
            self._write({"kind": KIND, "format": FORMAT, "preprocessing_key": key})

    def _write(self, obj) -> None:
        self._file.write(json.dumps(obj, sort_keys=True) + "\n")
        self._file.flush()

    def add(self, entry: dict) -> None:
        self._write(entry)

    def close(self) -> None:
        self._file.close()


def journal_key(path: Path) -> str | None:
    """The preprocessing key in a journal's header (None: no journal, or not one of ours)."""
    try:
        first = Path(path).read_text(encoding="utf-8").split("\n", 1)[0]
        header = json.loads(first)
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return header.get("preprocessing_key") if isinstance(header, dict) and header.get("kind") == KIND else None


def _journal_entries(path: Path, key: str) -> Iterable[dict]:
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    entries = []
    for i, line in enumerate(lines):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:  # the line being written when the run was killed
                break
            raise ValueError(f"{path}: line {i + 1} is not JSON; delete the file to redo those frames") from None
        if i == 0:
            if obj.get("kind") != KIND or obj.get("preprocessing_key") != key:
                return []  # another preprocessing: nothing in it can be kept
            continue
        entries.append(obj)
    return entries


def load_manifest(root: Path) -> dict | None:
    """The manifest of a prepared folder, or None if there is none; raises if it is not ours."""
    path = Path(root) / MANIFEST
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e}); rerun the preparation") from None
    if not isinstance(manifest, dict) or manifest.get("kind") != KIND:
        raise ValueError(f"{path}: not a values-seg GTA5/Cityscapes manifest")
    return manifest


def previous_entries(root: Path, key: str) -> dict[str, dict]:
    """Entries of earlier runs (manifest, then journal) made with preprocessing ``key``."""
    entries: dict[str, dict] = {}
    manifest = load_manifest(root)
    if manifest is not None and manifest.get("preprocessing_key") == key:
        entries.update(manifest["cases"])
    for entry in _journal_entries(Path(root) / JOURNAL, key):
        entries[entry["case_id"]] = entry
    return entries


def is_ours(root: Path) -> bool:
    """Whether ``root`` holds a manifest or journal of ours (so we may write into it)."""
    root = Path(root)
    if load_manifest(root) is not None:
        return True
    return journal_key(root / JOURNAL) is not None
