"""An outside package adds a lesion-scale aggregation in a few lines: the lesions quantity scores
every predicted lesion with it and the lesion tasks compare it, with no edit to values-seg."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest
import torch

from values_seg import registry
from values_seg.components.case_context import CaseContext
from values_seg.components.measure import SampleStatistics
from values_seg.components.quantity import CaseInputs, CaseView
from values_seg.registry import Registry

OUTSIDE = '''\
import numpy as np
from values_seg import hookimpl
from values_seg.components.lesion_scale import LesionAggregation


class LesionTop(LesionAggregation):
    name = "lesion_top"

    def lesion_scores(self, umap, labels, n):
        return np.array([np.quantile(umap[labels == i], 0.9) for i in range(1, n + 1)])


@hookimpl
def values_seg_aggregations():
    return [LesionTop]
'''


@pytest.fixture
def outside(tmp_path, monkeypatch):
    (tmp_path / "outside_lesion_plugin.py").write_text(OUTSIDE)
    monkeypatch.syspath_prepend(str(tmp_path))
    fresh = Registry(entry_points=False)
    monkeypatch.setattr(registry, "_default", fresh)
    fresh.register(importlib.import_module("outside_lesion_plugin"))
    yield
    sys.modules.pop("outside_lesion_plugin", None)


def test_the_outside_plugin_is_short():
    assert len([line for line in OUTSIDE.splitlines() if line.strip()]) <= 11


def test_an_outside_lesion_aggregation_reaches_the_lesion_records(outside):
    shape = (12, 12)
    pred = torch.zeros(shape, dtype=torch.long)
    pred[1:4, 1:4] = 1
    pred[7:10, 7:10] = 1
    samples = torch.stack([1.0 - pred.float(), pred.float()])[None]
    u = torch.linspace(0, 1, 144, dtype=torch.float64).reshape(shape)
    inputs = CaseInputs(CaseContext("c0", num_classes=2, ignore_index=None, background=0), pred[None],
                        SampleStatistics(samples), pred, u[None], ["m"])
    quantity = registry.create("quantity", "lesions")
    (record,) = quantity.compute(CaseView(inputs, quantity))
    expected = [np.quantile(u.numpy()[1:4, 1:4], 0.9), np.quantile(u.numpy()[7:10, 7:10], 0.9)]
    np.testing.assert_allclose(record["scores"]["lesion_top"], expected)
    # and as an image (patient-scale) aggregation: the maximum over the lesions
    assert registry.create("aggregation", "lesion_top")(u, prediction=pred) == pytest.approx(max(expected))
