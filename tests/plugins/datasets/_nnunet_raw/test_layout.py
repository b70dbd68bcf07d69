"""The raw layout: cases, channels and raters read back exactly; bad layouts named by file; geometry skips."""

import json

import numpy as np
import pytest
import SimpleITK as sitk

from values_seg_plugins.datasets._nnunet_raw import layout, reading
from values_seg_plugins.datasets._nnunet_raw.dataset_json import LayoutError, read_dataset_json
from values_seg_plugins.datasets._nnunet_raw.testing import write_raw_dataset

from .conftest import write_array


def test_cases_channels_raters_and_geometry_read_back_exactly(raw2d):
    folder, written = raw2d
    scan = layout.scan_folder(folder)
    assert list(scan.cases) == sorted(c for c in written if c.startswith("case_tr")) + \
        sorted(c for c in written if c.startswith("case_ts"))
    assert scan.rater_folders == {"Tr": ["labelsTr_rater0", "labelsTr_rater1", "labelsTr_rater2"],
                                  "Ts": ["labelsTs_rater0", "labelsTs_rater1", "labelsTs_rater2"]}
    assert scan.dims == 2 and not scan.skipped
    for ident, w in written.items():
        case = scan.cases[ident]
        assert case.part == w.part
        assert [p.name for p in case.images] == [f"{ident}_0000.nii.gz", f"{ident}_0001.nii.gz"]
        image = reading.read_image(case.images)
        np.testing.assert_array_equal(image, w.image)  # float32 both ways
        raters = reading.read_raters(case.raters, scan.info)
        np.testing.assert_array_equal(raters, w.raters)  # the rater folders, not the majority label
        assert case.geometry.shape == w.image.shape[1:]
        np.testing.assert_allclose(case.geometry.spacing, w.spacing)
        np.testing.assert_allclose(case.geometry.origin, w.origin)
        np.testing.assert_allclose(case.geometry.direction, w.direction, atol=1e-12)


def test_a_single_label_folder_is_the_one_rater(tmp_path):
    written = write_raw_dataset(tmp_path / "d", dims=3, shape=(6, 8, 10), raters=1, train=2, test=1)
    scan = layout.scan_folder(tmp_path / "d")
    assert scan.rater_folders == {"Tr": ["labelsTr"], "Ts": ["labelsTs"]}
    case = scan.cases["case_tr000"]
    raters = reading.read_raters(case.raters, scan.info)
    assert raters.shape == (1, 6, 8, 10)
    np.testing.assert_array_equal(raters, written["case_tr000"].raters)


@pytest.mark.parametrize("ending", [".nrrd", ".mha", ".nii"])
def test_other_file_endings_read_through_simpleitk(tmp_path, ending):
    written = write_raw_dataset(tmp_path / "d", dims=3, shape=(5, 6, 7), channels=2, raters=2, train=2, test=1,
                                file_ending=ending)
    scan = layout.scan_folder(tmp_path / "d")
    case = scan.cases["case_ts000"]
    assert case.images[1].name == f"case_ts000_0001{ending}"
    np.testing.assert_array_equal(reading.read_image(case.images), written["case_ts000"].image)
    np.testing.assert_array_equal(reading.read_raters(case.raters, scan.info), written["case_ts000"].raters)
    np.testing.assert_allclose(case.geometry.direction, written["case_ts000"].direction, atol=1e-12)


def test_unlabelled_test_images_are_skipped(raw2d):
    folder, _ = raw2d
    for sub in ("labelsTs", "labelsTs_rater0", "labelsTs_rater1", "labelsTs_rater2"):
        (folder / sub / "case_ts001.nii.gz").unlink()
    scan = layout.scan_folder(folder)
    assert "case_ts001" not in scan.cases and "case_ts000" in scan.cases
    assert "no label" in scan.skipped["Ts/case_ts001"]


def _fails(folder, message, path=None):
    with pytest.raises(LayoutError, match=message) as info:
        layout.scan_folder(folder)
    if path is not None:
        assert str(path) in str(info.value)
    return str(info.value)


def test_missing_dataset_json(raw2d):
    folder, _ = raw2d
    (folder / "dataset.json").unlink()
    _fails(folder, "dataset.json is missing", folder / "dataset.json")


def test_labels_without_images(raw2d):
    folder, _ = raw2d
    for c in (0, 1):
        (folder / "imagesTr" / f"case_tr002_{c:04d}.nii.gz").unlink()
    _fails(folder, "a label without images", folder / "labelsTr" / "case_tr002.nii.gz")


