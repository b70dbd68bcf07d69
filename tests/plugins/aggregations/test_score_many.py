"""Vectorised scoring of a stack of maps equals scoring each map with its own instance."""

import numpy as np
import pytest
import torch

from values_seg import registry
from values_seg.components.aggregation import Aggregation


@pytest.mark.parametrize(
    "name, params",
    [("image", {}), ("image", {"reduction": "mean"}), ("patch", {"size": 3}), ("threshold", {}),
     ("quantile", {}), ("foreground_mean", {}), ("boundary_mean", {}),
     ("max", {}), ("std", {}), ("geometric_mean", {}), ("harmonic_mean", {}), ("above_threshold_mean", {"t": 0.4}),
     ("above_quantile_mean", {"q": 0.8}), ("above_quantile_mean_fg_ratio", {}), ("morans_i", {}), ("gearys_c", {}),
     ("class_mean", {}), ("class_boundary_mean", {}), ("class_interior_mean", {}), ("class_mean_equal", {}),
     ("class_mean_occurrence", {}), ("spatial_mass_ratio", {})],
)
def test_score_many_matches_single_calls(name, params):
    g = torch.Generator().manual_seed(5)
    maps = torch.rand(3, 7, 8, 9, generator=g)
    prediction = (torch.rand(7, 8, 9, generator=g) > 0.6).to(torch.uint8)
    instances = [registry.create("aggregation", name, **params) for _ in range(3)]
    for k, inst in enumerate(instances):  # different fitted state per measure
        inst.fit([maps[k] * (k + 1) / 3], [prediction])
    batched = type(instances[0]).score_many(instances, maps, prediction=prediction)
    single = [inst(m, prediction=prediction) for inst, m in zip(instances, maps)]
    assert np.allclose(batched, single, rtol=1e-10)


def test_default_score_many_and_mixed_parameters():
    maps = torch.rand(2, 12, 12)
    patches = [registry.create("aggregation", "patch", size=s) for s in (2, 5)]
    assert registry.get("aggregation", "patch").obj.score_many(patches, maps) == pytest.approx(
        [p(m) for p, m in zip(patches, maps)]
    )
    assert Aggregation.score_many.__doc__
