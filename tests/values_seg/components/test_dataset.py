"""The dataset contract: Case validation, the default training target, the exact reference variance."""

import numpy as np
import pytest
import torch

from values_seg import metrics
from values_seg.components.dataset import Case, Dataset
from values_seg.components.case_context import CaseContext
from values_seg.evaluation.per_case import evaluate_case
from values_seg.components.quantity import resolve


def test_default_training_label_is_the_rater_at_floor_u_times_r():
    raters = np.stack([np.full((2, 2), k) for k in range(4)])
    ds = Dataset()
    for u, want in [(0.0, 0), (0.2499, 0), (0.25, 1), (0.74, 2), (0.9999999, 3)]:
        assert ds.training_label(raters, u)[0, 0] == want


def test_reference_variance_is_validated():
    case = Case("c1", np.zeros((1, 4, 4), np.float32), np.zeros((1, 4, 4), np.int64),
                reference_variance=np.zeros((4, 3)))
    with pytest.raises(ValueError, match="c1.*reference_variance"):
        case.validate(dims=2, in_channels=1, num_classes=2)
    case.reference_variance = np.full((4, 4), -1.0)
    with pytest.raises(ValueError, match="non-negative"):
        case.validate(dims=2, in_channels=1, num_classes=2)


def test_evaluation_uses_the_exact_reference_variance_for_ncc():
    rng = np.random.default_rng(0)
    samples = torch.softmax(torch.from_numpy(rng.normal(size=(3, 2, 8, 8))).float(), dim=1)
    raters = torch.from_numpy(rng.integers(0, 2, size=(2, 8, 8)))
    exact = rng.random((8, 8))
    measure = {"pe": lambda s: metrics_entropy(s)}
    ncc = resolve(["ncc"])
    ev = evaluate_case(samples, raters, measure, quantities=ncc, context=CaseContext(reference_variance=exact))
    want = metrics.ncc(exact, metrics_entropy(samples).numpy())
    assert ev.values["ncc"]["pe"] == pytest.approx(want, abs=1e-6)
    default = evaluate_case(samples, raters, measure, quantities=ncc)
    assert default.values["ncc"]["pe"] == pytest.approx(
        metrics.ncc(metrics.rater_variance(raters.numpy()), metrics_entropy(samples).numpy()), abs=1e-6)


def metrics_entropy(samples: torch.Tensor) -> torch.Tensor:
    p = samples.double().mean(0)
    return -(p * p.log()).sum(0).float()