def test_a_missing_channel(raw2d):
    folder, _ = raw2d
    (folder / "imagesTs" / "case_ts001_0001.nii.gz").unlink()
    message = _fails(folder, "is missing: case 'case_ts001' needs one file per channel",
                     folder / "imagesTs" / "case_ts001_0001.nii.gz")
    assert "_0000, _0001" in message


def test_an_undeclared_channel(raw2d):
    folder, _ = raw2d
    source = folder / "imagesTr" / "case_tr000_0001.nii.gz"
    (folder / "imagesTr" / "case_tr000_0002.nii.gz").write_bytes(source.read_bytes())
    _fails(folder, r"channel 2 but .*dataset.json declares 2 channel\(s\) \(MR0, MR1\)",
           folder / "imagesTr" / "case_tr000_0002.nii.gz")


def test_a_file_name_without_channel(raw2d):
    folder, _ = raw2d
    (folder / "imagesTr" / "case_tr000.nii.gz").write_bytes(b"")
    _fails(folder, "must be named <case>_<4-digit channel>", folder / "imagesTr" / "case_tr000.nii.gz")


def test_a_training_image_without_label(raw2d):
    folder, _ = raw2d
    (folder / "labelsTr" / "case_tr001.nii.gz").unlink()
    _fails(folder, "training image without a label", folder / "labelsTr" / "case_tr001.nii.gz")


@pytest.mark.parametrize("part", ["Tr", "Ts"])
def test_unequal_rater_folders(raw2d, part):
    folder, _ = raw2d
    case = "case_tr002" if part == "Tr" else "case_ts000"
    (folder / f"labels{part}_rater1" / f"{case}.nii.gz").unlink()
    _fails(folder, f"must hold the same case names.*labels{part}_rater1/ has missing {case}",
           folder / f"labels{part}_rater1")


def test_num_training_must_match(raw2d):
    folder, _ = raw2d
    data = json.loads((folder / "dataset.json").read_text())
    (folder / "dataset.json").write_text(json.dumps({**data, "numTraining": 7}))
    _fails(folder, r"numTraining is 7 but imagesTr/ holds 4", folder / "dataset.json")


@pytest.mark.parametrize("ending", [".nrrd", ".nii"])
def test_a_wrong_file_ending_is_named_not_num_training(raw2d, ending):
    """Issue 32, item 11: a file_ending the files do not have (.nii for .nii.gz files) was reported as
    "numTraining is 4 but imagesTr/ holds 0 case(s)"; now the folder, the declared ending and the
    files found are named."""
    folder, _ = raw2d
    data = json.loads((folder / "dataset.json").read_text())
    (folder / "dataset.json").write_text(json.dumps({**data, "file_ending": ending}))
    message = _fails(folder, rf"imagesTr: no file ends with the file_ending '{ending}' that .*dataset.json declares "
                             r"\(found case_tr000_0000.nii.gz, .*\); set file_ending", folder / "imagesTr")
    assert "numTraining" not in message


def test_same_case_name_in_training_and_test(raw2d):
    folder, _ = raw2d
    for sub in ("imagesTs",):
        for c in (0, 1):
            src = folder / "imagesTs" / f"case_ts000_{c:04d}.nii.gz"
            src.rename(folder / sub / f"case_tr000_{c:04d}.nii.gz")
    for sub in ("labelsTs", "labelsTs_rater0", "labelsTs_rater1", "labelsTs_rater2"):
        (folder / sub / "case_ts000.nii.gz").rename(folder / sub / "case_tr000.nii.gz")
    _fails(folder, "case 'case_tr000' is both in imagesTr/ and imagesTs/")


def test_multi_component_and_mixed_dimension_images(raw2d):
    folder, _ = raw2d
    path = folder / "imagesTr" / "case_tr000_0000.nii.gz"
    sitk.WriteImage(sitk.GetImageFromArray(np.zeros((16, 20, 3), np.float32), isVector=True), str(path))
    _fails(folder, "3 components per pixel", path)
    write_array(path, np.zeros((2, 16, 20), np.float32))
    message = _fails(folder, "a .D image, but .* is .D; all images of a data set must have the same number of dim")
    assert str(path) in message and ("a 3D image" in message) == message.startswith(str(path))


