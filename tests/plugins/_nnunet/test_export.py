"""Export of values-seg datasets to nnU-Net v2's raw format."""

from __future__ import annotations

import json

import numpy as np
import pytest

from values_seg import hookimpl
from values_seg_plugins._nnunet import ExportError, export_command, export_dataset, majority_vote
from values_seg_plugins._nnunet.export import parse_label_from

from .conftest import TinyDataset


def test_export_2d_layout_and_roundtrip(tmp_path):
    from nnunetv2.imageio.simpleitk_reader_writer import SimpleITKIO

    ds = TinyDataset(dims=2, size=24)
    folder = export_dataset(ds, tmp_path, 7, "Tiny", splits=("train", "val"), test_splits=("test",))
    assert folder == tmp_path / "Dataset007_Tiny"
    info = json.loads((folder / "dataset.json").read_text())
    assert info["channel_names"] == {"0": "zscore"}
    assert info["labels"] == {"background": 0, "object1": 1}
    assert info["numTraining"] == 4 and info["file_ending"] == ".nii.gz"
    assert sorted(p.name for p in (folder / "imagesTr").iterdir()) == [
        "train_00_0000.nii.gz", "train_01_0000.nii.gz", "val_00_0000.nii.gz", "val_01_0000.nii.gz"]
    assert sorted(p.name for p in (folder / "labelsTr").iterdir()) == [
        "train_00.nii.gz", "train_01.nii.gz", "val_00.nii.gz", "val_01.nii.gz"]
    assert sorted(p.name for p in (folder / "imagesTs").iterdir()) == ["test_00_0000.nii.gz", "test_01_0000.nii.gz"]
    assert sorted(p.name for p in (folder / "labelsTs").iterdir()) == ["test_00.nii.gz", "test_01.nii.gz"]

    io = SimpleITKIO()
    case = ds.load("val_01")
    image, props = io.read_images([str(folder / "imagesTr" / "val_01_0000.nii.gz")])
    assert image.shape == (1, 1, 24, 24)  # nnU-Net's 2D convention
    np.testing.assert_array_equal(image[:, 0], case.image)
    assert list(props["spacing"])[1:] == [1.0, 1.0]
    seg, _ = io.read_seg(str(folder / "labelsTr" / "val_01.nii.gz"))
    np.testing.assert_array_equal(seg[0, 0], case.raters[0])

    mapping = json.loads((folder / "values_seg_export.json").read_text())
    assert mapping["cases"]["test_01"] == {"case_id": "test_01", "split": "test",
                                           "meta": {"ood": True, "shift": "none", "index": 1}}
    assert mapping["label_from"] == "rater0"


@pytest.mark.parametrize("label_from, expected", [(2, 2), ("rater1", 1), ("1", 1), ("majority", "majority")])
def test_label_choice(tmp_path, label_from, expected):
    from nnunetv2.imageio.simpleitk_reader_writer import SimpleITKIO

    ds = TinyDataset(dims=2, size=20, per_split=1)
    folder = export_dataset(ds, tmp_path, 8, "Labels", label_from=label_from, test_splits=())
    assert not (folder / "imagesTs").exists()
    seg, _ = SimpleITKIO().read_seg(str(folder / "labelsTr" / "train_00.nii.gz"))
    case = ds.load("train_00")
    want = majority_vote(case.raters, 2) if expected == "majority" else case.raters[expected]
    np.testing.assert_array_equal(seg[0, 0], want)
    assert parse_label_from(label_from) == expected


def test_majority_vote_ties_and_ignore():
    raters = np.array([[0, 1, 1, 2, 9], [1, 1, 0, 2, 9], [1, 0, 9, 0, 9], [0, 0, 9, 1, 9]])
    # pixel 0: 0,1,1,0 -> tie -> 0; pixel 1: 1,1,0,0 -> tie -> 0; pixel 2: 1,0 (+2 ignored) -> tie -> 0
    np.testing.assert_array_equal(majority_vote(raters, 3, ignore_index=9), [0, 0, 0, 2, 9])
    np.testing.assert_array_equal(majority_vote(raters[:3, :2], 2), [1, 1])


