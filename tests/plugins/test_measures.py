"""C2 measures against a float64 NumPy reference with explicit loops over samples and classes."""

import numpy as np
import pytest
import torch

from values_seg import registry

rng = np.random.default_rng(0)


def xlogx(p):
    return np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)


def reference(name, s):
    """Float64 reference, one sample and one class at a time (the "typical research script")."""
    s = np.asarray(s, dtype=np.float64)
    S, C = s.shape[:2]
    mean = sum(s[i] for i in range(S)) / S
    pe = -sum(xlogx(mean[c]) for c in range(C))
    ee = sum(-sum(xlogx(s[i, c]) for c in range(C)) for i in range(S)) / S
    floor = lambda p: np.log(np.maximum(p, 1e-10))  # noqa: E731 - Shifts' floor inside the log
    if name == "predictive_entropy":
        return pe
    if name == "expected_entropy":
        return ee
    if name == "mutual_information":
        return np.maximum(pe - ee, 0)
    if name == "max_softmax":
        return 1 - np.max(mean, axis=0)
    if name == "epkl":  # E_{i,j} KL(p_i || p_j)
        total = 0.0
        for i in range(S):
            for j in range(S):
                total = total + sum(xlogx(s[i, c]) - s[i, c] * floor(s[j, c]) for c in range(C))
        return np.maximum(total / S**2, 0)
    if name == "reverse_mutual_information":  # E_i KL(pbar || p_i)
        total = sum(sum(xlogx(mean[c]) - mean[c] * floor(s[i, c]) for c in range(C)) for i in range(S))
        return np.maximum(total / S, 0)
    if name == "softmax_variance":
        return sum(sum((s[i, c] - mean[c]) ** 2 for i in range(S)) / S for c in range(C)) / C
    raise KeyError(name)


MEASURES = ["predictive_entropy", "expected_entropy", "mutual_information", "max_softmax", "epkl",
            "reverse_mutual_information", "softmax_variance"]


def random_samples(S, C, spatial, zeros=False):
    logits = rng.normal(size=(S, C, *spatial)) * 3
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    if zeros:  # exact zeros and ones: one-hot in a random half of the pixels
        onehot = np.eye(C)[rng.integers(0, C, size=(S, *spatial))]
        onehot = np.moveaxis(onehot, -1, 1)
        mask = rng.random(spatial) < 0.5
        p = np.where(mask, onehot, p)
    return p


