"""The tiny experiment config of the tests, in one place: a 2-D toy data set of 32-pixel images, a
U-Net of width 4 trained for one epoch, one prediction model, one measure, one aggregation, one task.

A test module takes it with its own changes, each a top-level key that replaces the base's value
whole (no deep merge: a module that needs another recipe names the whole recipe)::

    from tiny import tiny_config, toy

    TINY = tiny_config(name="rel", datasets=[toy("1", train_cases=4)], recipe={"epochs": 1, "batch_size": 4})

``tests/conftest.py`` puts this folder on ``sys.path``, so every test module imports it by its plain
name. ``tests/test_test_configs.py`` fails on a test module that writes its own copy again."""

from __future__ import annotations

import copy


def toy(scenario: str = "2", **params) -> dict:
    """The toy data set of ``scenario``, labelled ``toy_<scenario>``: 2-D images of 32 pixels, 8
    training and 4 validation cases, unless ``params`` say otherwise (or add more)."""
    return {"name": "toy", "label": f"toy_{scenario}",
            "params": {"scenario": scenario, "dims": 2, "size": 32, "train_cases": 8, "val_cases": 4, **params}}


_BASE = {
    "name": "tiny",
    "datasets": [toy("2")],
    "backbones": [{"name": "unet", "params": {"base_width": 4}}],
    "recipe": {"epochs": 1},
    "prediction_models": ["deterministic"],
    "measures": ["predictive_entropy"],
    "aggregations": ["image"],
    "tasks": ["segmentation"],
}


def tiny_config(**changes) -> dict:
    """The tiny config with ``changes``: each key replaces the base's value whole, or adds a key
    the base leaves out (``device``, ``statistics``, ``evaluation``, ...). A fresh copy each call:
    a test that changes its config changes nobody else's."""
    return copy.deepcopy({**_BASE, **changes})
