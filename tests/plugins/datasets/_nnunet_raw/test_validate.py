"""``values-seg validate-nnunet`` before any work: checks, task choice, the written config, clear errors.

The full run (a trained nnU-Net, the report, NIfTI maps) is the slow test in test_end_to_end.py.
"""

import pytest
import SimpleITK as sitk
import yaml

from values_seg.cli import main
from values_seg.config.loading import load_config
from values_seg_plugins.datasets._nnunet_raw.testing import write_raw_dataset

from .conftest import write_array


@pytest.fixture(scope="module")
def model(built_once):
    from values_seg_plugins._nnunet.testing import make_model_folder

    return built_once("nnunet-model-2d-plain", lambda folder: make_model_folder(folder, dims=2, folds=(0, 1)))


@pytest.fixture
def data(tmp_path):
    write_raw_dataset(tmp_path / "Dataset020_Own", dims=2, shape=(32, 32), raters=3, train=4, test=4, name="Own")
    write_raw_dataset(tmp_path / "Dataset021_Shift", dims=2, shape=(32, 32), raters=3, train=0, test=2, offset=1.0,
                      name="Shift", seed=5)
    return tmp_path


def command(model, data, *extra):
    return ["validate-nnunet", "--model-folder", str(model), "--dataset", str(data / "Dataset020_Own"),
            "--out", str(data / "out"), "--no-progress", *extra]


def test_config_only_writes_a_config_of_what_the_data_supports(model, data, capsys):
    assert main(command(model, data, "--ood-dataset", str(data / "Dataset021_Shift"), "--config-only")) == 0
    out = capsys.readouterr().out
    assert "+ ood_detection: 3 i.i.d. vs 2 OoD test cases" in out and "- active_learning" in out
    cfg = load_config(data / "out" / "config.yaml")  # valid for values-seg run
    raw = yaml.safe_load((data / "out" / "config.yaml").read_text())
    dataset = raw["datasets"][0]
    assert dataset["name"] == "nnunet_raw" and dataset["label"] == "Own"
    assert dataset["params"]["val_source"] == "test" and len(dataset["params"]["fingerprint"]) == 16
    assert dataset["params"]["ood_folder"] == str((data / "Dataset021_Shift").resolve())
    assert raw["prediction_models"][0]["params"]["mirroring"] is True
    assert raw["backbones"] == []  # the nnunet model was trained by nnU-Net: no backbone
    assert [t["name"] for t in raw["tasks"]] == ["segmentation", "ood_detection", "failure_detection", "calibration",
                                                 "ambiguity", "separation"]
    measures = [m["name"] for m in raw["measures"]]
    assert "max_softmax" not in measures and {"predictive_entropy", "expected_entropy", "mutual_information"} <= set(measures)
    assert {a["name"] for a in raw["aggregations"]} >= {"patch", "threshold", "image"}
    assert cfg.datasets[0].kwargs["fingerprint"] == dataset["params"]["fingerprint"]


def test_without_ood_or_held_out_cases_the_tasks_and_validation_shrink(model, data, capsys):
    for sub in ("labelsTs", "labelsTs_rater0", "labelsTs_rater1", "labelsTs_rater2"):
        for i in (1, 2, 3):
            (data / "Dataset020_Own" / sub / f"case_ts{i:03d}.nii.gz").unlink()
    assert main(command(model, data, "--config-only")) == 0
    captured = capsys.readouterr()
    assert "fewer than 2 labelled i.i.d. test cases" in captured.err
    assert "3 case(s) skipped, see" in captured.err
    skipped = (data / "out" / "skipped_cases.csv").read_text()
    assert 'Ts/case_ts001,"imagesTs/case_ts001: no label in labelsTs_rater0, ' in skipped
    raw = yaml.safe_load((data / "out" / "config.yaml").read_text())
    assert "val_source" not in raw["datasets"][0]["params"]  # the default: validation cases from training
    assert [t["name"] for t in raw["tasks"]] == ["segmentation", "failure_detection", "calibration", "ambiguity"]


def test_a_model_that_does_not_fit_the_data(model, tmp_path, capsys):
    write_raw_dataset(tmp_path / "Dataset022_Two", dims=2, shape=(32, 32), channels=2, train=2, test=2)
    code = main(["validate-nnunet", "--model-folder", str(model), "--dataset", str(tmp_path / "Dataset022_Two"),
                 "--config-only", "--out", str(tmp_path / "o")])
    assert code == 2
    assert f"{model / 'dataset.json'}: the model takes 1 channel(s)" in capsys.readouterr().err


def test_every_bad_label_file_is_listed_before_any_work(model, data, capsys):
    bad = [data / "Dataset020_Own" / "labelsTs_rater2" / "case_ts001.nii.gz",
           data / "Dataset020_Own" / "labelsTs_rater0" / "case_ts003.nii.gz"]
    for path in bad:
        label = sitk.GetArrayFromImage(sitk.ReadImage(str(path)))
        label[0, 0] = 4
        write_array(path, label, like=path)
    assert main(command(model, data)) == 2
    err = capsys.readouterr().err
    assert "2 file(s) of the data set cannot be used" in err
    assert all(f"{p}: label value(s) 4 are not declared" in err for p in bad)
    assert not (data / "out").exists()


