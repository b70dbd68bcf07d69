"""Threshold aggregation (appendix F.2) against hand-computed thresholds."""

import numpy as np
import pytest
import torch

from values_seg import registry


def test_fit_and_apply_by_hand():
    # two 2x5 validation cases; predicted foreground ratios 0.2 and 0.4 -> alpha = 0.3, q = 0.7
    maps = [torch.arange(10, dtype=torch.float32).reshape(2, 5), torch.arange(10, 20, dtype=torch.float32).reshape(2, 5)]
    preds = [torch.zeros(2, 5, dtype=torch.long), torch.zeros(2, 5, dtype=torch.long)]
    preds[0][0, :2] = 1
    preds[1][1, :4] = 1
    agg = registry.create("aggregation", "threshold").fit(maps, preds)
    assert agg.foreground_ratio_ == pytest.approx(0.3)
    # values 0..19, 0.7-quantile with linear interpolation: position 0.7 * 19 = 13.3 -> 13.3
    assert agg.threshold_ == pytest.approx(13.3)
    test_map = torch.tensor([[13.0, 14.0], [20.0, 1.0]])
    assert agg(test_map) == pytest.approx(17.0)  # mean of 14 and 20
    assert agg(torch.full((3, 3), 13.3)) == pytest.approx(13.3)  # "at or above"
    assert agg(torch.zeros(3, 3)) == 0.0  # nothing uncertain


def test_matches_numpy_on_random_3d_data():
    rng = np.random.default_rng(2)
    maps = [rng.random((6, 7, 8)) for _ in range(4)]
    preds = [(rng.random((6, 7, 8)) < f).astype(np.int64) for f in (0.1, 0.2, 0.3, 0.05)]
    agg = registry.create("aggregation", "threshold").fit([torch.tensor(m) for m in maps], [torch.tensor(p) for p in preds])
    alpha = np.mean([p.mean() for p in preds])
    threshold = np.quantile(np.concatenate([m.ravel() for m in maps]), 1 - alpha)
    u = rng.random((6, 7, 8))
    assert agg(torch.tensor(u)) == pytest.approx(u[u >= threshold].mean())


def test_empty_predictions_use_the_maximum():
    maps = [torch.rand(5, 5)]
    agg = registry.create("aggregation", "threshold").fit(maps, [torch.zeros(5, 5)])
    assert agg.threshold_ == pytest.approx(float(maps[0].max()))


def test_unfitted_and_mismatched_raise():
    with pytest.raises(ValueError, match="not fitted"):
        registry.create("aggregation", "threshold")(torch.rand(4, 4))
    with pytest.raises(ValueError, match="one prediction per validation map"):
        registry.create("aggregation", "threshold").fit([torch.rand(4, 4)], [])
    with pytest.raises(ValueError, match="shape"):
        registry.create("aggregation", "threshold").fit([torch.rand(4, 4)], [torch.zeros(4, 5)])


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_float32_maps_select_exactly_the_values_at_or_above_a_float64_threshold(dtype):
    from values_seg_plugins.aggregations.threshold import at_or_above_mean

    v = torch.tensor(0.1, dtype=dtype)
    up = torch.nextafter(v.float(), torch.tensor(1.0)).to(dtype) if dtype != torch.float16 else v + 2**-14
    u = torch.stack([v, up, torch.tensor(0.05, dtype=dtype), torch.tensor(0.7, dtype=dtype)]).reshape(1, -1)
    exact = float(v.double())  # the map value itself: selected
    between = (float(v.double()) + float(up.double())) / 2  # not representable in the map's dtype
    for threshold in (exact, between, 0.0, 1e39, -1e39):
        expected = u.double()[u.double() >= threshold]
        want = float(expected.mean()) if expected.numel() else 0.0
        assert at_or_above_mean(u, [threshold]) == pytest.approx([want], rel=1e-12)
    assert at_or_above_mean(u.repeat(2, 1), [exact, between]) == pytest.approx(
        [float(u.double()[u.double() >= t].mean()) for t in (exact, between)], rel=1e-12)
