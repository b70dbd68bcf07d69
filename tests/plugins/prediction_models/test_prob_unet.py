"""C1 ``prob_unet``: the Probabilistic U-Net (Kohl et al. 2018) on the engine's one training loop.

References: ``torch.distributions`` (the KL of two diagonal Normals), a small case of the ELBO
computed by hand, the engine's fused and one-by-one training, and a deterministic model as the
control of sample diversity.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.distributions import Independent, Normal, kl_divergence

from values_seg import registry
from values_seg.engine import (Checkpoints, PredictionCache, Recipe, TrainingSpec, dataset_ref,
                               load_network, predict_split, train)
from values_seg.engine import fused, training_setup
from values_seg.engine.inference import validate_samples
from values_seg.engine.networks import arch_info, build_network
from values_seg.families import FAMILIES
from values_seg_plugins.prediction_models.prob_unet import (ProbUNet, ProbUNetHead, ProbUNetNetwork, kl_diagonal,
                                                            prob_unet_loss)

ARCH = {"dims": 2, "in_channels": 1, "num_classes": 2, "ignore_index": None}


def _model(**params) -> ProbUNet:
    return registry.create("prediction_model", "prob_unet", **params)


def _network(dims=2, num_classes=2, latent_dim=3, seed=0, ignore_index=None,
             **head) -> tuple[ProbUNetHead, ProbUNetNetwork]:
    """A tiny Probabilistic U-Net on the built-in U-Net backbone (width 4, depth 2)."""
    torch.manual_seed(seed)
    h = ProbUNetHead(latent_dim=latent_dim, features=8, encoder_width=4, encoder_stages=3, **head)
    unet = registry.get("backbone", "unet").obj
    backbone = unet(dims, 1, h.out_channels(num_classes), base_width=4, depth=2)
    arch = {"dims": dims, "in_channels": 1, "num_classes": num_classes, "ignore_index": ignore_index}
    return h, h.build(backbone, arch)


# ---------------------------------------------------------------- the loss


def test_kl_is_torch_distributions_kl_of_the_same_normals():
    torch.manual_seed(0)
    mu_q, mu_p = torch.randn(4, 6, dtype=torch.float64), torch.randn(4, 6, dtype=torch.float64)
    ls_q, ls_p = torch.randn(4, 6, dtype=torch.float64), torch.randn(4, 6, dtype=torch.float64)
    ref = kl_divergence(Independent(Normal(mu_q, ls_q.exp()), 1), Independent(Normal(mu_p, ls_p.exp()), 1))
    ours = kl_diagonal(mu_q, ls_q, mu_p, ls_p)
    assert ours.shape == (4,) and torch.allclose(ours, ref, rtol=1e-12, atol=1e-12)
    assert not torch.allclose(kl_diagonal(mu_p, ls_p, mu_q, ls_q), ref)  # KL(q || p), not KL(p || q)
    assert torch.allclose(kl_diagonal(mu_q, ls_q, mu_q, ls_q), torch.zeros(4, dtype=torch.float64))


@pytest.mark.parametrize("beta", [0.0, 1.0, 2.5])
def test_elbo_on_a_hand_computed_case(beta):
    """Two pixels, one latent dimension. Pixel 1: logits (0, 0), label 1: CE log 2; pixel 2: logits
    (log 3, 0), label 0: p = 3/4, CE log 4/3. Posterior N(1, 1), prior N(0, 2^2): KL = log 2 +
    (1 + 1) / 8 - 1/2. Loss = (log 2 + log 4/3 + beta KL) / 2 pixels."""
    logits = torch.tensor([[[[0.0, math.log(3.0)]], [[0.0, 0.0]]]])  # [B=1, C=2, 1, 2]
    target = torch.tensor([[[1, 0]]])
    post_mu, post_ls = torch.tensor([[1.0]]), torch.tensor([[0.0]])
    prior_mu, prior_ls = torch.tensor([[0.0]]), torch.tensor([[math.log(2.0)]])
    kl = 0.6931471805599453 + 0.25 - 0.5
    expected = (0.6931471805599453 + 0.2876820724517809 + beta * kl) / 2
    loss = prob_unet_loss(logits, target, prior_mu, prior_ls, post_mu, post_ls, beta=beta)
    assert float(loss) == pytest.approx(expected, rel=1e-6)
    # an ignored pixel leaves the reconstruction term, not the pixel count (scale only)
    ignored = prob_unet_loss(logits, torch.tensor([[[1, 255]]]), prior_mu, prior_ls, post_mu, post_ls, beta=beta,
                             ignore_index=255)
    assert float(ignored) == pytest.approx((0.6931471805599453 + beta * kl) / 2, rel=1e-6)
    # a batch: the mean over images
    batch = prob_unet_loss(logits.repeat(2, 1, 1, 1), target.repeat(2, 1, 1), prior_mu.repeat(2, 1),
                           prior_ls.repeat(2, 1), torch.tensor([[1.0], [0.0]]), torch.tensor([[0.0], [math.log(2.0)]]),
                           beta=beta)
    assert float(batch) == pytest.approx(((0.6931471805599453 + 0.2876820724517809) * 2 + beta * kl) / 4, rel=1e-6)


def test_the_head_loss_is_the_elbo_of_the_training_forward_and_trains_every_part():
    h, net = _network(beta=0.5)
    x, y = torch.randn(2, 1, 16, 16), torch.randint(0, 2, (2, 16, 16))
    torch.manual_seed(1)
    out = net(x, *h.training_inputs(y))
    loss = h.loss(out, y, ignore_index=None, epoch=0, recipe=Recipe())
    reference = prob_unet_loss(out[0], y, *out[1:], beta=0.5)
    assert float(loss.detach()) == pytest.approx(float(reference.detach()), rel=1e-6)
    loss.backward()
    for part in (net.backbone, net.prior, net.posterior, net.combination):
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in part.parameters()), type(part).__name__
    with pytest.raises(ValueError, match="training forward"):
        h.loss(net(x), y, ignore_index=None, epoch=0, recipe=Recipe())


# ---------------------------------------------------------------- the network


@pytest.mark.parametrize("dims, size", [(2, 24), (3, 12)])
def test_shapes_in_2d_and_3d(dims, size):
    h, net = _network(dims=dims, num_classes=3, latent_dim=4)
    spatial = (size,) * dims
    x, y = torch.randn(2, 1, *spatial), torch.randint(0, 3, (2, *spatial))
    inputs = h.training_inputs(y)
    assert inputs[0] is y and inputs[1].shape == (2, 4)
    logits, *gaussians = net(x, *inputs)
    assert logits.shape == (2, 3, *spatial) and [g.shape for g in gaussians] == [(2, 4)] * 4
    image_only = net(x)  # the learning curve's forward: the prior's mean latent
    assert len(image_only) == 3 and image_only[0].shape == (2, 3, *spatial)
    net.eval()
    assert net.sample_logits(x, 5, max_batch=2).shape == (5, 2, 3, *spatial)
    samples = _model(num_samples=7).predict([net], x[0])
    assert samples.shape == (7, 3, *spatial)
    validate_samples(samples, "case", 3, spatial, 7)


def test_the_posterior_sees_the_target_and_the_prior_does_not():
    h, net = _network(ignore_index=255)
    x = torch.randn(1, 1, 16, 16)
    y1, y2 = torch.zeros(1, 16, 16, dtype=torch.long), torch.ones(1, 16, 16, dtype=torch.long)
    noise = torch.zeros(1, 3)
    with torch.no_grad():
        a, b = net(x, y1, noise), net(x, y2, noise)
        ignored = net(x, torch.full((1, 16, 16), 255), noise)
    assert torch.equal(a[1], b[1]) and torch.equal(a[2], b[2])  # the prior: the image alone
    assert not torch.allclose(a[3], b[3])  # the posterior: the label map too
    assert not torch.allclose(a[0], b[0])  # and its latent moves the logits
    onehot = net.one_hot(torch.tensor([[[0, 1, 255]]]))
    assert onehot.tolist() == [[[[1.0, 0.0, 0.0]], [[0.0, 1.0, 0.0]]]]
    assert torch.isfinite(ignored[3]).all()


def test_prior_samples_differ_while_a_deterministic_models_do_not():
    h, net = _network()
    net.eval()
    image = torch.randn(1, 16, 16)
    torch.manual_seed(0)
    samples = _model(num_samples=6).predict([net], image)
    assert all(not torch.allclose(samples[i], samples[j], atol=1e-4) for i in range(6) for j in range(i))
    torch.manual_seed(0)
    assert torch.equal(_model(num_samples=6).predict([net], image), samples)  # seeded: the same draws
    # the control: a prior of (almost) zero spread gives (almost) one sample, as the deterministic model does
    with torch.no_grad():
        layer = net.prior.to_gaussian
        layer.weight.zero_()
        layer.bias[3:] = -10.0  # log sigma at its floor
    flat = _model(num_samples=6).predict([net], image)
    assert all(torch.allclose(flat[0], s, atol=1e-3) for s in flat)
    plain = registry.get("backbone", "unet").obj(2, 1, 2, base_width=4, depth=2).eval()
    deterministic = registry.create("prediction_model", "deterministic")
    once, twice = deterministic.predict([plain], image), deterministic.predict([plain], image)
    assert once.shape == (1, 2, 16, 16) and torch.equal(once, twice)


# ---------------------------------------------------------------- the model and the engine


def test_registered_in_the_variability_family_with_kohls_defaults(base):
    comp = registry.get("prediction_model", "prob_unet")
    assert comp.obj is ProbUNet and comp.obj.family == "variability" and "variability" in FAMILIES
    assert comp.label == "PU-Net" and "Kohl et al. 2018" in comp.description
    defaults = {p.name: p.default for p in comp.params}
    assert defaults["latent_dim"] == 6 and defaults["beta"] == 1.0 and defaults["combination_layers"] == 3
    # under its family mutual information stands for AU, expected entropy for EU (the SSN's row)
    for measure, utype in (("predictive_entropy", "PU"), ("expected_entropy", "EU"), ("mutual_information", "AU")):
        assert registry.get("measure", measure).meta["uncertainty_types"]["variability"] == utype
    (spec,) = _model().training_specs(base)
    assert spec.head == ProbUNetHead() and spec.seed == base.seed and spec.recipe == base.recipe
    key = lambda **p: _model(**p).training_specs(base)[0].key()  # noqa: E731
    assert key(num_samples=3) == key(num_samples=30)  # inference only
    assert len({key(), key(beta=0.5), key(latent_dim=2), key(features=16), key(encoder_width=8)}) == 5
    with pytest.raises(ValueError, match="beta >= 0"):
        _model(beta=-1.0)
    with pytest.raises(TypeError, match="Probabilistic U-Net network"):
        _model().predict([torch.nn.Conv2d(1, 2, 1)], torch.randn(1, 8, 8))


def test_trained_on_toy_1_it_predicts_valid_probability_samples(base, store, toy_ref, tmp_path):
    model = _model(num_samples=8)
    (spec,) = model.training_specs(base)
    handles = predict_split(model, [spec], store, toy_ref, "val", PredictionCache(tmp_path), device="cpu",
                            progress=False)
    assert len(handles) == 2
    for handle in handles:
        s = handle.load()
        assert s.shape == (8, 2, 32, 32) and s.dtype == torch.float32
        assert torch.isfinite(s).all() and (s >= 0).all()
        assert torch.allclose(s.sum(1), torch.ones(()), atol=1e-3)
        assert not torch.allclose(s[0], s[1])
    net = load_network(spec, store, "cpu")
    assert isinstance(net, ProbUNetNetwork) and not net.training


def _fused(seed: int, scenario: str = "1") -> TrainingSpec:
    data = dataset_ref("toy", {"scenario": scenario, "dims": 2, "size": 32, "train_cases": 6, "val_cases": 2})
    plain = TrainingSpec.create(data, "unet", backbone_params={"base_width": 4},
                                recipe=Recipe(epochs=1, steps_per_epoch=3, batch_size=2), seed=seed, fused=True)
    return _model(latent_dim=3, encoder_width=4, encoder_stages=3, features=8).training_specs(plain)[0]


def test_fused_training_feeds_each_member_its_own_target_and_noise(tmp_path):
    """A member's weights do not depend on its group (its label maps and noise are its own), and
    its posterior net trained (the target reached it inside the vectorised forward)."""
    target, *rest = _fused(0), _fused(1, "2"), _fused(2)
    assert target.fused and target.head is not None and fused.job_key(target) == fused.job_key(rest[0])

    def trained(group, name):
        store = Checkpoints(tmp_path / name)
        assert fused.train_group(group, store, progress=False) == {s.key(): None for s in group}
        return store.load(target)["state_dict"]

    alone, three = trained([target], "alone"), trained([*rest, target], "three")
    assert alone.keys() == three.keys() and all(torch.equal(alone[k], three[k]) for k in alone)
    training_setup.seed_everything(target.seed)
    init = build_network(target, arch_info(target.dataset.create())).state_dict()
    for part in ("posterior.", "prior.", "combination.", "backbone."):
        assert any(not torch.equal(alone[k], init[k]) for k in init if k.startswith(part)), part


def test_one_by_one_training_on_the_engine_loop(base, toy_ref):
    spec = _model(latent_dim=3, encoder_width=4).training_specs(base)[0]
    assert not spec.fused
    state = train(spec, device="cpu", progress=False, dataset=toy_ref.create())
    assert all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point())
    torch.manual_seed(base.seed)
    init = build_network(spec, ARCH).state_dict()
    assert any(not torch.equal(state[k], init[k]) for k in init if k.startswith("posterior."))


# ---------------------------------------------------------------- trained for real


@pytest.mark.slow
def test_on_toy_1_its_samples_vary_where_the_raters_disagree():
    """The quick toy recipe on scenario 1 (60 cases, 15 epochs): the posterior encodes which rater
    drew the label map (larger masks, larger reconstructions) and the prior's samples vary on the
    raters' disagreement, far less where they agree."""
    ds_ref = dataset_ref("toy", {"scenario": "1", "dims": 2, "size": 32, "train_cases": 60, "val_cases": 4})
    ds = ds_ref.create()
    base = TrainingSpec.create(ds_ref, "unet", backbone_params={"base_width": 8},
                               recipe=Recipe.preset("unet", lr=3e-3, epochs=15), seed=0)
    model = _model()
    (spec,) = model.training_specs(base)
    net = build_network(spec, ARCH)
    net.load_state_dict(train(spec, device="cpu", progress=False, dataset=ds))
    net.eval()
    disagree, agree, ordered = [], [], 0
    cases = ds.case_ids("test")[:10]
    for i, cid in enumerate(cases):
        case = ds.load(cid)
        x = torch.from_numpy(case.image)
        torch.manual_seed(i)
        probs = model.predict([net], x)
        validate_samples(probs, cid, 2, (32, 32), 10)
        var = probs[:, 1].var(0)
        split = torch.from_numpy(case.raters.std(0) > 0)
        disagree.append(float(var[split].mean()))
        agree.append(float(var[~split].mean()))
        with torch.no_grad():  # the posterior means of the three raters' masks, reconstructed
            sizes = [int(net(x[None], torch.from_numpy(r[None]).long(), torch.zeros(1, 6))[0].argmax(1).sum())
                     for r in case.raters]
        masks = case.raters.reshape(len(case.raters), -1).sum(1)
        ordered += int(np.all(np.diff(np.array(sizes)[np.argsort(masks, kind="stable")]) >= 0))
    assert np.mean(disagree) > 5 * np.mean(agree)
    assert ordered >= 8