@pytest.mark.parametrize("name", MEASURES)
@pytest.mark.parametrize("shape", [(5, 2, (6, 7)), (4, 3, (3, 4, 5)), (1, 2, (8, 8)), (10, 4, (5, 5))])
@pytest.mark.parametrize("zeros", [False, True])
def test_matches_float64_reference(name, shape, zeros):
    S, C, spatial = shape
    p = random_samples(S, C, spatial, zeros)
    got = registry.create("measure", name)(torch.tensor(p, dtype=torch.float32))
    assert got.shape == tuple(spatial) and got.dtype == torch.float32
    assert np.allclose(got.numpy(), reference(name, p), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", MEASURES)
def test_float64_input_stays_float64(name):
    p = random_samples(3, 2, (4, 4))
    got = registry.create("measure", name)(torch.tensor(p))
    assert got.dtype == torch.float64
    assert np.allclose(got.numpy(), reference(name, p), atol=1e-12)


def test_certain_predictions_have_zero_uncertainty():
    onehot = torch.zeros(4, 3, 5, 5)
    onehot[:, 1] = 1.0  # every sample certain and agreeing
    for name in MEASURES:
        assert torch.all(registry.create("measure", name)(onehot) == 0), name


def test_known_values_by_hand():
    # two samples, two classes, one pixel: p1 = (1, 0), p2 = (0, 1)
    p = torch.tensor([[[1.0], [0.0]], [[0.0], [1.0]]])[..., None]  # [S=2, C=2, 1, 1]
    pe = registry.create("measure", "predictive_entropy")(p)
    ee = registry.create("measure", "expected_entropy")(p)
    mi = registry.create("measure", "mutual_information")(p)
    assert float(pe) == pytest.approx(np.log(2))  # mean (0.5, 0.5)
    assert float(ee) == 0.0  # each sample certain
    assert float(mi) == pytest.approx(np.log(2))  # all uncertainty is disagreement
    assert float(registry.create("measure", "max_softmax")(p)) == pytest.approx(0.5)
    assert float(registry.create("measure", "softmax_variance")(p)) == pytest.approx(0.25)


def test_single_sample_has_no_epistemic_part():
    p = torch.tensor(random_samples(1, 3, (6, 6)), dtype=torch.float32)
    pe = registry.create("measure", "predictive_entropy")(p)
    assert torch.allclose(registry.create("measure", "expected_entropy")(p), pe, atol=1e-6)
    for name in ("mutual_information", "epkl", "reverse_mutual_information", "softmax_variance"):
        assert torch.allclose(registry.create("measure", name)(p), torch.zeros(6, 6), atol=1e-6), name


def test_decomposition_pe_equals_ee_plus_mi():
    p = torch.tensor(random_samples(6, 3, (4, 4, 4)), dtype=torch.float64)
    pe, ee, mi = (registry.create("measure", n)(p) for n in MEASURES[:3])
    assert torch.allclose(pe, ee + mi, atol=1e-12)


@pytest.mark.parametrize(
    "bad, message",
    [
        (torch.full((2, 2, 4, 4), float("nan")), "NaN"),
        (torch.tensor([[[[1.5]], [[-0.5]]]]), "non-negative"),
        (torch.full((2, 2, 4, 4), 0.7), "sum to 1"),
        (torch.full((2, 4, 4), 0.5), "rank 3"),
        (torch.ones(2, 2, 1, 1, 1, 1) / 2, "rank 6"),
        (torch.ones(2, 2, 4, 4, dtype=torch.long), "floating point"),
        (torch.ones(0, 2, 4, 4), "empty"),
    ],
)
@pytest.mark.parametrize("name", ["predictive_entropy", "max_softmax"])
def test_invalid_probabilities_raise(bad, message, name):
    if "rank" in message:
        message = "expected probability samples"
    with pytest.raises(ValueError, match=message):
        registry.create("measure", name)(bad)


def test_uncertainty_types_follow_design_table():
    types = {n: registry.get("measure", n).meta["uncertainty_types"] for n in MEASURES}
    assert types["predictive_entropy"] == dict.fromkeys(
        ["deterministic", "bayesian", "augmentation", "variability"], "PU")
    assert types["max_softmax"] == {"deterministic": "PU"}
    assert types["expected_entropy"] == {"bayesian": "AU", "augmentation": "AU", "variability": "EU"}
    assert types["mutual_information"] == {"bayesian": "EU", "augmentation": "EU", "variability": "AU"}


@pytest.mark.parametrize("C", [2, 3, 11])  # the fused multiply-adds (C <= 8) and the reduction
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_plogp_sum_and_entropy_match_float64_reference(C, dtype):
    from values_seg.components.measure import entropy, plogp_sum

    p = random_samples(4, C, (6, 5), zeros=True)  # exact zeros: 0 log 0 = 0
    expected = sum(xlogx(p[k, c]) for k in range(4) for c in range(C))
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    assert np.allclose(plogp_sum(torch.tensor(p, dtype=dtype)).numpy(), expected, atol=tol)
    # a non-contiguous view (the class axis last) gives the same entropy along its class axis
    last = torch.tensor(np.moveaxis(p[0], 0, -1), dtype=dtype)
    assert not last.is_contiguous() or C == 1
    assert np.allclose(entropy(last, dim=-1).numpy(), -sum(xlogx(p[0, c]) for c in range(C)), atol=tol)


def test_entropy_keeps_gradients():
    from values_seg.components.measure import entropy

    p = torch.tensor([[0.25, 0.5], [0.75, 0.5]], dtype=torch.float64, requires_grad=True)
    h = entropy(p, dim=0)
    h.sum().backward()
    assert np.allclose(h.detach().numpy(), [-(0.25 * np.log(0.25) + 0.75 * np.log(0.75)), np.log(2)])
    assert np.allclose(p.grad.numpy(), -(np.log(p.detach().numpy()) + 1))
