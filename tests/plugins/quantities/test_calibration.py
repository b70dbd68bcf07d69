"""The calibration quantity's numerics: the validation histograms, the binning over all (pixel,
rater) pairs, and the per-case bins file."""

import numpy as np
import pytest
import torch

from values_seg import metrics
from values_seg_plugins.quantities.calibration import (BIN_FIELDS, UncertaintyHistogram, calibration_from_counts,
                                                       case_bins_from_bytes, case_bins_to_bytes)


def test_histograms_merge_across_cases():
    h1, h2 = UncertaintyHistogram(), UncertaintyHistogram()
    h1.add(torch.tensor([0.5, 0.25]), torch.tensor([True, False]))
    h2.add(torch.tensor([0.5]), torch.tensor([False]))
    merged = h1 + h2
    assert merged.total.sum() == 3 and merged.correct.sum() == 1
    with pytest.raises(ValueError, match="no validation pixels"):
        UncertaintyHistogram().platt_fit()


# 8 x 6 pixels: a multiple of the kernel's lanes; 9 x 7: not; 50 x 45: more than one chunk, the last one
# shorter; 20 raters x 2000 bins: many (bin, agreement) pairs (the kernel's one-lane histogram)
@pytest.mark.parametrize("shape", [(8, 6), (9, 7), (50, 45)])
@pytest.mark.parametrize("R, n_bins", [(1, 20), (3, 20), (20, 20), (3, 100), (20, 2000)])
def test_calibration_from_counts_equals_binning_every_rater(R, n_bins, shape):
    rng = np.random.default_rng(R)
    conf = torch.tensor(rng.random((2, *shape)), dtype=torch.float32)
    conf[0, 0, :4] = torch.tensor([0.0, 1.0, 0.05, 0.5])  # bin edges, the top edge in the last bin
    conf[1] = 0.3  # one constant map: a single non-empty bin
    prediction = torch.tensor(rng.integers(0, 2, shape))
    raters = torch.tensor(rng.integers(0, 2, (R, *shape)))
    bins = calibration_from_counts(conf, (raters == prediction).sum(dim=0), R, n_bins)
    for m in range(2):  # every (pixel, rater) pair binned on its own
        correct = np.concatenate([(prediction == r).numpy().ravel() for r in raters])
        expected = metrics.calibration_bins(correct, np.tile(conf[m].double().numpy().ravel(), R), n_bins)
        np.testing.assert_array_equal(bins[m].count, expected.count)
        np.testing.assert_allclose(bins[m].confidence_sum, expected.confidence_sum, rtol=1e-12)
        np.testing.assert_array_equal(bins[m].correct_sum, expected.correct_sum)
    assert np.count_nonzero(bins[1].count) == 1


def test_case_bins_file_round_trip():
    rng = np.random.default_rng(0)
    bins = {(c, m): metrics.calibration_bins(rng.random(50) < 0.7, rng.random(50), n_bins=100)
            for c in ("b", "a") for m in ("pe", "mi") if (c, m) != ("b", "mi")}
    back = case_bins_from_bytes(case_bins_to_bytes(bins))
    assert set(back) == {"pe", "mi"} and set(back["mi"]) == {"a"} and set(back["pe"]) == {"a", "b"}
    for (c, m), b in bins.items():
        for f in BIN_FIELDS:
            np.testing.assert_array_equal(getattr(back[m][c], f), getattr(b, f))
    assert case_bins_from_bytes(None) == {}
