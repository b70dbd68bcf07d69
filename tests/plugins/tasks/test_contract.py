"""Every task: well-formed rows on the full example, and no crash (and no row) without data."""

import math

import pytest

from values_seg import registry
from values_seg.components.task import row

from ._records import empty, full, without_ood
from .test_registration import ALL_TASKS

ROW_KEYS = set(row("t", "m", "s", 0.0))


@pytest.mark.parametrize("name", ALL_TASKS)
def test_rows_well_formed(name):
    task = registry.create("task", name)
    rows = task.score(full())
    assert rows
    keys = set()
    for r in rows:
        assert set(r) == ROW_KEYS
        assert r["task"] == name
        declared = {m.name: m for m in task.metrics}
        assert r["metric"] in declared
        metric = declared[r["metric"]]
        assert r["split"] in metric.splits
        assert (r["measure"] is not None) == metric.per_measure
        assert (r["aggregation"] is not None) == metric.per_aggregation
        assert isinstance(r["value"], float) and math.isfinite(r["value"])
        key = (r["metric"], r["split"], r["measure"], r["aggregation"])
        assert key not in keys, f"duplicate row {key}"
        keys.add(key)


@pytest.mark.parametrize("name", ALL_TASKS)
def test_no_test_cases_no_rows(name):
    assert registry.create("task", name).score(empty()) == []


@pytest.mark.parametrize("name", ALL_TASKS)
def test_no_ood_cases_no_ood_rows(name):
    rows = registry.create("task", name).score(without_ood())
    assert all(r["split"] == "iid" for r in rows)
