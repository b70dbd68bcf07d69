"""A small synthetic data set in the prepared LIDC layout, for tests and for trying the studies
without LIDC-IDRI (docs/design-rationale.md, "LIDC-IDRI", the synthetic stand-in).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from values_seg_plugins.datasets._lidc import crop
from values_seg.storage import atomic
from values_seg_plugins.datasets._lidc.prepare import (PREPARE_VERSION, _write_nifti, file_entry,
                                              record_path, write_manifest)
from values_seg_plugins.datasets._lidc.selection import CHARACTERISTICS, RATERS, Nodule


def _ratings(rng: np.random.Generator, ood: bool) -> dict[str, tuple[int, ...]]:
    ratings = {c: tuple(int(v) for v in rng.integers(1, 6, RATERS)) for c in CHARACTERISTICS}
    ratings["calcification"] = tuple(int(v) for v in rng.integers(1, 7, RATERS))
    votes = [1, 2] if ood else [3, 4, 5]
    other = [3, 4, 5] if ood else [1, 2]
    texture = [int(rng.choice(votes)) for _ in range(RATERS)]
    texture[int(rng.integers(RATERS))] = int(rng.choice(other)) if rng.random() < 0.3 else texture[0]
    ratings["texture"] = tuple(texture)
    base = int(rng.choice([1, 2, 3, 4, 5], p=[0.2, 0.25, 0.25, 0.15, 0.15]))
    ratings["malignancy"] = tuple(int(np.clip(base + rng.integers(-1, 2), 1, 5)) for _ in range(RATERS))
    return ratings


def _nodule_arrays(rng: np.random.Generator, ood: bool) -> tuple[np.ndarray, list[np.ndarray]]:
    n = crop.SIZE
    z, y, x = np.meshgrid(*(np.arange(n) - (n - 1) / 2,) * 3, indexing="ij")
    centre = rng.uniform(-2, 2, 3)
    dist = np.sqrt((z - centre[0]) ** 2 + (y - centre[1]) ** 2 + (x - centre[2]) ** 2)
    radius = rng.uniform(4, 7)
    image = rng.normal(-800, 60, (n, n, n))
    inside = dist <= radius
    if ood:
        image[inside] = -450 + rng.normal(0, 150, int(inside.sum()))
    else:
        image[inside] = 40 + rng.normal(0, 20, int(inside.sum()))
    masks = [(dist <= radius + rng.uniform(-1, 1)).astype(np.uint8) for _ in range(RATERS)]
    return crop.zscore(image), masks


def write_synthetic(out: str | Path, patients: int = 24, ood_patients: int = 6, seed: int = 0) -> list[Nodule]:
    """Write ``patients`` synthetic patients (``ood_patients`` of them with a non-solid nodule)
    into ``out`` in the prepared layout; returns the nodule table (manifest order)."""
    out = Path(out)
    for sub in ("images", "labels", "scans"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for p in range(patients):
        scan_id = p + 1
        patient_id = f"LIDC-IDRI-{9000 + p:04d}"
        n_nodules = 1 + int(rng.random() < 0.4)
        entries = []
        for index in range(n_nodules):
            ood = p < ood_patients and index == 0
            ratings = _ratings(rng, ood)
            nodule = Nodule(patient_id, scan_id, index, tuple(range(10 * scan_id, 10 * scan_id + RATERS)), RATERS,
                            ratings)
            image, masks = _nodule_arrays(rng, ood)
            files = {"image": out / "images" / f"{nodule.case_id}.nii.gz"}
            _write_nifti(image, (0.0, 0.0, 0.0), files["image"])
            for r, mask in enumerate(masks):
                files[f"rater{r}"] = out / "labels" / f"{nodule.case_id}_r{r}.nii.gz"
                _write_nifti(mask, (0.0, 0.0, 0.0), files[f"rater{r}"])
            entries.append({"case_id": nodule.case_id, "nodule": nodule.to_dict(),
                            "files": {k: file_entry(f, out) for k, f in files.items()}})
        record = {"patient_id": patient_id, "scan_id": scan_id, "status": "ok", "version": PREPARE_VERSION,
                  "series_uid": "synthetic", "series_folder": "", "nodules": entries}
        atomic.write(record_path(out, scan_id), json.dumps(record, indent=1))
    return write_manifest(out)
