"""Fixtures of the engine tests: tiny 2D toy data (32 px), a tiny U-Net, a few steps."""

from __future__ import annotations

import pytest

from values_seg.engine import Recipe, TrainingSpec, dataset_ref

TOY = {"scenario": "1", "dims": 2, "size": 32, "train_cases": 6, "val_cases": 2}


@pytest.fixture(scope="session")
def toy_ref():
    return dataset_ref("toy", TOY)


@pytest.fixture(scope="session")
def toy(toy_ref):
    return toy_ref.create()


@pytest.fixture(scope="session")
def tiny_recipe():
    return Recipe(epochs=1, steps_per_epoch=2, batch_size=2)


@pytest.fixture(scope="session")
def base_spec(toy_ref, tiny_recipe):
    return TrainingSpec.create(toy_ref, "unet", backbone_params={"base_width": 4}, recipe=tiny_recipe, seed=0)


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    """Every test here on one torch thread (see tests/conftest.py)."""
