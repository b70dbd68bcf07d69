"""The ``nnunet`` model in ``values-seg run``: a folder that cannot be used fails alone, or is refused
before any work."""

from __future__ import annotations

import re
import shutil

import pandas as pd
import pytest
import torch
import yaml

from values_seg.cli import main
from values_seg_plugins._nnunet.testing import make_model_folder
from values_seg_plugins.datasets._nnunet_raw.testing import write_raw_dataset


def _config(tmp_path, models: dict) -> str:
    """A run of the ``nnunet`` model folders ``models`` (label -> folder) on a tiny raw data set."""
    data = tmp_path / "Dataset020_Own"
    if not data.exists():
        write_raw_dataset(data, dims=2, shape=(32, 32), raters=3, train=2, test=3, name="Own")
    cfg = {"name": "own", "datasets": [{"name": "nnunet_raw", "label": "own", "params": {"folder": str(data)}}],
           "backbones": [], "measures": ["predictive_entropy"], "aggregations": ["image"],
           "prediction_models": [{"name": "nnunet", "label": label, "params": {"model_folder": str(folder)}}
                                 for label, folder in models.items()],
           "tasks": ["segmentation", "calibration", "ambiguity"], "evaluation": {"montage_cases": 0},
           "statistics": {"n_resamples": 0}}
    path = tmp_path / "own.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def test_a_model_whose_probabilities_are_nan_on_every_case_fails_alone(model_2d, tmp_path, capsys):
    """Every case of the NaN model was left out, and scoring crashed on its empty evaluation
    (KeyError: 'split'): no results.csv, the healthy model's rows included, on every rerun. Now
    that combination fails in one line naming why, and the healthy one is scored, rerun too."""
    broken = shutil.copytree(model_2d, tmp_path / "broken")
    for path in broken.glob("fold_*/checkpoint_final.pth"):
        checkpoint = torch.load(path, weights_only=False)
        checkpoint["network_weights"] = {k: torch.full_like(v, float("nan")) if v.is_floating_point() else v
                                         for k, v in checkpoint["network_weights"].items()}
        torch.save(checkpoint, path)
    config = _config(tmp_path, {"healthy": model_2d, "broken": broken})
    for _ in range(2):  # the same again: nothing of the failure was kept
        assert main(["run", config, "--out", str(tmp_path / "run"), "--no-progress"]) == 1
        out = capsys.readouterr().out
        failures = pd.read_csv(tmp_path / "run" / "failures.csv")
        assert list(failures["job"]) == ["own/-/broken/seed0"], failures.to_string()
        assert re.fullmatch(r"ValueError: every test case left out \(all 3\), the first: ValueError: case "
                            r"'case_ts000': \d+ probability value\(s\) are NaN or infinite",
                            failures["error"].iloc[0].strip().splitlines()[-1])
        assert "1 job(s) FAILED" in out and "every test case left out" in out
        results = pd.read_csv(tmp_path / "run" / "results.csv")
        assert set(results["prediction_model"]) == {"healthy"}
        assert {"segmentation", "calibration", "ambiguity"} <= set(results["task"])


def test_an_untrusted_checkpoint_is_refused_before_any_work(tmp_path, capsys):
    """A checkpoint holding more than weights was refused once per case (a line each, "65 job(s)
    FAILED"); validate-nnunet refused it up front. Now ``values-seg run`` refuses it in one line
    before anything is written, and nothing in it runs."""
    folder = make_model_folder(tmp_path / "model", dims=2, folds=(0,))
    path = folder / "fold_0" / "checkpoint_final.pth"
    marker = tmp_path / "code_ran"
    torch.save({**torch.load(path, weights_only=True), "logging": _Payload(marker)}, path)
    config = _config(tmp_path, {"untrusted": folder})
    assert main(["run", config, "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"values-seg: error: config prediction_models: refusing to load {path}: it holds objects "
                          "beyond weights") and err.endswith("trust_checkpoint=True")
    assert not marker.exists() and not (tmp_path / "run").exists()


def test_a_truncated_checkpoint_is_refused_when_the_model_is_created(tmp_path):
    """The check reads each checkpoint: a damaged one is a clear error then (a run's pre-flight: one line)."""
    from values_seg import registry
    from values_seg_plugins._nnunet import NnUNetModelError

    folder = make_model_folder(tmp_path / "model", dims=2, folds=(0,))
    path = folder / "fold_0" / "checkpoint_final.pth"
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(NnUNetModelError, match=rf"{path} is not a readable checkpoint \("):
        registry.create("prediction_model", "nnunet", model_folder=str(folder))


class _Payload:
    """Pickles as a call that creates ``marker``: proof that code in a checkpoint ran."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        import os

        return (os.makedirs, (self.marker,))
