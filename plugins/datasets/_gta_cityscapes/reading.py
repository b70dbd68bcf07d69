"""Decode and check the source PNGs; every error names the file and what is wrong
(docs/design-rationale.md, "GTA5 → Cityscapes", reading).
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from values_seg_plugins.datasets._gta_cityscapes import labels as cs_labels


class SourceFileError(ValueError):
    """A source file that cannot be used (unreadable, wrong mode or palette, unknown label ids)."""


@dataclass(frozen=True)
class FileRecord:
    """What identifies a file: path, size, modification time and sha256 of its bytes."""

    path: str
    size: int
    mtime_ns: int
    sha256: str

    def to_dict(self) -> dict:
        return {"path": self.path, "size": self.size, "mtime_ns": self.mtime_ns, "sha256": self.sha256}


def read_bytes(path: Path) -> tuple[bytes, FileRecord]:
    """The file's bytes and its record (one read)."""
    path = Path(path)
    stat = path.stat()
    data = path.read_bytes()
    return data, FileRecord(str(path), len(data), stat.st_mtime_ns, hashlib.sha256(data).hexdigest())


def _open(data: bytes, path: Path) -> Image.Image:
    try:
        im = Image.open(io.BytesIO(data))
        im.load()
    except Exception as e:  # noqa: BLE001 - PIL raises many types for broken files
        raise SourceFileError(f"{path}: not a readable PNG ({type(e).__name__}: {e})") from None
    if im.format != "PNG":
        raise SourceFileError(f"{path}: expected a PNG file, got {im.format}")
    return im


def decode_image(data: bytes, path: Path) -> np.ndarray:
    """An RGB frame as uint8 ``[H, W, 3]``."""
    im = _open(data, path)
    if im.mode == "RGBA":
        im = im.convert("RGB")
    if im.mode != "RGB":
        raise SourceFileError(f"{path}: expected an RGB image, got PIL mode {im.mode!r}")
    return np.asarray(im)


def decode_gta5_label(data: bytes, path: Path) -> np.ndarray:
    """A GTA5 label map as uint8 label ids ``[H, W]``: the palette indices."""
    im = _open(data, path)
    if im.mode != "P":
        raise SourceFileError(
            f"{path}: expected a palette ('P') PNG whose indices are Cityscapes label ids (GTA5's format), "
            f"got PIL mode {im.mode!r}"
        )
    ids = np.asarray(im)
    cs_labels.check_known(ids, str(path))
    palette = np.asarray(im.getpalette() or [], dtype=np.uint8).reshape(-1, 3)
    table = cs_labels.table()
    for i in cs_labels.present_ids(ids).tolist():
        expected = table.id_colors.get(i)
        got = tuple(int(v) for v in palette[i]) if i < len(palette) else None
        if expected is not None and got != expected:
            raise SourceFileError(
                f"{path}: palette index {i} is {got}, not the Cityscapes colour {expected} of label id {i} "
                f"({table.id_names[i]}); not a GTA5 label map"
            )
    return ids


def decode_cityscapes_label(data: bytes, path: Path) -> np.ndarray:
    """A Cityscapes ``*_gtFine_labelIds.png`` as uint8 label ids ``[H, W]``."""
    im = _open(data, path)
    if im.mode != "L":
        raise SourceFileError(
            f"{path}: expected an 8-bit grayscale ('L') PNG of label ids (gtFine labelIds), got PIL mode {im.mode!r}"
        )
    ids = np.asarray(im)
    cs_labels.check_known(ids, str(path))
    return ids
