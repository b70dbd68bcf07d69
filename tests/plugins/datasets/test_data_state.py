"""A user's data that changes or is broken (issue 22, items 4 and 6).

Item 4: every cache key that depends on the data holds its fingerprint, so a label edited in
place is recomputed, never served stale. Item 6: NaN or infinite image values are refused when
the data set is validated, before any training, naming the file, in every supported format; and
a case whose prediction is not finite loses only itself at evaluation.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import SimpleITK as sitk

from values_seg.cli import main
from values_seg.config.loading import load_config
from values_seg_plugins.datasets._nnunet_raw.dataset_json import SUPPORTED_ENDINGS
from values_seg_plugins.datasets._nnunet_raw.reading import read_array
from values_seg_plugins.datasets._nnunet_raw.testing import write_raw_dataset
from values_seg.engine.inference import prediction_key
from values_seg.runner import run_experiment
from values_seg.evaluation.combination import evaluation_key
from values_seg.config.sweep import expand


def _config(folder: Path, **dataset_params) -> dict:
    return {"name": "own", "executor": "local",
            "datasets": [{"name": "nnunet_raw", "label": "own", "params": {"folder": str(folder), **dataset_params}}],
            "backbones": [{"name": "unet", "params": {"base_width": 4}}], "recipe": {"epochs": 1, "batch_size": 2},
            "prediction_models": ["deterministic"], "measures": ["predictive_entropy"], "aggregations": ["image"],
            "tasks": ["segmentation"], "evaluation": {"montage_cases": 0}, "statistics": {"n_resamples": 0}}


def _rewrite(path: Path, change) -> None:
    """Edit an image file in place (same name, same geometry), as a user fixing a label would."""
    image = sitk.ReadImage(str(path))
    edited = sitk.GetImageFromArray(change(sitk.GetArrayFromImage(image)))
    edited.CopyInformation(image)
    sitk.WriteImage(edited, str(path), useCompression=True)


def _keys(cfg) -> tuple:
    """The keys of the (one) combination's training, predictions and evaluation."""
    (combo,) = expand(cfg)
    model = combo.model.create()
    return combo.specs[0].key(), combo.dataset.key(), prediction_key(model, combo.specs), \
        evaluation_key(combo, {}, ["dice"])


# -- item 4: stale own data ------------------------------------------------------------------
def test_editing_a_test_label_in_place_recomputes_the_evaluation(tmp_path):
    folder = tmp_path / "Dataset001_Own"
    write_raw_dataset(folder, dims=2, shape=(32, 32), raters=1, train=4, test=2, seed=1)
    cfg = load_config(base=_config(folder))  # the own-data template's defaults: no fingerprint given
    assert run_experiment(cfg, tmp_path / "run", progress=False).ok
    before = pd.read_csv(tmp_path / "run" / "cases.csv").set_index("case_id")

    _rewrite(folder / "labelsTs" / "case_ts000.nii.gz", np.zeros_like)  # the object is not there after all
    assert run_experiment(cfg, tmp_path / "run", progress=False).ok
    after = pd.read_csv(tmp_path / "run" / "cases.csv").set_index("case_id")
    # against an empty reference the Dice is 1 for an empty prediction and 0 for any other
    assert after.loc["case_ts000", "dice"] in (0.0, 1.0) and after.loc["case_ts000", "dice"] != before.loc["case_ts000", "dice"]
    assert after.loc["case_ts001", "dice"] == pytest.approx(before.loc["case_ts001", "dice"])


def test_every_cache_key_holds_the_data_fingerprint(tmp_path):
    from values_seg.components.dataset import pin_fingerprint

    folder = tmp_path / "Dataset002_Own"
    write_raw_dataset(folder, dims=2, shape=(16, 16), raters=2, train=3, test=2)
    cfg = load_config(base=_config(folder))
    first = _keys(cfg)
    assert _keys(cfg) == first  # nothing changed: every cached result is reused
    (ref,) = cfg.refs("datasets")
    assert dict(pin_fingerprint(ref).kwargs)["fingerprint"] == ref.create().fingerprint()

    _rewrite(folder / "labelsTs_rater1" / "case_ts001.nii.gz", lambda a: 1 - a)
    changed = _keys(cfg)
    assert all(a != b for a, b in zip(first, changed)), "training, dataset, prediction and evaluation keys"


