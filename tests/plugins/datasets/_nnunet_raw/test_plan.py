"""Splits of the nnunet_raw dataset: seeded, from splits_final.json, from the cases CSV, val from test, OoD folder."""

import json
import math

import numpy as np
import pytest

from values_seg import registry
from values_seg_plugins.datasets._nnunet_raw.dataset_json import LayoutError
from values_seg_plugins.datasets._nnunet_raw.testing import write_raw_dataset


@pytest.fixture
def raw(tmp_path):
    folder = tmp_path / "Dataset002_Six"
    written = write_raw_dataset(folder, dims=2, shape=(12, 12), raters=2, train=6, test=3)
    return folder, written


def create(**params):
    return registry.create("dataset", "nnunet_raw", **params)


TR = [f"case_tr{i:03d}" for i in range(6)]
TS = [f"case_ts{i:03d}" for i in range(3)]


def test_contract_attributes_and_meta(raw):
    folder, written = raw
    ds = create(folder=str(folder))
    assert (ds.dims, ds.in_channels, ds.num_classes, ds.ignore_index) == (2, 1, 2, None)
    assert ds.class_names == ("background", "object") and ds.channel_names == ("MR0",)
    assert ds.splits() == ["train", "val", "test"]
    case = ds.load("case_ts001")
    case.validate(2, 1, 2)
    w = written["case_ts001"]
    np.testing.assert_array_equal(case.raters, w.raters)
    assert case.meta["split"] == "test" and case.meta["ood"] is False and case.meta["shift"] == "none"
    assert case.meta["n_raters"] == 2 and case.meta["source"] == "imagesTs" and case.meta["nnunet_id"] == "case_ts001"
    assert case.meta["spacing"] == pytest.approx(list(w.spacing)) and case.meta["origin"] == pytest.approx(list(w.origin))
    assert case.meta["direction"] == pytest.approx(list(w.direction))
    assert ds.meta("case_ts001") == case.meta  # without reading pixels
    assert ds.files("case_ts001")["raters"][1].endswith("labelsTs_rater1/case_ts001.nii.gz")


def test_seeded_split_is_a_partition_of_the_training_cases(raw):
    folder, _ = raw
    ds = create(folder=str(folder), seed=3)
    train, val = ds.case_ids("train"), ds.case_ids("val")
    assert sorted(train + val) == TR and not set(train) & set(val)
    assert len(val) == math.ceil(0.2 * 6) == 2
    assert ds.case_ids("test") == TS
    assert create(folder=str(folder), seed=3).case_ids("val") == val  # reproducible
    assert len({tuple(create(folder=str(folder), seed=s).case_ids("val")) for s in range(6)}) > 1
    assert len(create(folder=str(folder), val_fraction=0.5).case_ids("val")) == 3


def test_splits_final_json_gives_train_and_val_of_the_fold(raw, tmp_path):
    folder, _ = raw
    pre = tmp_path / "pre" / "Dataset002_Six"
    pre.mkdir(parents=True)
    folds = [{"train": TR[:4], "val": TR[4:]}, {"train": TR[2:], "val": TR[:2]}]
    (pre / "splits_final.json").write_text(json.dumps(folds))
    ds = create(folder=str(folder), preprocessed_folder=str(pre), fold=1)
    assert ds.case_ids("train") == TR[2:] and ds.case_ids("val") == TR[:2]
    ds0 = create(folder=str(folder), preprocessed_folder=str(pre / "splits_final.json"))
    assert ds0.case_ids("train") == TR[:4] and ds0.case_ids("val") == TR[4:]
    with pytest.raises(LayoutError, match=r"splits_final.json: fold 2 does not exist \(folds 0..1\)"):
        create(folder=str(folder), preprocessed_folder=str(pre), fold=2)
    (pre / "splits_final.json").write_text(json.dumps([{"train": TR[:3] + ["other_case"], "val": TR[4:]}]))
    with pytest.raises(LayoutError, match=r"splits_final.json: case\(s\) other_case are not in"):
        create(folder=str(folder), preprocessed_folder=str(pre))
    (pre / "splits_final.json").write_text(json.dumps([{"train": TR[:3], "val": TR[4:]}]))
    with pytest.raises(LayoutError, match=r"splits_final.json: training case\(s\) case_tr003 are in neither"):
        create(folder=str(folder), preprocessed_folder=str(pre))
    with pytest.raises(LayoutError, match="does not exist: give the nnU-Net preprocessed"):
        create(folder=str(folder), preprocessed_folder=str(tmp_path / "none"))


