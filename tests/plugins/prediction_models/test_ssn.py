"""C1 ``ssn``: its own head and loss on the engine's one training loop, checked against references."""

from __future__ import annotations

import pytest
import torch

from values_seg import registry
from values_seg.engine import ensure_trained, load_network, train
from values_seg_plugins.prediction_models.ssn import SSNHead, ssn_loss


def _model(**params):
    return registry.create("prediction_model", "ssn", **{"pretrain_epochs": 1, **params})


def test_loss_with_zero_covariance_is_the_cross_entropy_of_the_mean():
    target = torch.tensor([[[0, 1], [1, 0]]])
    b, c, n = 1, 2, 4
    mean = torch.randn(b, c, 2, 2)
    factor, diag = torch.zeros(b, c * n, 1), torch.full((b, c * n), 1e-12)
    full = ssn_loss(mean, factor, diag, target, mc_samples=6)
    mean_only = ssn_loss(mean, factor, diag, target, mc_samples=6, mean_only=True)
    ce = torch.nn.functional.cross_entropy(mean, target)
    assert torch.allclose(full, ce, atol=1e-4) and torch.allclose(mean_only, ce, atol=1e-6)


def test_the_head_trains_on_the_engine_loop_and_keys_only_what_trains(base, toy_ref):
    spec = _model(rank=2, mc_samples=4).training_specs(base.replace(recipe=base.recipe.replace(epochs=2, steps_per_epoch=1)))[0]
    assert spec.head == SSNHead(rank=2, mc_samples=4, pretrain_epochs=1)
    state = train(spec, device="cpu", progress=False, dataset=toy_ref.create())
    assert all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point())
    # inference settings do not retrain
    assert _model(rank=2, mc_samples=4, num_samples=3).training_specs(base)[0].key() == _model(
        rank=2, mc_samples=4, num_samples=30).training_specs(base)[0].key()


def test_ssn_samples_match_the_low_rank_distribution(base, store, toy_ref):
    model = _model()
    (spec,) = model.training_specs(base)
    ensure_trained([spec], store, device="cpu", progress=False)
    net = load_network(spec, store, "cpu")
    case = toy_ref.create().load(toy_ref.create().case_ids("val")[0])
    x = torch.from_numpy(case.image)[None]
    with torch.no_grad():
        mean, factor, diag = net(x)
        logits = net.sample_logits(x, 4)
        probs = model.predict([net], x[0])
    assert logits.shape == (4, 1, 2, 32, 32) and not torch.allclose(logits[0], logits[1])
    assert probs.shape == (10, 2, 32, 32) and not torch.allclose(probs[0], probs[1])

    n_pix = 32 * 32
    pixels = torch.tensor([0, 17, 300, 301, 333, 1000])
    idx = torch.cat([pixels, pixels + n_pix])  # both classes of each pixel
    mu = mean.reshape(-1)[idx].double()
    p = factor[0, idx].double()
    cov = p @ p.T + torch.diag(diag[0, idx].double())

    torch.manual_seed(0)
    n, chunk = 40_000, 5_000
    total, outer = torch.zeros(len(idx), dtype=torch.float64), torch.zeros(len(idx), len(idx), dtype=torch.float64)
    with torch.no_grad():
        dist, _ = net.distribution(x)
        for _ in range(n // chunk):
            z = dist.sample((chunk,))[:, 0, idx].double()
            total += z.sum(0)
            outer += z.T @ z
    emp_mean = total / n
    emp_cov = outer / n - torch.outer(emp_mean, emp_mean)
    var = torch.diagonal(cov)
    assert torch.all((emp_mean - mu).abs() <= 5 * (var / n).sqrt())
    se = ((torch.outer(var, var) + cov**2) / n).sqrt()
    assert torch.all((emp_cov - cov).abs() <= 5 * se)
    off = ~torch.eye(len(idx), dtype=torch.bool)
    assert (cov[off].abs() > 10 * se[off]).any()  # a genuinely correlated (low-rank) distribution
