"""C1 prediction models: each trains a few steps on tiny 2D toy data and predicts valid samples."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from values_seg import registry
from values_seg.engine import PredictionCache, ensure_trained, predict_split
from values_seg.families import FAMILIES
from values_seg.components.prediction_model import PredictionModel

EXPECTED = {  # name -> (family, samples, trainings)
    "deterministic": ("deterministic", 1, 1),
    "ensemble": ("bayesian", 5, 5),
    "test_time_dropout": ("bayesian", 10, 1),
    "test_time_augmentation": ("augmentation", 8, 1),
    "ssn": ("variability", 10, 1),
}


def _model(name):
    return registry.create("prediction_model", name, **({"pretrain_epochs": 1} if name == "ssn" else {}))


def test_registered_with_families():
    for name, (family, _, _) in EXPECTED.items():
        comp = registry.get("prediction_model", name)
        assert comp.obj.family == family and family in FAMILIES and issubclass(comp.obj, PredictionModel)
        assert comp.description
    params = {p.name: p.default for p in registry.get("prediction_model", "test_time_dropout").params}
    assert params == {"p": 0.5, "num_samples": 10}
    assert {p.name: p.default for p in registry.get("prediction_model", "ssn").params}["rank"] == 5
    assert {p.name: p.default for p in registry.get("prediction_model", "ensemble").params} == {"members": 5}


def test_ensemble_of_five_trains_five_shared_with_deterministic(base, store, count_trainings):
    det = _model("deterministic").training_specs(base)
    ensure_trained(det, store, device="cpu", progress=False)
    assert len(count_trainings) == 1
    ens = _model("ensemble").training_specs(base)
    tta = _model("test_time_augmentation").training_specs(base)
    dets_of_seeds = [s for seed in range(5) for s in _model("deterministic").training_specs(base.replace(seed=seed))]
    ensure_trained(ens + tta + dets_of_seeds, store, device="cpu", progress=False)
    assert len(count_trainings) == 5  # seed 0 once, shared; seeds 1-4 once each
    assert sorted(s.seed for s in count_trainings) == [0, 1, 2, 3, 4]
    assert ensure_trained(ens + det + tta, store, device="cpu", progress=False).keys() == {s.key() for s in ens}
    assert len(count_trainings) == 5  # rerun: everything loads from the store


@pytest.mark.parametrize("name", list(EXPECTED))
def test_trains_and_predicts_valid_samples(name, base, store, toy_ref, tmp_path):
    model = _model(name)
    family, n_samples, n_specs = EXPECTED[name]
    specs = model.training_specs(base)
    assert len(specs) == n_specs
    handles = predict_split(model, specs, store, toy_ref, "val", PredictionCache(tmp_path), device="cpu", progress=False)
    assert len(handles) == 2
    for h in handles:
        s = h.load()
        assert s.shape == (n_samples, 2, 32, 32) and s.dtype == torch.float32
        assert torch.isfinite(s).all() and (s >= 0).all()
        assert torch.allclose(s.sum(1), torch.ones(()), atol=1e-3)
        if n_samples > 1 and name != "test_time_augmentation":
            assert not torch.equal(s[0], s[1])


# -- test-time augmentation ----------------------------------------------------------------
class Pointwise(nn.Module):
    """A flip-equivariant network: 1x1 convolutions only."""

    def __init__(self, dims):
        super().__init__()
        conv = nn.Conv2d if dims == 2 else nn.Conv3d
        torch.manual_seed(0)
        self.net = nn.Sequential(conv(1, 8, 1), nn.Tanh(), conv(8, 3, 1))

    def forward(self, x):
        return self.net(x)


@pytest.mark.parametrize("dims, axes, expected", [(2, None, 8), (2, [-1], 4), (3, None, 16), (3, [0, 2], 8)])
def test_tta_passes_and_inverse_flips(dims, axes, expected):
    net = Pointwise(dims).eval()
    image = torch.randn(1, *([6] * dims))
    with torch.no_grad():
        clean = registry.create("prediction_model", "test_time_augmentation", flip_axes=axes, noise=False).predict([net], image)
        noisy = registry.create("prediction_model", "test_time_augmentation", flip_axes=axes).predict([net], image)
        reference = net(image[None]).softmax(1)
    assert clean.shape == (expected // 2, 3, *image.shape[1:]) and noisy.shape == (expected, 3, *image.shape[1:])
    for s in clean:  # each prediction mapped back through its inverse flip: identical samples
        assert torch.allclose(s, reference[0], atol=1e-6)
    assert torch.allclose(noisy[0::2], clean, atol=1e-6)  # (flip, no noise), (flip, noise), ...
    assert not torch.allclose(noisy[1], clean[0], atol=1e-3)


def test_tta_without_inverse_flip_would_differ():
    net = Pointwise(2).eval()
    image = torch.randn(1, 6, 6)
    with torch.no_grad():
        flipped = net(image.flip(-1)[None]).softmax(1)[0]
        assert not torch.allclose(flipped, net(image[None]).softmax(1)[0], atol=1e-3)  # the check has teeth


# -- test-time dropout ---------------------------------------------------------------------
def test_ttd_dropout_on_norm_layers_in_eval_mode():
    net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Dropout(0.5), nn.Conv2d(4, 2, 1))
    net[1].running_mean.fill_(0.3)
    net.eval()
    ttd = registry.create("prediction_model", "test_time_dropout", num_samples=4)
    with torch.no_grad():
        s = ttd.predict([net], torch.randn(1, 8, 8))
    assert s.shape == (4, 2, 8, 8) and not torch.equal(s[0], s[1])
    assert torch.all(net[1].running_mean == 0.3)  # batch norm stayed in eval mode
    assert not any(m.training for m in net.modules())  # modes restored
    with pytest.raises(ValueError, match="no dropout"):
        ttd.predict([nn.Conv2d(1, 2, 1).eval()], torch.randn(1, 8, 8))
