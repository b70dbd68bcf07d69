"""The ``lidc`` dataset plugin on synthetic data in the prepared layout, and (slow) the reduced
CPU texture study end to end through ``values-seg run``."""

import json
from pathlib import Path

import numpy as np
import pytest

from values_seg import registry
from values_seg.cli import main
from values_seg.components.dataset import Dataset
from values_seg_plugins.datasets._lidc.synthetic import write_synthetic
from values_seg.report.rundir import load_run
from values_seg.report.tables import LABEL_HEADERS, Column, downstream_tables

EXPERIMENTS = Path(__file__).resolve().parents[3] / "experiments"


@pytest.fixture(scope="module")
def root(built_once):
    """Synthetic prepared LIDC crops with their split files (read-only: tests that modify it copy it)."""
    return built_once("lidc-synthetic", _write_root)


def _write_root(root):
    write_synthetic(root, patients=24, ood_patients=6, seed=0)
    assert main(["data", "lidc", "splits", "--root", str(root)]) == 0
    return root


def _split_file(root, name="texture"):
    return json.loads((root / "splits" / f"{name}_seed123.json").read_text())


def test_registered_with_its_parameters():
    component = registry.get("dataset", "lidc")
    assert component.description.startswith("LIDC-IDRI nodule crops")
    names = [p.name for p in component.params]
    assert names[:4] == ["root", "shift", "seed", "fold"]


def test_splits_follow_the_split_file(root):
    ds = registry.create("dataset", "lidc", root=str(root))
    assert isinstance(ds, Dataset) and ds.splits() == ["train", "val", "test", "pool"]
    s = _split_file(root)
    assert ds.case_ids("train") == s["folds"][0]["train"] and ds.case_ids("val") == s["folds"][0]["val"]
    assert ds.case_ids("test") == s["sets"]["iid_test"] + s["sets"]["ood_test"]
    assert ds.case_ids("pool") == s["sets"]["iid_pool"] + s["sets"]["ood_pool"]
    fold2 = registry.create("dataset", "lidc", root=str(root), fold=2)
    assert fold2.case_ids("val") == s["folds"][2]["val"]


def test_cases_image_raters_and_meta(root):
    ds = registry.create("dataset", "lidc", root=str(root))
    s = _split_file(root)
    ood_test = set(s["sets"]["ood_test"])
    for cid in ds.case_ids("test"):
        case = ds.load(cid)
        case.validate(3, 1, 2)
        assert case.image.shape == (1, 64, 64, 64) and case.image.dtype == np.float32
        assert case.raters.shape == (4, 64, 64, 64) and np.issubdtype(case.raters.dtype, np.integer)
        assert case.meta["ood"] == (cid in ood_test)
        assert case.meta["shift"] == ("texture" if cid in ood_test else "none")
        assert case.meta["patient_id"] == s["patients"][cid]
        votes = sum(r >= 3 for r in case.meta["texture"])
        assert (votes < 2) if case.meta["ood"] else (votes > 2)
    pool = [ds.load(c).meta for c in ds.case_ids("pool")]
    assert any(m["ood"] for m in pool) and not all(m["ood"] for m in pool)


def test_training_draws_one_of_the_four_raters(root):
    ds = registry.create("dataset", "lidc", root=str(root))
    case = ds.load(ds.case_ids("train")[0])
    for u, r in ((0.0, 0), (0.3, 1), (0.6, 2), (0.99, 3)):
        assert np.array_equal(ds.training_label(case.raters, u), case.raters[r])


def test_size_crops_the_centre_and_max_cases_caps_every_set(root):
    full = registry.create("dataset", "lidc", root=str(root))
    small = registry.create("dataset", "lidc", root=str(root), size=24, max_cases=2)
    cid = small.case_ids("test")[0]
    assert np.array_equal(small.load(cid).image, full.load(cid).image[:, 20:44, 20:44, 20:44])
    assert [len(small.case_ids(s)) for s in small.splits()] == [2, 2, 4, 4]


def test_malignancy_and_other_shifts(root):
    ds = registry.create("dataset", "lidc", root=str(root), shift="malignancy")
    meta = ds.load(ds.case_ids("test")[-1]).meta
    assert meta["ood"] and meta["shift"] == "malignancy"
    with pytest.raises(FileNotFoundError, match="values-seg data lidc splits"):
        registry.create("dataset", "lidc", root=str(root), shift="spiculation")


def test_clear_errors(root, tmp_path):
    with pytest.raises(ValueError, match="datasets.0.params.root="):
        registry.create("dataset", "lidc")
    with pytest.raises(FileNotFoundError, match="prepare LIDC-IDRI first"):
        registry.create("dataset", "lidc", root=str(tmp_path))
    with pytest.raises(ValueError, match="valid: subtlety"):
        registry.create("dataset", "lidc", root=str(root), shift="colour")
    with pytest.raises(ValueError, match="fold 7 out of range"):
        registry.create("dataset", "lidc", root=str(root), fold=7)


