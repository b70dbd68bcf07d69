"""NIfTI + manifest on disk: layout, round trip, Table 1 counts, byte-identical reruns."""

import csv
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from toy_data_generator import generate_case, io, plan


def digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "preview.png"
    }


@pytest.fixture(scope="module")
def small(built_once):
    return built_once("toy3b-small", lambda out: (out, io.write_dataset(
        out, "3b", dims=2, size=32, seed=5, train_cases=6, val_cases=2, pool_iid=1, pool_ood=3, preview=False
    )))


def test_layout(small):
    out, written = small
    assert (
        (out / "manifest.csv").is_file() and (out / "dataset.json").is_file() and (out / "splits_final.json").is_file()
    )
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [
        "imagesPool",
        "imagesTr",
        "imagesTs",
        "labelsPool",
        "labelsTr",
        "labelsTs",
    ]
    rows = io.read_manifest(out)
    assert len(rows) == 6 + 2 + 63 + 4 == sum(c["total"] for c in written.counts.values())
    for row in rows:
        folder = {"train": "Tr", "val": "Tr", "test": "Ts", "pool": "Pool"}[row["split"]]
        assert row["image"] == f"images{folder}/{row['case']}_0000.nii.gz"
        assert row["raters"] == [f"labels{folder}/{row['case']}_rater{k}.nii.gz" for k in (1, 2, 3)]
        assert (out / row["image"]).is_file() and all((out / r).is_file() for r in row["raters"])
    assert written.files == 4 * len(rows) == len(list(out.rglob("*.nii.gz")))


def test_manifest_columns(small):
    out, _ = small
    with (out / "manifest.csv").open() as f:
        header = next(csv.reader(f))
    assert header[:6] == ["case", "split", "distribution", "shift", "blurred", "n_raters"]
    rows = io.read_manifest(out)
    assert {r["distribution"] for r in rows} == {"iid", "ood"}
    assert all(r["ood"] == (r["shift"] != "none") for r in rows)
    assert all(r["n_raters"] == 3 for r in rows)


def test_nifti_round_trip_equals_the_in_memory_case(small):
    out, _ = small
    specs = {s.case_id: s for split in plan("3b", 6, 2, 1, 3).values() for s in split}
    for row in io.read_manifest(out)[::9]:
        disk = io.read_case(out, row)
        mem = generate_case(specs[row["case"]], 2, 32, 5)
        assert disk.image.dtype == np.float32 and disk.raters.dtype == np.uint8
        np.testing.assert_array_equal(disk.image, mem.image)
        np.testing.assert_array_equal(disk.raters, mem.raters)
        assert disk.meta["shift"] == mem.meta["shift"] and disk.meta["blurred"] == mem.meta["blurred"]
        assert disk.meta["center"] == pytest.approx(mem.meta["center"], abs=1e-6)
    image = sitk.ReadImage(str(out / io.read_manifest(out)[0]["image"]))
    assert image.GetDimension() == 2 and image.GetSpacing() == (1.0, 1.0)
    assert image.GetPixelID() == sitk.sitkFloat32


def test_metadata_files(small):
    out, _ = small
    meta = json.loads((out / "dataset.json").read_text())
    assert meta["file_ending"] == ".nii.gz" and meta["labels"] == {"background": 0, "foreground": 1}
    assert meta["numTraining"] == 8
    assert meta["toy"]["scenario"] == "3b" and meta["toy"]["cases"] == {"train": 6, "val": 2, "test": 63, "pool": 4}
    assert meta["toy"]["blur_sigma_voxels"] == pytest.approx(4.0)
    splits = json.loads((out / "splits_final.json").read_text())
    assert len(splits[0]["train"]) == 6 and len(splits[0]["val"]) == 2
    assert not set(splits[0]["train"]) & set(splits[0]["val"])


@pytest.mark.parametrize("scenario", ["1", "2", "3a", "3b"])
def test_manifest_counts_equal_table_1(scenario):
    expected = {
        "1": (200, 200, 20, 20, 0),
        "2": (200, 0, 21, 0, 42),
        "3a": (200, 100, 21, 0, 42),
        "3b": (200, 100, 42, 21, 21),
    }
    # the manifest rows of every case of the full scenario (writing them all is the slow test's job)
    rows = [io.manifest_row(generate_case(s, 2, 32, 0)) for split in plan(scenario).values() for s in split]
    train = [r for r in rows if r["split"] == "train"]
    test = [r for r in rows if r["split"] == "test"]
    iid = [r for r in test if r["distribution"] == "iid"]
    got = (
        len(train),
        sum(r["blurred"] == "true" for r in train),
        len(iid),
        sum(r["blurred"] == "true" for r in iid),
        sum(r["distribution"] == "ood" for r in test),
    )
    assert got == expected[scenario]


def test_same_seed_gives_byte_identical_files(tmp_path):
    kw = dict(dims=2, size=32, seed=9, train_cases=4, val_cases=2, preview=False)
    io.write_dataset(tmp_path / "a", "3a", **kw)
    io.write_dataset(tmp_path / "b", "3a", workers=2, **kw)  # parallel writing changes nothing
    io.write_dataset(tmp_path / "c", "3a", **{**kw, "seed": 10})
    a, b, c = digest(tmp_path / "a"), digest(tmp_path / "b"), digest(tmp_path / "c")
    assert a == b
    assert a.keys() == c.keys() and a != c


@pytest.mark.slow
def test_full_3d_scenario_3b_is_complete_and_byte_identical(tmp_path):
    """The paper-sized 3D scenario (64^3) in full; no wall-clock limit here (a loaded CI machine is
    no benchmark): how fast it is belongs in benchmarks/."""
    written = io.write_dataset(tmp_path / "a", "3b", dims=3, size=64, seed=0, workers=2)
    assert written.files == 4 * (200 + 40 + 63)
    io.write_dataset(tmp_path / "b", "3b", dims=3, size=64, seed=0, preview=False, workers=1)
    assert digest(tmp_path / "a") == digest(tmp_path / "b")


def test_refuses_to_overwrite_unless_asked(tmp_path):
    kw = dict(dims=2, size=32, train_cases=2, val_cases=1, preview=False)
    io.write_dataset(tmp_path, "1", **kw)
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="overwrite"):
        io.write_dataset(tmp_path, "2", **kw)
    io.write_dataset(tmp_path, "2", overwrite=True, **kw)
    rows = io.read_manifest(tmp_path)
    assert {r["case"][:4] for r in rows} == {"toy2"}
    assert not list(tmp_path.rglob("toy1_*"))  # the old scenario's files are gone
    assert (tmp_path / "notes.txt").read_text() == "mine"  # foreign files are kept


def test_bad_parameters_fail_before_writing(tmp_path):
    with pytest.raises(ValueError, match="valid scenarios"):
        io.write_dataset(tmp_path / "x", "7")
    with pytest.raises(ValueError, match="dims must be 2 or 3"):
        io.write_dataset(tmp_path / "x", "1", dims=5)
    with pytest.raises(ValueError, match="too small"):
        io.write_dataset(tmp_path / "x", "1", size=8)
    assert not (tmp_path / "x").exists()


def test_read_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="manifest.csv"):
        io.read_manifest(tmp_path)
