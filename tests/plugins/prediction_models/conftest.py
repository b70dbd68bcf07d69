"""Shared fixtures of the C1 tests: tiny 2D toy data, a template training spec, a checkpoint store, the
trainings counted."""

from __future__ import annotations

import pytest

from values_seg.engine import Checkpoints, Recipe, TrainingSpec, dataset_ref, training

TOY = {"scenario": "1", "dims": 2, "size": 32, "train_cases": 6, "val_cases": 2}


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    """Every test here on one torch thread (see tests/conftest.py)."""


@pytest.fixture(scope="module")
def toy_ref():
    return dataset_ref("toy", TOY)


@pytest.fixture(scope="module")
def base(toy_ref):
    return TrainingSpec.create(toy_ref, "unet", backbone_params={"base_width": 4},
                               recipe=Recipe(epochs=2, steps_per_epoch=1, batch_size=2), seed=0)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return Checkpoints(tmp_path_factory.mktemp("checkpoints"))


@pytest.fixture
def count_trainings(monkeypatch):
    """The specs the engine trains while the test runs (``training.train_with_info`` counted)."""
    calls = []
    real = training.train_with_info

    def counting(spec, **kw):
        calls.append(spec)
        return real(spec, **kw)

    monkeypatch.setattr(training, "train_with_info", counting)
    return calls
