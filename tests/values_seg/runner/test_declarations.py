"""components.json: what the report reads about a run's components, the datasets' class names among them."""

from values_seg.config.loading import load_config
from values_seg.runner.declarations import declarations

from tiny import tiny_config


def test_each_dataset_is_recorded_with_its_class_names():
    entries = declarations(load_config(base=tiny_config()))["components"]["dataset"]
    assert entries and all(e["class_names"] == ["background", "foreground"] for e in entries)
