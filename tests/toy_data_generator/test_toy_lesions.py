"""The multi-lesion toy scenario: several lesions per case, faint ones the raters disagree on,
touching and sub-resolution ones, in 2D and 3D, deterministic per seed."""

from __future__ import annotations

import numpy as np
import pytest

from toy_data_generator import generate, generate_case, plan, scenarios
from toy_data_generator.lesions import LESIONS, RATER_CONTRAST
from values_seg.metrics.lesion import components


@pytest.mark.parametrize("dims, size", [(2, 48), (3, 32)])
def test_lesion_cases(dims, size):
    cases = list(generate("lesions", dims=dims, size=size, seed=0, splits=["test"]))
    assert len(cases) == scenarios.get_scenario("lesions").test_count == 42
    kinds, touching, disagreement = set(), 0, 0
    for case in cases:
        assert case.image.shape == (1,) + (size,) * dims and case.raters.shape == (3,) + (size,) * dims
        lesions = case.meta["lesions"]
        assert LESIONS[0] <= len(lesions) == case.meta["n_lesions"] <= LESIONS[1]
        kinds |= {lesion["kind"] for lesion in lesions}
        touching += sum(lesion["touching"] for lesion in lesions)
        # a lesion at least as bright as every rater's threshold is marked by all of them, a fainter one not
        visible = [sum(lesion["contrast"] >= t for t in RATER_CONTRAST) for lesion in lesions]
        disagreement += sum(0 < v < len(RATER_CONTRAST) for v in visible)
        counts = [components(r)[1] for r in case.raters]
        assert counts[0] <= len(lesions)
    assert kinds == {"subresolution", "small", "large"}
    assert touching > 0 and disagreement > 0


def test_shifts_and_determinism():
    specs = plan("lesions")["test"]
    grey = next(s for s in specs if s.shift == "grey")
    case = generate_case(grey, 2, 48, 0)
    assert case.meta["ood"] and max(lesion["contrast"] for lesion in case.meta["lesions"]) <= 0.6
    again = generate_case(grey, 2, 48, 0)
    assert np.array_equal(case.image, again.image) and np.array_equal(case.raters, again.raters)
    cube = generate_case(next(s for s in specs if s.shift == "cube"), 2, 48, 0)
    assert cube.meta["shape"] == "cube"