def test_corrupted_and_missing_files_are_detected(root, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    ds = registry.create("dataset", "lidc", root=str(copy))
    cid = ds.case_ids("val")[0]
    path = copy / "labels" / f"{cid}_r1.nii.gz"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ValueError, match=rf"case {cid} \(patient LIDC-IDRI-\d+\): labels/{cid}_r1.nii.gz has"):
        ds.load(cid)
    manifest = (copy / "manifest.csv").read_text().splitlines()
    (copy / "manifest.csv").write_text("\n".join(l for l in manifest if not l.startswith(cid)) + "\n")
    with pytest.raises(ValueError, match=rf"1 case\(s\) of the split file are not in .*{cid}"):
        registry.create("dataset", "lidc", root=str(copy))
    with pytest.warns(UserWarning, match="skipped"):
        ds = registry.create("dataset", "lidc", root=str(copy), allow_missing=True)
    assert cid not in ds.case_ids("val")


@pytest.mark.slow
def test_quick_texture_study_end_to_end(root, tmp_path):
    """experiments/lidc_texture_quick.yaml on the synthetic data (tiny crops, two models, 2 epochs)."""
    import pandas as pd

    overrides = [f"datasets.0.params.root={root}", "datasets.0.params.size=16", "datasets.0.params.max_cases=12",
                 "recipe.epochs=2", "prediction_models=[deterministic,test_time_dropout]",
                 "measures=[predictive_entropy,expected_entropy,mutual_information,max_softmax]",
                 "aggregations=[{name: patch, params: {size: 10}}]"]
    run_dir = tmp_path / "run"
    code = main(["run", str(EXPERIMENTS / "lidc_texture_quick.yaml"), *overrides, "--out", str(run_dir),
                 "--no-progress"])
    assert code == 0, (run_dir / "failures.csv").read_text() if (run_dir / "failures.csv").exists() else code
    results = pd.read_csv(run_dir / "results.csv")
    assert set(results["dataset"]) == {"lidc"} and set(results["scenario"]) == {"lidc_tex"}
    seg = results[results["task"] == "segmentation"]
    assert {"iid", "ood"} <= set(seg["split"])
    assert set(results["task"]) >= {"segmentation", "ood_detection", "failure_detection", "calibration",
                                    "ambiguity", "active_learning", "separation"}
    report = (run_dir / "report.md").read_text()
    run = load_run(run_dir)
    [table] = downstream_tables(run.results, run.spec)
    assert f"### {table.scenario.title} ({table.scenario.dataset})" in report
    _check_active_learning_rows(results, run.spec)
    _check_declared_columns(table, run_dir, report, ("segmentation", "active_learning"))


def _check_active_learning_rows(results, spec):
    """Active learning scored every method of an uncertainty type it declares suited, and no other."""
    suited = set(spec.suited_types("active_learning"))
    methods = results[results["task"] == "failure_detection"]  # every prediction model × measure × aggregation
    expected = {(r.prediction_model, r.measure, r.aggregation) for r in methods.itertuples()
                if r.uncertainty_type in suited}
    al = results[results["task"] == "active_learning"]
    assert expected and set(zip(al["prediction_model"], al["measure"], al["aggregation"])) == expected


def _check_declared_columns(table, run_dir, report, tasks):
    """Each declared table metric of ``tasks`` (per declared split) is a column of the downstream table,
    headed by its declared label in report.md and tables/; active learning's column is filled exactly
    in the rows of the uncertainty types the task declares suited."""
    import pandas as pd

    spec = table.spec
    frame = pd.read_csv(run_dir / "tables" / f"downstream_{table.scenario.slug}.csv")
    suited = {spec.label("uncertainty_type", t) for t in spec.suited_types("active_learning")}
    for task in tasks:
        for m in spec.entry("task", task)["metrics"]:
            for split in m["splits"] if m.get("table", True) else ():
                column = Column(spec.metric_spec(task, m["name"]), split)
                assert column in table.columns and column.header in frame.columns, column
                assert column.header.startswith(m["label"]) and f" {column.header} |" in report, column.header
                if task == "active_learning":
                    filled = frame[column.header].notna()
                    assert filled.any() and (filled == frame[LABEL_HEADERS["uncertainty_type"]].isin(suited)).all()


def test_a_prepared_folder_prepared_again_gets_new_cache_keys(root, tmp_path):
    """The cache keys hold the manifest's fingerprint (it records every crop's sha256): a crop
    prepared anew (file and manifest row) is recomputed; the old fingerprint, pinned, is refused."""
    import csv
    import hashlib
    import shutil

    from values_seg.components.dataset import pin_fingerprint
    from values_seg.registry import ComponentRef

    copy = tmp_path / "prepared"
    shutil.copytree(root, copy)
    ref = ComponentRef("dataset", "lidc", {"root": str(copy)})
    before = pin_fingerprint(ref)
    assert pin_fingerprint(ref) == before and dict(before.kwargs)["fingerprint"]

    with open(copy / "manifest.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    row = rows[0]
    crop = copy / row["image_path"]
    crop.write_bytes(crop.read_bytes() + b"\0")  # a new version of the crop, recorded as prepare does
    row["image_bytes"], row["image_sha256"] = str(crop.stat().st_size), hashlib.sha256(crop.read_bytes()).hexdigest()
    with open(copy / "manifest.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    after = pin_fingerprint(ref)
    assert after.key() != before.key()
    with pytest.raises(ValueError, match="the data changed since fingerprint"):
        before.create()
