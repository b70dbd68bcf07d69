"""The validation records' scores (runner/validation_fit.py): out-of-sample only. An aggregation fitted
on the validation cases' risks or scores would score its own training cases there, and a calibration on
them (conformal risk-controlled selection) would certify what the method does not give."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from values_seg import registry
from values_seg.evaluation.combination import LiveComponents
from values_seg.evaluation.validation_fit import _score_kept


def test_validation_records_carry_no_in_sample_score():
    rng = np.random.default_rng(0)
    maps = [torch.tensor(rng.random((16, 16)), dtype=torch.float32) for _ in range(8)]
    predictions = [torch.tensor((rng.random((16, 16)) > 0.6).astype(np.int64)) for _ in range(8)]
    risks = rng.random(8)
    aggregations = {
        ("pe", "patch"): registry.create("aggregation", "patch", size=4),
        ("pe", "threshold"): registry.create("aggregation", "threshold").fit(maps, predictions),
        ("pe", "learned_risk"): registry.create("aggregation", "learned_risk", trees=5).fit(maps, predictions,
                                                                                            risks=risks),
    }
    live = LiveComponents({"pe": registry.create("measure", "predictive_entropy")}, aggregations)
    scores = _score_kept(live, {"pe": maps[0]}, predictions[0], "val/0")
    assert set(scores) == {("pe", "patch"), ("pe", "threshold")}  # learned_risk: fitted on these very cases
    assert scores[("pe", "patch")] == pytest.approx(aggregations[("pe", "patch")](maps[0]), rel=1e-6)
    assert scores[("pe", "threshold")] == pytest.approx(aggregations[("pe", "threshold")](maps[0]), rel=1e-6)
    assert not live.failed
