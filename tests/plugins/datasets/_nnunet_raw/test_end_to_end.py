"""A tiny nnU-Net trained with nnU-Net's own API on a raw data set, then ``values-seg validate-nnunet``.

The data set (2D, three raters, every case with its own spacing, origin and rotated direction) and
an OoD data set are written in nnU-Net's raw layout; nnU-Net checks it (its dataset integrity
check), plans, preprocesses and trains two folds for one short epoch in a subprocess (nnU-Net reads
its folders from the environment at import). The command line then runs end to end: the report
exists and opens with the recommendation, and every uncertainty map has its input's geometry.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import SimpleITK as sitk

from values_seg_plugins.datasets._nnunet_raw.testing import write_raw_dataset
from values_seg.report.recommendation import criteria
from values_seg.report.spec import ReportSpec
from values_seg_plugins._nnunet.testing import training_script

NNUNET_SCRIPT = training_script(502)


@pytest.mark.slow
def test_train_nnunet_then_validate_nnunet_end_to_end(tmp_path):
    raw, pre, res = tmp_path / "raw", tmp_path / "pre", tmp_path / "res"
    data = raw / "Dataset502_Own"
    written = write_raw_dataset(data, dims=2, shape=(32, 32), raters=3, train=6, test=4, name="Own")
    shifted = write_raw_dataset(tmp_path / "Dataset503_Bright", dims=2, shape=(32, 32), raters=3, train=0, test=3,
                                offset=2.0, seed=7, name="Bright")
    env = dict(os.environ, nnUNet_raw=str(raw), nnUNet_preprocessed=str(pre), nnUNet_results=str(res),
               nnUNet_n_proc_DA="1", nnUNet_compile="false", OMP_NUM_THREADS="1")
    run = subprocess.run([sys.executable, "-c", NNUNET_SCRIPT], env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]

    model = res / "Dataset502_Own" / "nnUNetTrainer__nnUNetPlans__2d"
    out = tmp_path / "validation"
    command = [sys.executable, "-m", "values_seg.cli", "validate-nnunet", "--model-folder", str(model),
               "--dataset", str(data), "--ood-dataset", str(tmp_path / "Dataset503_Bright"),
               "--preprocessed-folder", str(pre / "Dataset502_Own"), "--out", str(out),
               "--save-maps", "predictive_entropy", "mutual_information", "--no-progress"]
    done = subprocess.run(command, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "tasks:" in done.stdout and f"report: {out / 'report.md'}" in done.stdout

    report = (out / "report.md").read_text()
    sections = [line for line in report.splitlines() if line.startswith("## ")]
    assert sections[:2] == ["## Recommendation", "## Run summary"]
    results = pd.read_csv(out / "results.csv")
    assert set(results["task"]) == {"segmentation", "ood_detection", "failure_detection", "calibration", "ambiguity",
                                    "separation"}
    assert set(results["prediction_model"]) == {"nnunet"}
    _check_recommendation(report, results, ReportSpec.load(out))

    cases = pd.read_csv(out / "cases.csv")
    test_ids = sorted(set(cases["case_id"]))
    index = pd.read_csv(out / "uncertainty_maps" / "index.csv")
    assert sorted(index["case_id"]) == test_ids and len(test_ids) == 3 + 3  # 4 i.i.d. test cases minus 1 for val
    inputs = {**written, **{"ood_" + k: v for k, v in shifted.items()}}
    for row in index.itertuples():
        w = inputs[row.case_id]
        source = sitk.ReadImage(row.image_files.split(";")[0])
        for name in ("predictive_entropy", "mutual_information"):
            umap = sitk.ReadImage(str(out / "uncertainty_maps" / getattr(row, name)))
            assert umap.GetSize() == source.GetSize()
            for what in ("Spacing", "Origin", "Direction"):
                np.testing.assert_allclose(getattr(umap, f"Get{what}")(), getattr(source, f"Get{what}")(), atol=1e-6)
            np.testing.assert_allclose(umap.GetSpacing(), w.spacing, rtol=1e-6)
            values = sitk.GetArrayFromImage(umap)
            assert values.shape == w.image.shape[1:] and np.isfinite(values).all() and values.min() >= 0
        # predictive entropy of two classes lies in [0, ln 2]
        pe = sitk.GetArrayFromImage(sitk.ReadImage(str(out / "uncertainty_maps" / row.predictive_entropy)))
        assert pe.max() <= np.log(2) + 1e-6

    rerun = subprocess.run([sys.executable, "-m", "values_seg.cli", "run", str(out / "config.yaml"), "--out", str(out),
                            "--no-progress"], env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True,
                           text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    pd.testing.assert_frame_equal(pd.read_csv(out / "results.csv"), results)  # the written config reproduces the run


def _recommendation_rows(report: str) -> dict[str, list[str]]:
    """The report's recommendation table: its first cell (the criterion) -> the other cells."""
    section = report.split("## Recommendation", 1)[1].split("\n## ", 1)[0]
    lines = [line.strip() for line in section.splitlines() if line.startswith("|")][2:]  # no header, no alignment
    if lines:
        cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
        return {c[0]: c[1:] for c in cells}
    # too wide for report.md's 100 columns: one list item per row, "- **task · best method · metric**: ..."
    rows = {}
    for item in re.split(r"\n- (?=\*\*)", "\n" + section)[1:]:
        label, _, rest = " ".join(item.split()).partition("**: ")
        parts = label.strip("*").split(" · ")
        rows[parts[0]] = [" · ".join(parts[1:-1]), parts[-1], rest]
    return rows


def _check_recommendation(report: str, results: pd.DataFrame, spec: ReportSpec) -> None:
    """Every task criterion the results hold has its row, titled and labelled by the run's declarations
    (components.json), with the nnU-Net as the best method (and a measure where the metric has one)."""
    rows = _recommendation_rows(report)
    model = spec.label("prediction_model", "nnunet")
    held = [c for c in criteria(spec) if ((results["task"] == c.metric.task) & (results["metric"] == c.metric.metric)
                                           & (results["split"] == c.split)).any()]
    assert {c.metric.task for c in held} >= {"segmentation", "ood_detection", "ambiguity"}
    assert sorted(rows) == sorted(c.title for c in held), rows
    measures = [spec.label("measure", m) for m in results["measure"].dropna().unique()]
    for c in held:
        best, metric = rows[c.title][:2]
        mine = results[(results["task"] == c.metric.task) & (results["metric"] == c.metric.metric)
                       & (results["split"] == c.split)]
        if not mine["supported"].any():  # e.g. failure detection on 3 cases of a split: never recommended
            assert best.startswith("no supported result"), (c.title, rows[c.title])
            continue
        if best.startswith("no winner"):  # e.g. every measure separates the bright shift perfectly: AUROC 1
            values = mine.loc[mine["supported"], "value"]
            top = values.max() if c.metric.direction == "higher" else values.min()
            assert np.isclose(values, top, rtol=1e-12, atol=1e-12).sum() >= 2, (c.title, rows[c.title])
            continue
        assert best.split(" · ")[0] == model and metric.startswith(c.metric.label), (c.title, rows[c.title])
        named = [part.split(" (")[0] for part in best.split(" · ")[1:]]  # "MI (EU)": the measure, its type
        assert any(m in named for m in measures) == c.metric.per_measure, (c.title, best)