def test_content_fingerprints_ignore_a_touch_but_not_an_edit(tmp_path):
    folder = tmp_path / "Dataset003_Own"
    write_raw_dataset(folder, dims=2, shape=(16, 16), raters=1, train=2, test=1)
    label = folder / "labelsTr" / "case_tr000.nii.gz"
    stat, content = load_config(base=_config(folder)), load_config(base=_config(folder, fingerprint_mode="content"))
    (ref_stat,), (ref_content,) = stat.refs("datasets"), content.refs("datasets")
    fp_stat, fp_content = ref_stat.create().fingerprint(), ref_content.create().fingerprint()
    assert fp_stat != fp_content

    st = label.stat()
    os.utime(label, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touched: same bytes, newer time
    assert ref_stat.create().fingerprint() != fp_stat
    assert ref_content.create().fingerprint() == fp_content
    _rewrite(label, lambda a: 1 - a)
    assert ref_content.create().fingerprint() != fp_content


def test_a_pinned_fingerprint_refuses_changed_files_with_what_to_do(tmp_path, capsys):
    folder = tmp_path / "Dataset004_Own"
    write_raw_dataset(folder, dims=2, shape=(16, 16), raters=1, train=2, test=1)
    (ref,) = load_config(base=_config(folder)).refs("datasets")
    pinned = ref.create().fingerprint()
    _rewrite(folder / "labelsTs" / "case_ts000.nii.gz", lambda a: 1 - a)
    import yaml

    (tmp_path / "own.yaml").write_text(yaml.safe_dump(_config(folder, fingerprint=pinned)))
    assert main(["run", str(tmp_path / "own.yaml"), "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"the data changed since fingerprint {pinned} was taken" in err
    assert "set fingerprint: " in err and "or null to have the changed data recomputed" in err
    assert "Traceback" not in err


def test_the_own_data_template_leaves_the_fingerprint_to_the_run():
    import yaml

    template = Path(__file__).parents[3] / "experiments" / "own_data_template.yaml"
    params = yaml.safe_load(template.read_text())["datasets"][0]["params"]
    assert params["fingerprint"] is None and params["fingerprint_mode"] == "stat"


# -- item 6: non-finite image values ---------------------------------------------------------
def test_nifti_voxels_are_read_as_stored_nan_and_inf_included(tmp_path):
    """SimpleITK's NIfTI reader turns NaN and inf into 0; the data set reads what the file holds."""
    array = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    array[1, 2, 3], array[0, 1, 0] = np.nan, -np.inf
    for ending in (".nii.gz", ".nii"):
        path = tmp_path / f"x{ending}"
        sitk.WriteImage(sitk.GetImageFromArray(array), str(path))
        got = read_array(path)
        assert got.shape == array.shape
        np.testing.assert_array_equal(got, array)  # NaN where NaN was written, -inf where -inf


@pytest.mark.parametrize("ending", SUPPORTED_ENDINGS)
def test_non_finite_image_values_are_refused_before_any_training(ending, tmp_path, capsys):
    import yaml

    folder = tmp_path / "Dataset005_Own"
    write_raw_dataset(folder, dims=2, shape=(16, 16), raters=1, train=3, test=2, file_ending=ending)
    bad = {folder / "imagesTs" / f"case_ts001_0000{ending}": np.nan,
           folder / "imagesTr" / f"case_tr002_0000{ending}": np.inf}
    for path, value in bad.items():
        _rewrite(path, lambda a, v=value: np.where(np.arange(a.size).reshape(a.shape) == 7, v, a).astype(np.float32))
    (tmp_path / "own.yaml").write_text(yaml.safe_dump(_config(folder)))
    run = tmp_path / "run"
    assert main(["run", str(tmp_path / "own.yaml"), "--out", str(run), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "2 file(s) of the data set cannot be used" in err and "Traceback" not in err
    assert f"{bad_nan(bad)}: 1 NaN and 0 infinite value(s)" in err
    assert f"{bad_inf(bad)}: 0 NaN and 1 infinite value(s)" in err
    assert not list(run.rglob("*.pt")), "nothing is trained"


def bad_nan(bad: dict) -> Path:
    return next(p for p, v in bad.items() if np.isnan(v))


def bad_inf(bad: dict) -> Path:
    return next(p for p, v in bad.items() if np.isinf(v))


def test_validate_nnunet_checks_the_images_of_the_evaluated_cases(tmp_path):
    from values_seg import registry
    from values_seg_plugins.datasets._nnunet_raw.dataset_json import LayoutError
    from values_seg_plugins.datasets._nnunet_raw.validate import check_all_labels

    folder = tmp_path / "Dataset006_Own"
    write_raw_dataset(folder, dims=2, shape=(16, 16), raters=1, train=2, test=2)
    path = folder / "imagesTs" / "case_ts000_0000.nii.gz"
    _rewrite(path, lambda a: np.full_like(a, np.nan))
    dataset = registry.create("dataset", "nnunet_raw", folder=str(folder), val_source="test")
    with pytest.raises(LayoutError, match=rf"{path}: 256 NaN and 0 infinite value\(s\)"):
        check_all_labels(dataset, progress=False)


PLUGIN = '''
import torch
from values_seg import hookimpl
from plugins.prediction_models.deterministic import Deterministic


class NanForOneCase(Deterministic):
    """The deterministic model, with a NaN prediction for case {case!r}."""
    name = "nan_for_one_case"
    label = "NaN1"

    def predict_case(self, networks, case, device):
        samples = super().predict_case(networks, case, device)
        return samples * float("nan") if case.case_id == {case!r} else samples


@hookimpl
def values_seg_prediction_models():
    return [NanForOneCase]
'''


def test_a_non_finite_prediction_loses_only_its_own_case(tmp_path, monkeypatch):
    folder = tmp_path / "Dataset007_Own"
    write_raw_dataset(folder, dims=2, shape=(32, 32), raters=1, train=4, test=3, seed=2)
    (tmp_path / "nan_one_case.py").write_text(textwrap.dedent(PLUGIN.format(case="case_ts001")))
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = load_config(base={**_config(folder), "plugins": ["nan_one_case"], "prediction_models": ["nan_for_one_case"]})
    summary = run_experiment(cfg, tmp_path / "run", progress=False)
    assert not summary.ok
    assert [f["job"].split(" ", 1)[1] for f in summary.failures] == ["case test/case_ts001"]
    assert "case 'case_ts001'" in summary.failures[0]["error"] and "NaN" in summary.failures[0]["error"]
    cases = pd.read_csv(tmp_path / "run" / "cases.csv")
    assert sorted(set(cases["case_id"])) == ["case_ts000", "case_ts002"]
    results = pd.read_csv(tmp_path / "run" / "results.csv")
    assert not results[results["metric"] == "dice"].empty


def test_a_case_with_invalid_samples_at_evaluation_loses_only_itself():
    import torch

    from values_seg import registry
    from values_seg.components.case_context import CaseContext
    from values_seg.evaluation.combination import LiveComponents

    live = LiveComponents({"pe": registry.create("measure", "predictive_entropy")}, {})
    raters = np.zeros((1, 4, 4), dtype=np.uint8)
    good = torch.full((1, 2, 4, 4), 0.5)
    bad = good.clone()
    bad[0, :, 1, 1] = float("nan")
    assert live.evaluate(bad, raters, CaseContext("c1"), split="test") is None
    assert live.evaluate(good, raters, CaseContext("c2"), split="test") is not None
    assert list(live.failed) == ["case test/c1"] and "NaN" in live.failed["case test/c1"]
    assert list(live.measures) == ["pe"]  # the measure stays for the other cases
