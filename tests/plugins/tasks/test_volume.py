"""Volume quantities and the volume task: against hand-computed volumes, the CRPS's integral form and
scipy's Spearman correlation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import spearmanr

from values_seg import registry
from values_seg.components.case_context import CaseContext
from values_seg.components.measure import SampleStatistics
from values_seg.components.quantity import CaseInputs, CaseView
from values_seg.components.task import EvaluationResult

from values_seg_plugins.tasks.volume import spearman


def _inputs(sizes, rater_sizes, ignore=False):
    """Samples whose foreground is the first ``sizes[s]`` voxels of a 10 x 10 image; raters likewise."""
    def mask(n):
        m = torch.zeros(100, dtype=torch.long)
        m[:n] = 1
        return m.reshape(10, 10)
    labels = torch.stack([mask(n) for n in sizes])
    samples = torch.stack([1.0 - labels.float(), labels.float()], dim=1)
    raters = torch.stack([mask(n) for n in rater_sizes])
    if ignore:
        raters[0, 0, 0] = 255  # inside rater 0's mask
    stats = SampleStatistics(samples)
    prediction = stats.mean.argmax(0)
    return CaseInputs(CaseContext("c", num_classes=2, ignore_index=255 if ignore else None, background=0),
                      raters, stats, prediction, None, [])


def _value(name, inputs):
    quantity = registry.create("quantity", name)
    return quantity.compute(CaseView(inputs, quantity))


def test_volumes_by_hand():
    inputs = _inputs([10, 20, 30, 40], [20, 30], ignore=True)
    assert _value("rater_volume", inputs) == 24.5  # (19 + 30) / 2: the ignored voxel is not foreground
    # the mean prediction's foreground: voxels in at least 3 of the 4 samples (at 2 of 4 the tie goes to
    # the background, the first class), i.e. the first 20
    assert _value("volume", inputs) == 20.0
    volumes = np.array([10, 20, 30, 40.0])
    assert _value("volume_cv", inputs) == pytest.approx(volumes.std() / volumes.mean())
    # CRPS = E|X - y| - E|X - X'| / 2 per rater: direct double sums
    expected = np.mean([np.abs(volumes - y).mean() - 0.5 * np.abs(volumes[:, None] - volumes[None]).mean()
                        for y in (19.0, 30.0)])
    assert _value("volume_crps", inputs) == pytest.approx(expected)


def test_empty_samples_have_no_cv():
    assert np.isnan(_value("volume_cv", _inputs([0, 0], [5])))
    assert _value("volume_cv", _inputs([7], [5])) == 0.0


def test_spearman_against_scipy():
    rng = np.random.default_rng(0)
    spread, error = rng.random(15), rng.random(15)
    spread[3] = spread[4]  # a tie
    error[7] = np.nan  # left out
    rows = rng.integers(0, 15, size=(5, 15))
    got = spearman(rows, spread, error)
    for b, row in enumerate(rows):
        keep = row[np.isfinite(error[row])]
        assert got[b] == pytest.approx(spearmanr(spread[keep], error[keep]).statistic)
    assert np.isnan(spearman(np.arange(15)[None], np.ones(15), error)[0])  # constant spread


def test_task_rows():
    cases = pd.DataFrame({"case_id": ["a", "b", "c", "d"], "split": "test", "ood": False, "shift": "none",
                          "volume": [10.0, 20.0, 30.0, 5.0], "rater_volume": [10.0, 10.0, 20.0, 0.0],
                          "volume_cv": [0.0, 0.5, 0.2, 0.9], "volume_crps": [1.0, 2.0, 3.0, 4.0]})
    result = EvaluationResult(context={}, cases=cases, scores=pd.DataFrame(columns=["case_id", "split", "measure",
                                                                                   "aggregation", "score"]))
    rows = {r["metric"]: r["value"] for r in registry.create("task", "volume_uncertainty").score(result)}
    # relative errors 0, 1, 0.5 (d: no reference foreground, left out)
    assert rows["volume_error"] == pytest.approx(0.5)
    assert rows["volume_crps"] == pytest.approx(2.5)
    assert rows["volume_spread_error"] == pytest.approx(spearmanr([0.0, 0.5, 0.2], [0.0, 1.0, 0.5]).statistic)
