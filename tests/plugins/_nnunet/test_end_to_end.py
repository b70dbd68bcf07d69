"""Export -> nnU-Net's own planning, preprocessing and trainer (2 iterations) -> the ``nnunet`` C1.

nnU-Net reads ``nnUNet_raw``/``nnUNet_preprocessed``/``nnUNet_results`` when it is imported, so
its part runs in a subprocess with those set to temporary folders.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from values_seg import registry
from values_seg_plugins._nnunet import export_dataset
from values_seg.numerics.validation import check_probabilities
from values_seg_plugins._nnunet.testing import training_script

from .conftest import TinyDataset

NNUNET_SCRIPT = training_script(501)


@pytest.mark.slow
def test_export_train_with_nnunet_and_predict(tmp_path):
    raw, pre, res = tmp_path / "raw", tmp_path / "pre", tmp_path / "res"
    dataset = TinyDataset(dims=2, size=32, per_split=3)
    export_dataset(dataset, raw, 501, "Tiny", label_from="majority", splits=("train", "val"))
    env = dict(os.environ, nnUNet_raw=str(raw), nnUNet_preprocessed=str(pre), nnUNet_results=str(res),
               nnUNet_n_proc_DA="1", nnUNet_compile="false", OMP_NUM_THREADS="1")
    run = subprocess.run([sys.executable, "-c", NNUNET_SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]

    folder = res / "Dataset501_Tiny" / "nnUNetTrainer__nnUNetPlans__2d"
    model = registry.create("prediction_model", "nnunet", model_folder=str(folder), mirroring=True)
    assert model.num_samples == 8  # folds 0 and 1 x 4 mirrors
    for case in dataset.cases("test"):
        samples = model.predict_case([], case, torch.device("cpu"))
        assert samples.shape == (8, 2, 32, 32)
        check_probabilities(samples)
