import numpy as np
import pytest
import torch

from values_seg.metrics import al_improvement


def test_hand_computed():
    # C_method = (0.6 - 0.5) / 0.5 = 0.2, C_random = (0.55 - 0.5) / 0.5 = 0.1 -> 0.1 (eq. 9-10)
    assert al_improvement(0.5, 0.6, 0.55) == pytest.approx(0.1)
    # worse than random: (0.7 - 0.8)/0.8 - (0.82 - 0.8)/0.8 = -0.125 - 0.025 = -0.15
    assert al_improvement(0.8, 0.7, 0.82) == pytest.approx(-0.15)


def test_scalar_types():
    value = al_improvement(np.float32(0.5), torch.tensor(0.6, dtype=torch.float64), np.array([0.55]))
    assert isinstance(value, float)
    assert value == pytest.approx(0.1)


@pytest.mark.parametrize(
    "args, match",
    [
        ((0.0, 0.5, 0.5), "dice_first is 0"),
        ((0.5, np.nan, 0.5), "finite"),
        ((0.5, 0.6, [0.1, 0.2]), "single number"),
        ((0.5, "a", 0.2), "single number"),
    ],
)
def test_invalid(args, match):
    with pytest.raises(ValueError, match=match):
        al_improvement(*args)
