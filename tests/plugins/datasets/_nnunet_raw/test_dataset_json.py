"""dataset.json: labels, regions and the ignore label as nnU-Net's own LabelManager reads them."""

import json

import pytest

from values_seg_plugins.datasets._nnunet_raw.dataset_json import LayoutError, read_dataset_json


def write(folder, **overrides):
    data = {"channel_names": {"0": "T1", "1": "T2"}, "labels": {"background": 0, "liver": 1, "tumour": 2},
            "numTraining": 3, "file_ending": ".nii.gz", "name": "Liver"}
    data.update(overrides)
    data = {k: v for k, v in data.items() if v is not None}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dataset.json").write_text(json.dumps(data))
    return folder


def label_manager(labels, order=None):
    from nnunetv2.utilities.label_handling.label_handling import LabelManager

    return LabelManager(labels, order)


def test_plain_labels(tmp_path):
    info = read_dataset_json(write(tmp_path / "d"))
    assert info.channel_names == ("T1", "T2") and info.in_channels == 2
    assert info.class_names == ("background", "liver", "tumour") and info.num_classes == 3
    assert info.ignore_label is None and info.max_label == 2 and not info.has_regions
    assert (info.name, info.file_ending, info.num_training) == ("Liver", ".nii.gz", 3)
    assert list(range(info.num_classes)) == label_manager({"background": 0, "liver": 1, "tumour": 2}).all_labels


def test_ignore_label_is_left_out_of_the_classes(tmp_path):
    labels = {"background": 0, "vessel": 1, "ignore": 2}
    info = read_dataset_json(write(tmp_path / "d", labels=labels))
    reference = label_manager(labels)
    assert info.ignore_label == reference.ignore_label == 2
    assert list(range(info.num_classes)) == reference.all_labels == [0, 1]
    assert info.max_label == 2


def test_region_based_labels_name_values_by_regions_class_order(tmp_path):
    labels = {"background": 0, "whole tumor": [1, 2, 3], "tumor core": [2, 3], "enhancing tumor": 3}
    info = read_dataset_json(write(tmp_path / "d", labels=labels, regions_class_order=[1, 2, 3]))
    reference = label_manager(labels, [1, 2, 3])
    assert info.has_regions and reference.has_regions
    assert list(range(info.num_classes)) == reference.all_labels == [0, 1, 2, 3]
    # label value v is what nnU-Net paints for the region whose regions_class_order entry is v
    assert info.class_names == ("background", "whole tumor", "tumor core", "enhancing tumor")


def test_legacy_modality_key(tmp_path):
    info = read_dataset_json(write(tmp_path / "d", channel_names=None, modality={"0": "CT"}))
    assert info.channel_names == ("CT",)


@pytest.mark.parametrize("overrides, message", [
    ({"labels": {"liver": 1}}, "must declare 'background': 0"),
    ({"labels": {"background": 1, "liver": 0}}, "'background' label must be 0"),
    ({"labels": {"background": 0, "liver": 1, "tumour": 3}}, r"consecutive from 0.*\[0, 1, 3\]"),
    ({"labels": {"background": 0, "liver": 1, "ignore": 5}}, "'ignore' label must be the highest value, 2"),
    ({"labels": {"background": 0, "liver": "one"}}, "label 'liver' must be an integer"),
    ({"labels": {"background": 0}}, "only background"),
    ({"labels": {"background": 0, "a": [1, 2], "b": 2}}, "regions_class_order"),
    ({"file_ending": ".png"}, r"file_ending '.png' is not supported.*\.nii\.gz"),
    ({"numTraining": None}, "missing required key.*numTraining"),
    ({"channel_names": {"0": "a", "2": "b"}}, "consecutive from 0"),
    ({"dataset": {"x": {}}}, "explicit file lists"),
])
def test_invalid_dataset_json_names_the_file(tmp_path, overrides, message):
    folder = write(tmp_path / "d", **overrides)
    with pytest.raises(LayoutError, match=message) as info:
        read_dataset_json(folder)
    assert str(folder / "dataset.json") in str(info.value)


def test_missing_and_malformed_dataset_json(tmp_path):
    (tmp_path / "d" / "imagesTr").mkdir(parents=True)
    with pytest.raises(LayoutError, match=r"d/dataset.json is missing.*found: imagesTr"):
        read_dataset_json(tmp_path / "d")
    (tmp_path / "d" / "dataset.json").write_text("{not json")
    with pytest.raises(LayoutError, match="dataset.json: not readable as JSON"):
        read_dataset_json(tmp_path / "d")
    with pytest.raises(LayoutError, match="does not exist"):
        read_dataset_json(tmp_path / "nope")
