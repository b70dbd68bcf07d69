"""Write a toy scenario to disk as NIfTI (SimpleITK) with a manifest, and read it back.

Layout of an output folder (nnU-Net style names; opens in ITK-SNAP and 3D Slicer)::

    OUT/
      manifest.csv                    one row per case (columns: MANIFEST_COLUMNS)
      dataset.json                    nnU-Net-v2-style metadata + the generator's parameters
      splits_final.json               nnU-Net split file: [{"train": [...], "val": [...]}]
      imagesTr/<case>_0000.nii.gz     image (float32) of every train and val case
      labelsTr/<case>_rater1.nii.gz   rater masks (uint8, 0/1): rater1 = smallest (10 %),
      labelsTr/<case>_rater2.nii.gz     rater2 = 55 %, rater3 = largest (100 %);
      labelsTr/<case>_rater3.nii.gz     identical for sharp cases
      imagesTs/, labelsTs/            the test cases (i.i.d. and OoD)
      imagesPool/, labelsPool/        the optional active-learning pool
      preview.png                     montage of example cases with rater contours, per split

Case ids are ``toy<scenario>_<split>_<index>`` (e.g. ``toy3b_test_0042``). Images are written
without the channel axis (``_0000`` is the channel, as in nnU-Net), spacing 1 mm, origin 0,
identity direction; NumPy axis order ``(z, y, x)`` in 3D and ``(y, x)`` in 2D, as SimpleITK's
``GetArrayFromImage`` returns it. ``center`` in the manifest is in that NumPy axis order, in voxel
units where voxel ``i`` spans ``[i, i + 1)``. The same seed gives byte-identical files.
"""

from __future__ import annotations

import csv
import io as _io
import json
import os
import shutil
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import SimpleITK as sitk

from toy_data_generator import generator as gen
from toy_data_generator import scenarios as sc
from values_seg.storage import atomic

FOLDERS = {"train": "Tr", "val": "Tr", "test": "Ts", "pool": "Pool"}
MANIFEST = "manifest.csv"
DATASET_JSON = "dataset.json"
SPLITS_JSON = "splits_final.json"
PREVIEW = "preview.png"
FILE_ENDING = ".nii.gz"
MANIFEST_COLUMNS = (
    "case",
    "split",
    "distribution",  # iid | ood
    "shift",  # none | cube | grey | border
    "blurred",  # true | false
    "n_raters",
    "noise",  # true | false: background noise
    "shape",  # sphere | cube
    "value",  # object intensity (1.0, or 0.5-0.9 for the grey shift)
    "radius",  # object radius (= largest rater's), voxels
    "sigma",  # blur sigma in voxels (0 when sharp)
    "center",  # ';'-separated, NumPy axis order, voxels
    "image",  # path relative to OUT
    "raters",  # ';'-separated paths relative to OUT, rater1;rater2;rater3
)


def image_path(case_id: str, split: str) -> str:
    return f"images{FOLDERS[split]}/{case_id}_0000{FILE_ENDING}"


def rater_paths(case_id: str, split: str, n_raters: int = 3) -> list[str]:
    return [f"labels{FOLDERS[split]}/{case_id}_rater{k}{FILE_ENDING}" for k in range(1, n_raters + 1)]


def write_nifti(array: np.ndarray, path: str | os.PathLike) -> None:
    """Write a 2D or 3D array (NumPy axis order) as compressed NIfTI, spacing 1."""
    image = sitk.GetImageFromArray(np.ascontiguousarray(array))
    image.SetSpacing((1.0,) * array.ndim)
    image.SetOrigin((0.0,) * array.ndim)
    sitk.WriteImage(image, str(path), True)


def read_nifti(path: str | os.PathLike) -> np.ndarray:
    return sitk.GetArrayFromImage(sitk.ReadImage(str(path)))


def _fmt(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6f}"
    return str(value)


