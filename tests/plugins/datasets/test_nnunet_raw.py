"""The ``nnunet_raw`` dataset through a tiny sweep with the framework's own prediction models.

Two small multi-rater data sets in nnU-Net's raw layout, written here with SimpleITK: 2D with one
channel, three raters and an OoD data set; 3D with two channels, two raters, nnU-Net's
``splits_final.json`` and a cases CSV declaring OoD and pool cases. After one sweep (deterministic
and a 2-member ensemble, 1 epoch) the tests check the splits, that the raters (not nnU-Net's
majority label) reach the evaluation, and that uncertainty maps come back in each case's geometry.
"""

import json
import math

import numpy as np
import pandas as pd
import pytest
import SimpleITK as sitk

from values_seg import registry
from values_seg.config.loading import load_config
from values_seg_plugins.datasets._nnunet_raw import support
from values_seg_plugins.datasets._nnunet_raw.maps import MAPS_DIR, save_maps
from values_seg_plugins.datasets._nnunet_raw.testing import write_raw_dataset
from values_seg.runner import run_experiment

TASKS = ["segmentation", "ood_detection", "failure_detection", "calibration", "ambiguity", "separation"]


@pytest.fixture(scope="module")
def sweep(built_once):
    """The sweep, run once per session (read-only)."""
    return built_once("nnunet-raw-sweep", _sweep)


def _sweep(root):
    d2 = write_raw_dataset(root / "Dataset010_Flat", dims=2, shape=(32, 32), raters=3, train=6, test=3, seed=1)
    ood = write_raw_dataset(root / "Dataset011_Bright", dims=2, shape=(32, 32), raters=3, train=0, test=2, offset=1.5,
                            seed=2, name="Bright")
    d3 = write_raw_dataset(root / "Dataset012_Vol", dims=3, shape=(16, 16, 16), channels=2, raters=2, train=6, test=2,
                           seed=3)
    pre = root / "pre"
    pre.mkdir()
    tr3 = [f"case_tr{i:03d}" for i in range(6)]
    (pre / "splits_final.json").write_text(json.dumps([{"train": tr3[1:], "val": tr3[:1]},
                                                       {"train": tr3[:2] + tr3[3:], "val": tr3[2:3]}]))
    (root / "cases.csv").write_text("case_id,split,ood,shift\ncase_tr004,test,true,artefact\ncase_tr005,pool,false,\n")
    params2 = {"folder": str(root / "Dataset010_Flat"), "ood_folder": str(root / "Dataset011_Bright")}
    params3 = {"folder": str(root / "Dataset012_Vol"), "preprocessed_folder": str(pre), "fold": 1,
               "cases_csv": str(root / "cases.csv")}
    config = {
        "name": "own_tiny",
        "datasets": [{"name": "nnunet_raw", "label": "flat", "params": params2},
                     {"name": "nnunet_raw", "label": "vol", "params": params3}],
        "backbones": [{"name": "unet", "params": {"base_width": 4}}],
        "recipe": {"epochs": 1, "batch_size": 2},
        "prediction_models": ["deterministic", {"name": "ensemble", "params": {"members": 2}}],
        "measures": ["predictive_entropy", "expected_entropy", "mutual_information", "max_softmax"],
        "aggregations": [{"name": "patch", "params": {"size": 5}}],
        "tasks": TASKS,
        "evaluation": {"montage_cases": 0},
    }
    cfg = load_config(base=config)
    run_dir = root / "run"
    summary = run_experiment(cfg, run_dir, progress=False)
    save_maps(cfg, run_dir, ["predictive_entropy"], progress=False)
    return {"run": run_dir, "summary": summary, "written": {"flat": d2, "vol": d3, "ood": ood},
            "params": {"flat": params2, "vol": params3}}


def test_the_sweep_runs_every_task_the_data_supports(sweep):
    assert sweep["summary"].ok, sweep["summary"].describe()
    results = pd.read_csv(sweep["run"] / "results.csv")
    for label in ("flat", "vol"):
        ds = registry.create("dataset", "nnunet_raw", **sweep["params"][label])
        chosen = support.supported_tasks(support.facts(ds), "bayesian", retrainable=True)
        tasks = set(results.loc[results["scenario"] == label, "task"])
        assert tasks == set(chosen.tasks) - {"active_learning"}, label  # AL is left out of this sweep
    vol = support.facts(registry.create("dataset", "nnunet_raw", **sweep["params"]["vol"]))
    assert (vol.iid_test, vol.ood_test, vol.max_test_raters, vol.pool) == (2, 1, 2, 1)


def test_splits(sweep):
    flat = registry.create("dataset", "nnunet_raw", **sweep["params"]["flat"])
    tr = [f"case_tr{i:03d}" for i in range(6)]
    train, val = flat.case_ids("train"), flat.case_ids("val")
    assert sorted(train + val) == tr and len(val) == math.ceil(0.2 * 6)  # seeded
    vol = registry.create("dataset", "nnunet_raw", **sweep["params"]["vol"])
    # fold 1 of splits_final.json, minus the cases the CSV declares test and pool
    assert vol.case_ids("train") == ["case_tr000", "case_tr001", "case_tr003"]
    assert vol.case_ids("val") == ["case_tr002"]
    assert vol.case_ids("pool") == ["case_tr005"]
    cases = pd.read_csv(sweep["run"] / "cases.csv")
    tested = {label: sorted(set(cases.loc[(cases["scenario"] == label) & (cases["split"] == "test"), "case_id"]))
              for label in ("flat", "vol")}
    assert tested["flat"] == ["case_ts000", "case_ts001", "case_ts002", "ood_case_ts000", "ood_case_ts001"]
    assert tested["vol"] == ["case_tr004", "case_ts000", "case_ts001"]
    flags = cases.drop_duplicates(["scenario", "case_id"]).set_index(["scenario", "case_id"])
    assert flags.loc[("flat", "ood_case_ts001"), "shift"] == "Bright" and flags.loc[("flat", "ood_case_ts001"), "ood"]
    assert flags.loc[("vol", "case_tr004"), "shift"] == "artefact" and not flags.loc[("vol", "case_ts001"), "ood"]


