"""The nine task plugins register like any plugin and honour the Task contract's class attributes."""

import pytest

from values_seg import registry
from values_seg.components.task import Metric, Task

ALL_TASKS = [
    "segmentation",
    "ood_detection",
    "failure_detection",
    "calibration",
    "ambiguity",
    "active_learning",
    "separation",
    "ndsc_retention",
    "dice_retention",
]


def test_all_nine_registered():
    assert set(ALL_TASKS) <= set(registry.names("task"))


def test_create_ood_detection():
    task = registry.create("task", "ood_detection")
    assert isinstance(task, Task)
    assert task.name == "ood_detection"
    assert callable(task.score)


@pytest.mark.parametrize("name", ALL_TASKS)
def test_class_attributes(name):
    component = registry.get("task", name)
    assert component.source.startswith("values_seg_plugins.tasks.")
    assert component.description and component.description != Task.__doc__.splitlines()[0]
    task = registry.create("task", name)
    assert task.name == name
    assert task.metrics and all(isinstance(m, Metric) for m in task.metrics)
    assert sum(m.primary for m in task.metrics) <= 1 and task.label
    assert task.uncertainty_types and set(task.uncertainty_types) <= {"PU", "AU", "EU"}
    assert set(task.consumes) <= set(registry.names("quantity"))  # every quantity it reads is a plugin
    # nothing to configure, but the calibration reference's Monte-Carlo samples and interval level
    assert tuple(p.name for p in component.params) == (("reference_samples", "level") if name == "calibration" else ())
    names = [m.name for m in task.metrics]
    assert all(m.reading.reference_of in names for m in task.metrics if m.reading.reference_of)


def test_documented_suitability():
    assert registry.create("task", "ood_detection").uncertainty_types == ("PU", "EU")
    assert registry.create("task", "active_learning").uncertainty_types == ("PU", "EU")
    assert registry.create("task", "ambiguity").uncertainty_types == ("PU", "AU")
    assert registry.create("task", "calibration").consumes == ("calibration_bins", "nll")
    assert [s.name for s in registry.create("task", "active_learning").stages] == ["second_cycle"]
    assert registry.create("task", "ndsc_retention").consumes == ("ndsc", "ndsc_rauc")
    assert registry.create("task", "ood_detection").consumes == ()  # the scores only
    calibration = {m.name: m for m in registry.create("task", "calibration").metrics}
    assert calibration["ace_reference"].reading.reference_of == "ace"
    assert calibration["ace_eq11"].reading.variant_of == "ace"