def test_layout_and_option_errors_are_clear(model, data, capsys):
    (data / "Dataset020_Own" / "labelsTr_rater1" / "case_tr000.nii.gz").unlink()
    assert main(command(model, data)) == 2
    assert "labelsTr_rater1: rater folders must hold the same case names" in capsys.readouterr().err
    assert main(command(model, data / "nowhere")) == 2
    assert "does not exist" in capsys.readouterr().err
    write_raw_dataset(data / "fresh", dims=2, shape=(32, 32), raters=3, train=2, test=3)
    assert main(["validate-nnunet", "--model-folder", str(model), "--dataset", str(data / "fresh"), "--save-maps",
                 "max_softmax", "--config-only", "--out", str(data / "o2")]) == 2
    assert "--save-maps: unknown measure(s) max_softmax" in capsys.readouterr().err
    assert main(["validate-nnunet", "--model-folder", str(data), "--dataset", str(data / "fresh")]) == 2
    assert "is not an nnU-Net model folder" in capsys.readouterr().err


def test_the_output_folder_is_claimed_before_anything_is_written(model, data, capsys):
    """--config-only's folder is values-seg's own, so the printed 'values-seg run ... --out OUT' is
    accepted; a user's folder with a file called run.json is refused, untouched (issue 22, item 2)."""
    from values_seg.storage import run_directory

    assert main(command(model, data, "--config-only")) == 0
    out = data / "out"
    name = yaml.safe_load((out / "config.yaml").read_text())["name"]
    assert run_directory.claim(out, name) == out and "config.yaml" in run_directory.written(out)
    mine = data / "mine"
    mine.mkdir()
    (mine / "run.json").write_text("{}")
    (mine / "config.yaml").write_text("the user's config\n")
    assert main(["validate-nnunet", "--model-folder", str(model), "--dataset", str(data / "Dataset020_Own"),
                 "--out", str(mine), "--config-only"]) == 2
    assert "not a values-seg run marker" in capsys.readouterr().err
    assert (mine / "config.yaml").read_text() == "the user's config\n" and (mine / "run.json").read_text() == "{}"


def test_a_model_folder_whose_plans_name_code_is_refused_before_anything_runs(data, tmp_path, capsys):
    """Issue 32, item 1: plans naming ``torch.hub.load`` with a hubconf.py beside them ran that file
    during validate-nnunet (exit 0). Now: exit 2, one line naming the class and trust_checkpoint,
    the file the payload would have written is absent, nothing is written to --out."""
    from values_seg_plugins._nnunet.testing import make_model_folder, plant_hub_payload

    folder = make_model_folder(tmp_path / "evil", dims=2, folds=(0, 1))
    marker = tmp_path / "code_ran"
    plant_hub_payload(folder, marker)
    assert main(command(folder, data)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "names the network class 'torch.hub.load'" in err and "trust_checkpoint=True" in err
    assert not marker.exists() and not (data / "out").exists()


def _edited_plans(tmp_path, edit):
    """A fresh model folder whose plans.json ``edit`` changed (``edit(plans)`` returns the new plans)."""
    import json

    from values_seg_plugins._nnunet.testing import make_model_folder

    folder = make_model_folder(tmp_path / "model", dims=2, folds=(0, 1))
    path = folder / "plans.json"
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    return folder


def _inheriting_from_itself(plans):
    plans["configurations"]["2d"]["inherits_from"] = "2d_copy"
    plans["configurations"]["2d_copy"] = {"inherits_from": "2d"}
    return plans


MALFORMED_PLANS = [
    (lambda plans: {**plans, "configurations": list(plans["configurations"].values())},
     "'configurations' must map configuration names (e.g. '2d') to their settings, got a list"),
    (lambda plans: [plans], "the top level must be a JSON object (nnU-Net's plans), got a list"),
    (lambda plans: {**plans, "configurations": {"2d": [1]}}, "configurations.2d must be an object of settings, got a list"),
    (_inheriting_from_itself, "configurations.2d_copy.inherits_from '2d' is a cycle (2d -> 2d_copy -> 2d)"),
]


@pytest.mark.parametrize("edit, message", MALFORMED_PLANS)
def test_a_malformed_plans_file_is_one_line_naming_it_and_the_key(data, tmp_path, capsys, edit, message):
    """plans.json whose 'configurations' is a list ended in a 27-line AttributeError; it and the
    other structures nnU-Net cannot read are one line naming the file and the key, before any work."""
    folder = _edited_plans(tmp_path, edit)
    assert main(command(folder, data)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"values-seg: error: {folder / 'plans.json'}: {message}"]
    assert not (data / "out").exists()


@pytest.mark.parametrize("text, message", [
    ("[1, 2]", "the top level must be a JSON object"),
    ('{"channel_names": ', "not readable as JSON (Expecting value"),
    ('{"channel_names": [1]}', "'channel_names' must be a mapping"),
])
def test_a_malformed_dataset_json_of_the_model_is_one_line(data, tmp_path, capsys, text, message):
    from values_seg_plugins._nnunet.testing import make_model_folder

    folder = make_model_folder(tmp_path / "model", dims=2, folds=(0, 1))
    (folder / "dataset.json").write_text(text)
    assert main(command(folder, data)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"values-seg: error: {folder / 'dataset.json'}: {message}"), err[:3]
    assert not (data / "out").exists()