def manifest_row(case: gen.ToyCase) -> dict[str, str]:
    m = case.meta
    values = {
        "case": case.case_id,
        "split": m["split"],
        "distribution": "ood" if m["ood"] else "iid",
        "shift": m["shift"],
        "blurred": m["blurred"],
        "n_raters": m["n_raters"],
        "noise": m["noise"],
        "shape": m["shape"],
        "value": m["value"],
        "radius": m["radius"],
        "sigma": m["sigma"],
        "center": ";".join(f"{c:.6f}" for c in m["center"]),
        "image": image_path(case.case_id, m["split"]),
        "raters": ";".join(rater_paths(case.case_id, m["split"], m["n_raters"])),
    }
    return {k: _fmt(v) for k, v in values.items()}


def write_case(case: gen.ToyCase, out: str | os.PathLike) -> dict[str, str]:
    """Write one case's image and rater files under ``out``; return its manifest row."""
    out = Path(out)
    row = manifest_row(case)
    write_nifti(case.image[0], out / row["image"])
    for mask, rel in zip(case.raters, row["raters"].split(";")):
        write_nifti(mask, out / rel)
    return row


def _generate_and_write(job: tuple) -> dict[str, str]:
    spec, dims, size, seed, out = job
    return write_case(gen.generate_case(spec, dims, size, seed), out)


@dataclass
class Written:
    """What :func:`write_dataset` wrote."""

    out: Path
    counts: dict[str, dict[str, int]]  # split -> {"iid": n, "ood": n, "blurred": n, "total": n}
    files: int
    preview: Path | None

    def summary(self) -> str:
        lines = [
            f"wrote {sum(c['total'] for c in self.counts.values())} cases ({self.files} NIfTI files) to {self.out}"
        ]
        for split, c in self.counts.items():
            lines.append(
                f"  {split:<5} {c['total']:>4} cases: {c['iid']} i.i.d. ({c['blurred']} blurred), {c['ood']} OoD"
                + (f" [{c['shifts']}]" if c["ood"] else "")
            )
        lines.append(f"  manifest: {self.out / MANIFEST}")
        if self.preview:
            lines.append(f"  preview:  {self.preview}")
        return "\n".join(lines)


def _owned_paths(out: Path) -> list[Path]:
    names = [MANIFEST, DATASET_JSON, SPLITS_JSON, PREVIEW]
    names += sorted({f"{kind}{suffix}" for suffix in FOLDERS.values() for kind in ("images", "labels")})
    return [out / n for n in names]