def test_export_3d_multichannel_ignore_label(tmp_path):
    from nnunetv2.imageio.simpleitk_reader_writer import SimpleITKIO

    ds = TinyDataset(dims=3, size=12, in_channels=2, num_classes=3, per_split=1, ignore_index=255)
    folder = export_dataset(ds, tmp_path, 9, "Vol", label_from="majority")
    info = json.loads((folder / "dataset.json").read_text())
    assert info["labels"] == {"background": 0, "object1": 1, "object2": 2, "ignore": 3}
    assert info["channel_names"] == {"0": "zscore", "1": "zscore"}
    io = SimpleITKIO()
    files = [str(folder / "imagesTr" / f"train_00_{c:04d}.nii.gz") for c in range(2)]
    image, _ = io.read_images(files)
    case = ds.load("train_00")
    np.testing.assert_array_equal(image, case.image)
    seg, _ = io.read_seg(str(folder / "labelsTr" / "train_00.nii.gz"))
    assert seg[0, 0, 0, 0] == 3  # ignore_index 255 -> nnU-Net's ignore label = num_classes
    assert set(np.unique(seg)) <= {0, 1, 2, 3}


def test_export_passes_nnunet_integrity_check(tmp_path, monkeypatch):
    from nnunetv2.experiment_planning.verify_dataset_integrity import verify_dataset_integrity

    monkeypatch.setenv("nnUNet_raw", str(tmp_path))
    monkeypatch.setenv("nnUNet_preprocessed", str(tmp_path / "pre"))
    monkeypatch.setenv("nnUNet_results", str(tmp_path / "res"))
    folder = export_dataset(TinyDataset(dims=2, size=16, num_classes=3, per_split=1, ignore_index=7), tmp_path,
                            11, "Check", splits=("train", "val"))
    verify_dataset_integrity(str(folder), num_processes=1)


def test_export_errors(tmp_path):
    ds = TinyDataset(per_split=1)
    with pytest.raises(ExportError, match="1..999"):
        export_dataset(ds, tmp_path, 1000, "X")
    with pytest.raises(ExportError, match="no spaces"):
        export_dataset(ds, tmp_path, 1, "two words")
    with pytest.raises(ExportError, match="unknown split 'pool'"):
        export_dataset(ds, tmp_path, 1, "X", splits=("pool",))
    with pytest.raises(ExportError, match="both"):
        export_dataset(ds, tmp_path, 1, "X", splits=("train",), test_splits=("train",))
    with pytest.raises(ExportError, match="case 'train_00'.*3 rater"):
        export_dataset(ds, tmp_path, 2, "X", label_from="rater5")
    with pytest.raises(ExportError, match="label_from"):
        export_dataset(ds, tmp_path, 3, "X", label_from="best")
    export_dataset(ds, tmp_path, 4, "X")
    with pytest.raises(ExportError, match="not empty.*overwrite"):
        export_dataset(ds, tmp_path, 4, "X")
    export_dataset(ds, tmp_path, 4, "X", overwrite=True)
    with pytest.raises(ExportError, match="Dataset004_X.*unique"):
        export_dataset(ds, tmp_path, 4, "Y")


def test_export_command_uses_the_registry(tmp_path, monkeypatch):
    from values_seg import registry

    class Plugin:
        @hookimpl
        def values_seg_datasets(self):
            return [TinyDataset]

    fresh = registry.Registry(builtins=False, entry_points=False)
    fresh.register(Plugin(), source="test")
    monkeypatch.setattr(registry, "_default", fresh)
    summary = export_command("TinyDataset", {"dims": 2, "size": "16", "per_split": 1}, tmp_path, 12, "Cmd",
                             label_from="majority", splits="train,val")
    folder = tmp_path / "Dataset012_Cmd"
    assert str(folder) in summary and "2 training case(s)" in summary and "1 test case(s)" in summary
    assert "majority" in summary and "nnUNetv2_train 12 2d" in summary
    assert json.loads((folder / "dataset.json").read_text())["numTraining"] == 2
