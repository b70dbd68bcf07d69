"""Image geometry (size, spacing, origin, direction) as the files state it, read from headers and
kept per case; nothing is resampled (docs/design-rationale.md,
"A data set in nnU-Net's raw layout").
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from values_seg.storage.atomic import replacing

#: Tolerances for "the same geometry": float32 header round-off, not a real mismatch (mm).
RTOL, ATOL = 1e-5, 1e-4
META_KEYS = ("spacing", "origin", "direction")


@dataclass(frozen=True)
class Geometry:
    size: tuple[int, ...]  # SimpleITK order (x, y[, z])
    spacing: tuple[float, ...]
    origin: tuple[float, ...]
    direction: tuple[float, ...]

    @property
    def dims(self) -> int:
        return len(self.size)

    @property
    def shape(self) -> tuple[int, ...]:
        """The array shape (NumPy order)."""
        return tuple(reversed(self.size))

    def mismatch(self, other: "Geometry") -> str | None:
        """What differs from ``other`` (``None`` if nothing beyond header round-off)."""
        if self.size != other.size:
            return f"size {list(self.size)} vs {list(other.size)}"
        for what in ("spacing", "origin", "direction"):
            a, b = np.asarray(getattr(self, what)), np.asarray(getattr(other, what))
            if not np.allclose(a, b, rtol=RTOL, atol=ATOL):
                return f"{what} {np.round(a, 6).tolist()} vs {np.round(b, 6).tolist()}"
        return None

    def to_meta(self) -> dict:
        return {"spacing": list(self.spacing), "origin": list(self.origin), "direction": list(self.direction)}


def read_geometry(path: str | Path) -> tuple[Geometry, int]:
    """``(geometry, components per pixel)`` from the header of an image file, without reading pixels."""
    import SimpleITK as sitk

    reader = sitk.ImageFileReader()
    reader.SetFileName(os.fspath(path))
    try:
        reader.ReadImageInformation()
    except RuntimeError as e:
        raise ValueError(f"{path}: SimpleITK cannot read it ({str(e).strip().splitlines()[-1]})") from None
    geometry = Geometry(tuple(int(s) for s in reader.GetSize()), tuple(float(s) for s in reader.GetSpacing()),
                        tuple(float(o) for o in reader.GetOrigin()), tuple(float(d) for d in reader.GetDirection()))
    return geometry, int(reader.GetNumberOfComponents())


def array_spacing(meta: Mapping) -> list[float] | None:
    """The spacing of ``meta`` in NumPy axis order, or ``None`` where the case has no geometry."""
    spacing = meta.get("spacing")
    return None if spacing is None else [float(s) for s in reversed(list(spacing))]


def write_image(array: np.ndarray, path: str | Path, meta: Mapping) -> Path:
    """Write ``array`` (NumPy order) with the geometry of ``meta``, atomically (temp file + rename)."""
    import SimpleITK as sitk

    path = Path(path)
    image = sitk.GetImageFromArray(np.ascontiguousarray(array))
    if image.GetDimension() != len(meta["spacing"]):
        raise ValueError(f"{path}: a {image.GetDimension()}D array cannot take the {len(meta['spacing'])}D geometry "
                         "of its case")
    image.SetSpacing([float(s) for s in meta["spacing"]])
    image.SetOrigin([float(o) for o in meta["origin"]])
    image.SetDirection([float(d) for d in meta["direction"]])
    with replacing(path, keep_suffix=True) as tmp:  # SimpleITK picks the format by the extension
        sitk.WriteImage(image, os.fspath(tmp), useCompression=True)
    return path
