"""Boundary checks of probability samples: every violation is found whatever the number of classes."""

import numpy as np
import pytest
import torch

from values_seg.numerics.validation import check_probabilities


def softmax_samples(S, C, spatial, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(S, C, *spatial, generator=g), dim=1)


@pytest.mark.parametrize("C", [2, 3, 9, 12])  # the chained adds (C <= 8) and the reduction
def test_valid_samples_pass_unchanged(C):
    p = softmax_samples(3, C, (5, 6))
    assert check_probabilities(p) is p
    assert check_probabilities(p.half()).dtype == torch.float32


@pytest.mark.parametrize("C", [2, 3, 9])
def test_largest_deviation_is_reported(C):
    p = softmax_samples(2, C, (4, 4, 4)).double()
    p[1, C - 1, 2, 3, 1] += 0.25  # the deviation, by hand
    p[0, 0, 0, 0, 0] -= 0.01
    with pytest.raises(ValueError, match=r"case 'a'.*within 0.001, largest deviation 0.25"):
        check_probabilities(p, where="case 'a'")
    p = softmax_samples(2, C, (4, 4)).double()
    p[0, :, 1, 1] = 0.5 / C  # a sum below 1 counts the same
    with pytest.raises(ValueError, match="largest deviation 0.5"):
        check_probabilities(p)


@pytest.mark.parametrize("C", [2, 3, 9])
@pytest.mark.parametrize("bad, message", [(float("nan"), "1 probability value.s. are NaN or infinite"),
                                          (float("inf"), "1 probability value.s. are NaN or infinite"),
                                          (-0.2, "non-negative, found -0.2")])
def test_non_finite_and_negative_values(C, bad, message):
    p = softmax_samples(2, C, (4, 4))
    p[1, C // 2, 3, 0] = bad
    with pytest.raises(ValueError, match=message):
        check_probabilities(p)


def test_within_tolerance_passes_and_logits_do_not():
    p = softmax_samples(2, 2, (4, 4)).double()
    p[0, 0] += 0.0009
    check_probabilities(p)
    logits = torch.randn(2, 3, 4, 4).abs()
    with pytest.raises(ValueError, match="are these logits"):
        check_probabilities(logits)
    assert np.isfinite(float(check_probabilities(softmax_samples(1, 2, (3, 3))).sum()))
