"""Export -> nnU-Net's own planning, preprocessing and trainer (2 iterations) -> the ``nnunet`` C1.

nnU-Net reads ``nnUNet_raw``/``nnUNet_preprocessed``/``nnUNet_results`` when it is imported, so
its part runs in a subprocess with those set to temporary folders.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from values_seg import registry
from values_seg_plugins._nnunet import export_dataset
from values_seg.validation import check_probabilities

from .conftest import TinyDataset

NNUNET_SCRIPT = textwrap.dedent(
    """
    import os
    import torch
    from nnunetv2.experiment_planning.plan_and_preprocess_api import extract_fingerprints, plan_experiments, preprocess
    from nnunetv2.run.run_training import get_trainer_from_args

    extract_fingerprints([501], num_processes=1, check_dataset_integrity=True, show_progress_bar=False)
    plan_experiments([501])
    preprocess([501], configurations=("2d",), num_processes=(1,), show_progress_bar=False)
    os.environ["nnUNet_n_proc_DA"] = "0"  # single-threaded augmentation (planning needs it > 0)
    for fold in (0, 1):
        trainer = get_trainer_from_args("501", "2d", fold, "nnUNetTrainer", "nnUNetPlans", device=torch.device("cpu"))
        trainer.num_iterations_per_epoch, trainer.num_val_iterations_per_epoch, trainer.num_epochs = 2, 1, 1
        trainer.run_training()
    """
)


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
