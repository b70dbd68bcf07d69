"""Read a folder written by ``values-seg data gta-cityscapes prepare``, verifying what it reads.

Every frame's files are checked against the manifest (size and sha256) when they are read, so a
truncated or modified file is an error naming it rather than silently different data.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from values_seg_plugins.datasets._gta_cityscapes import manifest as mf
from values_seg_plugins.datasets._gta_cityscapes.layout import SOURCES
from values_seg_plugins.datasets._gta_cityscapes.splits import DATASET_SPLITS

PREPARE_HINT = "values-seg data gta-cityscapes prepare --gta-root DIR --cityscapes-root DIR --out DIR"


@dataclass(frozen=True)
class Frame:
    """One prepared frame: uint8 RGB image ``[256, 478, 3]`` and training ids ``[256, 478]``."""

    case_id: str
    image: np.ndarray
    train_ids: np.ndarray
    entry: dict


class PreparedFolder:
    """The manifest and splits of a prepared folder, and verified reads of its frames."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        where = f"GTA5/Cityscapes data {self.root.absolute()}"
        if not self.root.is_dir():
            raise FileNotFoundError(f"{where}: no such folder; prepare it with: {PREPARE_HINT}")
        manifest = mf.load_manifest(self.root)
        if manifest is None:
            unfinished = (self.root / mf.JOURNAL).exists()
            raise FileNotFoundError(
                f"{where}: no {mf.MANIFEST} ("
                + ("the preparation did not finish; rerun it to resume" if unfinished else "not a prepared folder")
                + f"): {PREPARE_HINT}"
            )
        self.entries: dict[str, dict] = manifest["cases"]
        splits_path = self.root / mf.SPLITS
        if not splits_path.exists():
            raise FileNotFoundError(f"{where}: no {mf.SPLITS}; rerun: {PREPARE_HINT}")
        saved = json.loads(splits_path.read_text(encoding="utf-8"))
        self.split_seed = int(saved["seed"])
        self.parts: dict[str, list[str]] = saved["splits"]
        expected = {p for parts in DATASET_SPLITS.values() for p in parts}
        if set(self.parts) != expected:
            raise ValueError(f"{splits_path}: expected the parts {sorted(expected)}, got {sorted(self.parts)}")
        unknown = [c for ids in self.parts.values() for c in ids if c not in self.entries]
        if unknown:
            raise ValueError(f"{splits_path}: {len(unknown)} case(s) are not in {mf.MANIFEST}, e.g. {unknown[0]!r}; "
                             f"rerun: {PREPARE_HINT}")
        for source in SOURCES:
            if not any(e["source"] == source for e in self.entries.values()):
                raise ValueError(f"{where}: no {source} frames in {mf.MANIFEST}; both data sets are needed")

    def _read(self, case_id: str, key: str) -> np.ndarray:
        rec = self.entries[case_id]["outputs"][key]
        path = self.root / rec["path"]
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise FileNotFoundError(f"case {case_id!r}: {path} is missing; rerun: {PREPARE_HINT}") from None
        if len(data) != rec["size"] or hashlib.sha256(data).hexdigest() != rec["sha256"]:
            raise ValueError(f"case {case_id!r}: {path} differs from {mf.MANIFEST} (size {len(data)}, expected "
                             f"{rec['size']}; truncated or modified); rerun the preparation to redo it: {PREPARE_HINT}")
        return np.asarray(Image.open(io.BytesIO(data)))

    def read(self, case_id: str) -> Frame:
        if case_id not in self.entries:
            raise KeyError(f"{self.root}: no case {case_id!r}")
        return Frame(case_id, self._read(case_id, "image"), self._read(case_id, "label"), self.entries[case_id])