@pytest.mark.parametrize("what, kwargs", [
    ("origin", {"origin": (5.0, 5.0)}),
    ("spacing", {"spacing": (2.0, 2.0)}),
    ("direction", {"direction": (0.0, 1.0, 1.0, 0.0)}),
    ("size", {}),
])
def test_a_case_whose_label_geometry_disagrees_is_skipped_with_its_name(raw2d, what, kwargs):
    folder, written = raw2d
    path = folder / "labelsTr_rater1" / "case_tr002.nii.gz"
    like = sitk.ReadImage(str(path))
    array = written["case_tr002"].raters[1] if what != "size" else np.zeros((16, 21), np.uint8)
    image = sitk.GetImageFromArray(array)
    if what != "size":
        image.CopyInformation(like)
    for key, value in kwargs.items():
        getattr(image, f"Set{key.capitalize()}")(value)
    sitk.WriteImage(image, str(path))
    scan = layout.scan_folder(folder)
    assert "case_tr002" not in scan.cases and len(scan.cases) == 5
    reason = scan.skipped["Tr/case_tr002"]
    assert reason.startswith("geometry: labelsTr_rater1/case_tr002.nii.gz disagrees with case_tr002_0000.nii.gz")
    assert what in reason


def test_a_case_whose_channels_disagree_is_skipped(raw2d):
    folder, written = raw2d
    path = folder / "imagesTs" / "case_ts001_0001.nii.gz"
    w = written["case_ts001"]
    write_array(path, w.image[1], spacing=w.spacing, origin=(0.0, 0.0), direction=w.direction)
    scan = layout.scan_folder(folder)
    assert "case_ts001" not in scan.cases
    assert scan.skipped["Ts/case_ts001"].startswith("geometry: imagesTs/case_ts001_0001.nii.gz disagrees with "
                                                    "case_ts001_0000.nii.gz in origin")


def test_header_round_off_is_not_a_mismatch(raw2d):
    folder, written = raw2d
    path = folder / "labelsTr" / "case_tr001.nii.gz"
    w = written["case_tr001"]
    write_array(path, w.raters[0], spacing=tuple(s * (1 + 1e-7) for s in w.spacing),
                origin=tuple(o + 1e-6 for o in w.origin), direction=w.direction)
    assert "case_tr001" in layout.scan_folder(folder).cases


def test_label_values_outside_dataset_json_name_the_file(raw2d):
    folder, written = raw2d
    path = folder / "labelsTr_rater2" / "case_tr003.nii.gz"
    bad = written["case_tr003"].raters[2].copy()
    bad[0, :3] = [3, 7, 3]
    write_array(path, bad, like=path)
    info = read_dataset_json(folder)
    scan = layout.scan_folder(folder)  # headers only: found when the labels are read
    with pytest.raises(LayoutError, match=r"label value\(s\) 3, 7 are not declared in .*dataset.json") as err:
        reading.read_raters(scan.cases["case_tr003"].raters, info)
    assert str(path) in str(err.value) and "labels 0..1" in str(err.value)
    write_array(path, bad.astype(np.float32) * 0.5, like=path)
    with pytest.raises(LayoutError, match="must be integers"):
        reading.read_raters(scan.cases["case_tr003"].raters, info)


def test_ignore_label_values_are_allowed(raw2d):
    folder, written = raw2d
    data = json.loads((folder / "dataset.json").read_text())
    (folder / "dataset.json").write_text(json.dumps({**data, "labels": {"background": 0, "object": 1, "ignore": 2}}))
    path = folder / "labelsTr_rater0" / "case_tr000.nii.gz"
    label = written["case_tr000"].raters[0].copy()
    label[:2] = 2
    write_array(path, label, like=path)
    info = read_dataset_json(folder)
    raters = reading.read_raters([path], info)
    np.testing.assert_array_equal(raters[0], label)
    label[0, 0] = 3
    write_array(path, label, like=path)
    with pytest.raises(LayoutError, match=r"value\(s\) 3 .*labels 0..2 \(ignore = 2\)"):
        reading.read_raters([path], info)


def test_optional_training_part_for_an_ood_data_set(tmp_path):
    write_raw_dataset(tmp_path / "ood", dims=2, train=0, test=2)
    with pytest.raises(LayoutError, match="imagesTr is missing"):
        layout.scan_folder(tmp_path / "ood")
    scan = layout.scan_folder(tmp_path / "ood", training=False)
    assert list(scan.cases) == ["case_ts000", "case_ts001"]


def test_scans_are_reused_until_a_file_changes(raw2d):
    folder, written = raw2d
    first = layout.scan_folder(folder)
    assert layout.scan_folder(folder) is first
    path = folder / "labelsTr_rater0" / "case_tr000.nii.gz"
    write_array(path, written["case_tr000"].raters[0], like=path)
    again = layout.scan_folder(folder)
    assert again is not first and again.fingerprint != first.fingerprint
