"""The tables' key follows from the scoring stage's declared inputs."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from values_seg.registry import ComponentRef
from values_seg.runner.scoring_inputs import ScoringInputs, stages_digest


@dataclass
class Cycle:
    dice: dict


def test_each_field_changes_the_key():
    base = ScoringInputs((("toy/unet/det/seed0", "abc", None),), (ComponentRef("task", "segmentation"),),
                         {"n_resamples": 0, "level": 0.95, "seed": 0}, {"exclude": []})
    changed = {"evaluations": (("toy/unet/det/seed0", "abd", None),),
               "tasks": (ComponentRef("task", "segmentation", label="seg"),),
               "statistics": {"n_resamples": 0, "level": 0.9, "seed": 0},
               "rules": {"exclude": [{"aggregation": "image"}]}}
    assert set(changed) == {f.name for f in dataclasses.fields(ScoringInputs)}  # a new field: add it here
    for name, value in changed.items():
        assert dataclasses.replace(base, **{name: value}).key() != base.key(), name


def test_stage_results_digest():
    assert stages_digest(None) is None and stages_digest({}) is None
    one = stages_digest({"second_cycle": Cycle({("pe", "patch"): 0.5})})
    assert one == stages_digest({"second_cycle": Cycle({("pe", "patch"): 0.5})})
    assert one != stages_digest({"second_cycle": Cycle({("pe", "patch"): 0.25})})