CSV = """case_id,split,ood,shift,scanner
case_tr004,pool,false,,A
case_tr005,test,yes,motion,B
case_ts000,test,true,,A
case_tr001,pool,true,motion,B
"""


def test_cases_csv_declares_test_ood_and_pool_cases(raw, tmp_path):
    folder, _ = raw
    (tmp_path / "cases.csv").write_text(CSV)
    ds = create(folder=str(folder), cases_csv=str(tmp_path / "cases.csv"))
    assert ds.splits() == ["train", "val", "test", "pool"]
    assert ds.case_ids("pool") == ["case_tr001", "case_tr004"]
    assert ds.case_ids("test") == ["case_tr005"] + TS
    assert sorted(ds.case_ids("train") + ds.case_ids("val")) == ["case_tr000", "case_tr002", "case_tr003"]
    meta = {c: ds.meta(c) for c in ds.case_ids("test") + ds.case_ids("pool")}
    assert [(c, m["ood"], m["shift"]) for c, m in meta.items()] == [
        ("case_tr005", True, "motion"), ("case_ts000", True, "ood"), ("case_ts001", False, "none"),
        ("case_ts002", False, "none"), ("case_tr001", True, "motion"), ("case_tr004", False, "none")]
    assert meta["case_tr005"]["scanner"] == "B" and meta["case_tr005"]["split"] == "test"


@pytest.mark.parametrize("row, message", [
    ("case_nope,test,false,", r"line 2: unknown case 'case_nope'"),
    ("case_tr000,holdout,false,", r"line 2: split 'holdout' is not one of train, val, test, pool"),
    ("case_tr000,train,true,", r"line 2: an OoD case cannot be a train case"),
    ("case_tr000,test,maybe,", r"line 2: ood 'maybe' is not true/false"),
    ("case_tr000,test,false,blur", r"line 2: shift 'blur' given for an i.i.d. case"),
    ("case_tr000,test,false,\ncase_tr000,pool,false,", r"line 3: case 'case_tr000' is listed twice"),
])
def test_cases_csv_errors_name_the_file_and_line(raw, tmp_path, row, message):
    folder, _ = raw
    path = tmp_path / "bad.csv"
    path.write_text("case_id,split,ood,shift\n" + row + "\n")
    with pytest.raises(LayoutError, match=message) as err:
        create(folder=str(folder), cases_csv=str(path))
    assert str(path) in str(err.value)


def test_cases_csv_columns(raw, tmp_path):
    folder, _ = raw
    path = tmp_path / "c.csv"
    path.write_text("case_id,ood\ncase_tr000,true\n")
    with pytest.raises(LayoutError, match=r"c.csv: missing column\(s\) split"):
        create(folder=str(folder), cases_csv=str(path))
    path.write_text("case_id,split,spacing\ncase_tr000,test,1\n")
    with pytest.raises(LayoutError, match=r"c.csv: column\(s\) spacing would replace metadata"):
        create(folder=str(folder), cases_csv=str(path))
    for sub in ("labelsTs", "labelsTs_rater0", "labelsTs_rater1"):
        (folder / sub / "case_ts002.nii.gz").unlink()  # unlabelled: skipped, its CSV row ignored
    path.write_text("case_id,split,ood\ncase_ts002,test,true\ncase_ts001,test,true\n")
    ds = create(folder=str(folder), cases_csv=str(path))
    assert "Ts/case_ts002" in ds.skipped and ds.case_ids("test") == ["case_ts000", "case_ts001"]
    assert ds.meta("case_ts001")["ood"] is True
    with pytest.raises(LayoutError, match="cases CSV .* does not exist"):
        create(folder=str(folder), cases_csv=str(tmp_path / "none.csv"))