def write_dataset(
    out: str | os.PathLike,
    scenario: str,
    dims: int = 2,
    size: int = 64,
    seed: int = 0,
    train_cases: int | None = None,
    val_cases: int | None = None,
    pool_iid: int = 0,
    pool_ood: int = 0,
    workers: int = 1,
    preview: bool = True,
    preview_cases: int = 6,
    overwrite: bool = False,
) -> Written:
    """Generate a scenario and write it to ``out`` (layout: this module's docstring).

    Refuses to write over an earlier toy dataset in ``out`` unless ``overwrite`` (which removes
    only the files and folders this function writes).
    """
    scen = sc.get_scenario(scenario)
    gen.check_params(dims, size, seed)
    specs = sc.plan(scen, train_cases, val_cases, pool_iid, pool_ood)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    out = Path(out)
    existing = [p for p in _owned_paths(out) if p.exists()]
    if existing:
        if not overwrite:
            raise FileExistsError(
                f"{out} already holds toy data ({', '.join(p.name for p in existing)}); "
                "choose another folder or pass overwrite=True (--overwrite)"
            )
        for p in existing:
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    for split in specs:
        for kind in ("images", "labels"):
            (out / f"{kind}{FOLDERS[split]}").mkdir(parents=True, exist_ok=True)

    jobs = [(spec, dims, size, seed, str(out)) for split in specs for spec in specs[split]]
    if workers == 1:
        rows = [_generate_and_write(job) for job in jobs]
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            rows = list(pool.map(_generate_and_write, jobs, chunksize=max(1, len(jobs) // (4 * workers))))

    _write_json(out / DATASET_JSON, _dataset_json(scen, dims, size, seed, specs))
    _write_json(
        out / SPLITS_JSON,
        [{"train": [s.case_id for s in specs["train"]], "val": [s.case_id for s in specs["val"]]}],
    )
    _write_manifest(out / MANIFEST, rows)

    preview_path = None
    if preview:
        from toy_data_generator.preview import preview_scenario

        preview_path = preview_scenario(out / PREVIEW, specs, dims, size, seed, preview_cases)
    counts = {split: _counts(s) for split, s in specs.items()}
    n_files = sum(1 + len(r["raters"].split(";")) for r in rows)
    return Written(out, counts, n_files, preview_path)


def _counts(specs: Sequence[sc.CaseSpec]) -> dict:
    shifts = {s: sum(1 for c in specs if c.shift == s) for s in sc.SHIFTS}
    return {
        "total": len(specs),
        "iid": sum(1 for c in specs if not c.ood),
        "ood": sum(1 for c in specs if c.ood),
        "blurred": sum(1 for c in specs if c.blurred and not c.ood),
        "shifts": ", ".join(f"{n} {s}" for s, n in shifts.items() if n),
    }


def _dataset_json(scen: sc.Scenario, dims: int, size: int, seed: int, specs: dict) -> dict:
    return {
        "name": f"toy{scen.name}",
        "description": f"ValUES toy scenario {scen.name}: {scen.description}",
        "reference": "Kahl, Lüth et al., ValUES, ICLR 2024, appendix B.1",
        "channel_names": {"0": "intensity"},
        "labels": {"background": 0, "foreground": 1},
        "numTraining": len(specs["train"]) + len(specs["val"]),
        "file_ending": FILE_ENDING,
        "raters": {"count": len(gen.RATER_FRACTIONS), "size_fractions": list(gen.RATER_FRACTIONS)},
        "toy": {
            "scenario": scen.name,
            "dims": dims,
            "size": size,
            "seed": seed,
            "cases": {split: len(s) for split, s in specs.items()},
            "noise": scen.noise,
            "blur_sigma_voxels": (
                gen.blur_sigma(scen.sigma, size) if any(c.blurred for s in specs.values() for c in s) else 0.0
            ),
        },
    }


def _write_json(path: Path, data: object) -> None:
    atomic.write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _write_manifest(path: Path, rows: list[dict[str, str]]) -> None:
    buffer = _io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=MANIFEST_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic.write(path, buffer.getvalue())


def read_manifest(out: str | os.PathLike) -> list[dict]:
    """The manifest's rows with typed values (bools, ints, floats, lists)."""
    path = Path(out) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(
            f"no {MANIFEST} in {out}: not a toy dataset folder (values-seg toy generate writes one)"
        )
    rows = []
    with path.open(newline="", encoding="utf-8") as f:
        for raw in csv.DictReader(f):
            row: dict = dict(raw)
            for key in ("blurred", "noise"):
                row[key] = raw[key] == "true"
            row["ood"] = raw["distribution"] == "ood"
            row["n_raters"] = int(raw["n_raters"])
            for key in ("value", "radius", "sigma"):
                row[key] = float(raw[key])
            row["center"] = [float(c) for c in raw["center"].split(";")]
            row["raters"] = raw["raters"].split(";")
            rows.append(row)
    return rows


def read_case(out: str | os.PathLike, row: dict | str) -> gen.ToyCase:
    """Load one case (by manifest row or case id) from a folder written by :func:`write_dataset`."""
    out = Path(out)
    if isinstance(row, str):
        matches = [r for r in read_manifest(out) if r["case"] == row]
        if not matches:
            raise KeyError(f"case {row!r} is not in {out / MANIFEST}")
        row = matches[0]
    image = read_nifti(out / row["image"]).astype(np.float32)[None]
    raters = np.stack([read_nifti(out / p) for p in row["raters"]]).astype(np.uint8)
    meta = {k: v for k, v in row.items() if k not in ("case", "image", "raters")}
    return gen.ToyCase(row["case"], image, raters, meta)