def _dice(prediction, mask):
    p, m = prediction.astype(bool), mask.astype(bool)
    total = p.sum() + m.sum()
    return 1.0 if total == 0 else 2.0 * float((p & m).sum()) / float(total)


def _ncc(a, b):
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    a, b = a - a.mean(), b - b.mean()
    return float((a * b).mean() / math.sqrt((a * a).mean() * (b * b).mean()))


def test_every_rater_reaches_the_evaluation(sweep):
    """Dice (eq. 3) and NCC from the written rater masks, recomputed in float64 from the exported maps."""
    cases = pd.read_csv(sweep["run"] / "cases.csv")
    index = pd.read_csv(sweep["run"] / MAPS_DIR / "index.csv")
    written = {**{("flat", k): v for k, v in sweep["written"]["flat"].items()},
               **{("flat", "ood_" + k): v for k, v in sweep["written"]["ood"].items()},
               **{("vol", k): v for k, v in sweep["written"]["vol"].items()}}
    rows = index[index["prediction_model"] == "deterministic"]
    assert len(rows) == 8
    for row in rows.itertuples():
        w = written[(row.scenario, row.case_id)]
        folder = sweep["run"] / MAPS_DIR / row.folder
        prediction = sitk.GetArrayFromImage(sitk.ReadImage(str(folder / "prediction.nii.gz")))
        entropy = sitk.GetArrayFromImage(sitk.ReadImage(str(folder / "predictive_entropy.nii.gz")))
        record = cases[(cases["scenario"] == row.scenario) & (cases["prediction_model"] == "deterministic")
                       & (cases["case_id"] == row.case_id) & (cases["measure"] == "predictive_entropy")].iloc[0]
        assert record["n_raters"] == w.raters.shape[0]
        expected = np.mean([_dice(prediction, r) for r in w.raters])
        assert record["dice"] == pytest.approx(expected, abs=1e-12)
        assert record["ncc"] == pytest.approx(_ncc(w.raters.var(axis=0), entropy), abs=1e-4)


def test_maps_have_each_case_geometry_and_the_measure_values(sweep):
    from values_seg.engine import Checkpoints, PredictionCache, predict_split
    from values_seg.config.sweep import expand

    run = sweep["run"]
    index = pd.read_csv(run / MAPS_DIR / "index.csv")
    assert len(index) == 16 and set(index["folder"].str.split("/").str[0]) == {
        "flat__deterministic__unet__seed0", "flat__ensemble__unet__seed0",
        "vol__deterministic__unet__seed0", "vol__ensemble__unet__seed0"}
    written = {"flat": {**sweep["written"]["flat"], **{"ood_" + k: v for k, v in sweep["written"]["ood"].items()}},
               "vol": sweep["written"]["vol"]}
    for row in index.itertuples():
        w = written[row.scenario][row.case_id]
        image = sitk.ReadImage(str(run / MAPS_DIR / row.predictive_entropy))
        assert image.GetDimension() == w.image.ndim - 1
        assert sitk.GetArrayFromImage(image).shape == w.image.shape[1:]
        np.testing.assert_allclose(image.GetSpacing(), w.spacing, rtol=1e-6)
        np.testing.assert_allclose(image.GetOrigin(), w.origin, atol=1e-5)
        np.testing.assert_allclose(image.GetDirection(), w.direction, atol=1e-6)
        assert row.image_files.split(";")[0].endswith(f"{w.ident}_0000.nii.gz")
    # values: the entropy of the mean of the cached samples, in float64
    cfg = load_config(run / "config.yaml")
    combo = next(c for c in expand(cfg) if c.scenario == "vol" and c.model.label == "ensemble")
    cache = PredictionCache(run / "cache" / "predictions")
    handles = predict_split(combo.model.create(), combo.specs, Checkpoints(run / "cache" / "checkpoints"),
                            combo.dataset, "test", cache, progress=False)
    for handle in handles:
        mean = handle.load().double().numpy().mean(axis=0)
        reference = -(mean * np.log(np.where(mean > 0, mean, 1.0))).sum(axis=0)
        row = index[(index["scenario"] == "vol") & (index["prediction_model"] == "ensemble")
                    & (index["case_id"] == handle.case_id)].iloc[0]
        written_map = sitk.GetArrayFromImage(sitk.ReadImage(str(run / MAPS_DIR / row["predictive_entropy"])))
        np.testing.assert_allclose(written_map, reference, atol=1e-5)


def test_save_maps_rejects_unknown_measures(sweep):
    cfg = load_config(sweep["run"] / "config.yaml")
    with pytest.raises(ValueError, match="unknown measure.*epkl.*this run has predictive_entropy, expected_entropy"):
        save_maps(cfg, sweep["run"], ["epkl"], progress=False)