def test_validation_cases_from_the_iid_test_cases(raw, tmp_path):
    folder, _ = raw
    ds = create(folder=str(folder), val_source="test", seed=1)
    assert ds.case_ids("train") == TR
    val, test = ds.case_ids("val"), ds.case_ids("test")
    assert len(val) == math.ceil(0.2 * 3) == 1 and sorted(val + test) == TS
    (tmp_path / "c.csv").write_text("case_id,split,ood\ncase_ts000,test,true\ncase_ts001,test,true\n")
    with pytest.raises(LayoutError, match=r"val_source='test' needs at least 2 labelled i.i.d. test cases.*found 1"):
        create(folder=str(folder), val_source="test", cases_csv=str(tmp_path / "c.csv"))


def test_ood_folder_cases_are_ood_test_cases(raw, tmp_path):
    folder, written = raw
    ood = write_raw_dataset(tmp_path / "Dataset003_Bright", dims=2, shape=(12, 12), raters=2, train=0, test=2,
                            offset=2.0, name="Bright")
    ds = create(folder=str(folder), ood_folder=str(tmp_path / "Dataset003_Bright"))
    assert ds.case_ids("test") == TS + ["ood_case_ts000", "ood_case_ts001"]
    case = ds.load("ood_case_ts001")
    assert case.meta["ood"] is True and case.meta["shift"] == "Bright" and case.meta["source"] == "ood/imagesTs"
    np.testing.assert_array_equal(case.image[0], ood["case_ts001"].image[0])
    assert case.meta["origin"] == pytest.approx(list(ood["case_ts001"].origin))


def test_ood_folder_must_match_channels_and_labels(raw, tmp_path):
    folder, _ = raw
    write_raw_dataset(tmp_path / "two", dims=2, shape=(12, 12), channels=2, train=0, test=1)
    with pytest.raises(LayoutError, match=r"two/dataset.json: the OoD data set has 2 channel\(s\)"):
        create(folder=str(folder), ood_folder=str(tmp_path / "two"))
    write_raw_dataset(tmp_path / "labels", dims=2, shape=(12, 12), train=0, test=1)
    data = json.loads((tmp_path / "labels" / "dataset.json").read_text())
    data["labels"] = {"background": 0, "tumour": 1}
    (tmp_path / "labels" / "dataset.json").write_text(json.dumps(data))
    with pytest.raises(LayoutError, match=r"labels/dataset.json: the OoD data set's labels \['background', 'tumour'\]"):
        create(folder=str(folder), ood_folder=str(tmp_path / "labels"))


def test_fingerprint_refuses_changed_data(raw, tmp_path):
    folder, written = raw
    ds = create(folder=str(folder))
    key = ds.current_fingerprint
    assert create(folder=str(folder), fingerprint=key).current_fingerprint == key
    import SimpleITK as sitk

    path = folder / "labelsTs_rater0" / "case_ts002.nii.gz"
    image = sitk.ReadImage(str(path))
    sitk.WriteImage(image, str(path))  # same content, rewritten: a new state of the files
    with pytest.raises(ValueError, match=rf"the data changed since fingerprint {key} was taken"):
        create(folder=str(folder), fingerprint=key)
    (tmp_path / "c.csv").write_text("case_id,split\ncase_tr000,test\n")
    assert create(folder=str(folder), cases_csv=str(tmp_path / "c.csv")).current_fingerprint != \
        create(folder=str(folder)).current_fingerprint


def test_invalid_parameters(raw):
    folder, _ = raw
    with pytest.raises(ValueError, match=r"val_fraction must lie in \(0, 1\)"):
        create(folder=str(folder), val_fraction=1.5)
    with pytest.raises(ValueError, match="val_source"):
        create(folder=str(folder), val_source="pool")
