"""Mixed precision: recipe field, keys, config resolution, training and inference in bf16 / fp16."""

from __future__ import annotations

import pytest
import torch

from values_seg import registry
from values_seg.engine import Recipe, predict_case, train
from values_seg.engine.precision import autocast, resolve
from values_seg.engine.specs import PRECISIONS


def test_resolve():
    assert resolve("auto", "cpu") == resolve(None, "cpu") == "fp32"
    for p in PRECISIONS:
        assert resolve(p, "cpu") == p
    with pytest.raises(ValueError, match="auto, fp32, bf16, fp16"):
        resolve("fp64", "cpu")
    with pytest.raises(ValueError, match="unknown precision"):
        Recipe(precision="half")


def test_fp32_keeps_the_keys_it_had_and_other_precisions_key_apart(base_spec):
    assert "precision" not in base_spec.recipe.to_dict()  # fp32: the key of every recipe before the field
    keys = {p: base_spec.replace(recipe=base_spec.recipe.replace(precision=p)).key() for p in PRECISIONS}
    assert len(set(keys.values())) == 3
    streams = {p: str(base_spec.replace(recipe=base_spec.recipe.replace(precision=p)).stream_identity())
               for p in PRECISIONS}
    assert streams["fp32"] == str(base_spec.stream_identity()) and len(set(streams.values())) == 3


def test_config_precision_auto_is_fp32_on_the_cpu(tmp_path):
    from values_seg.config.checks import ConfigError
    from values_seg.config.loading import load_config

    cfg = tmp_path / "c.yaml"
    cfg.write_text("device: cpu\ndatasets: [{name: toy, params: {dims: 2, size: 32}}]\nbackbones: [unet]\n"
                   "prediction_models: [deterministic]\nmeasures: [predictive_entropy]\naggregations: [patch]\n"
                   "tasks: [segmentation]\n")
    assert load_config(cfg).recipe.precision == "fp32"
    assert load_config(cfg, ["recipe.precision=auto"]).recipe.precision == "fp32"
    assert load_config(cfg, ["recipe.precision=bf16"]).recipe.precision == "bf16"
    with pytest.raises(ConfigError, match="precision"):
        load_config(cfg, ["recipe.precision=fp64"])


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_trains_and_changes_the_arithmetic(base_spec, toy, precision):
    """Autocast is really on (the weights differ from fp32's), the loss stays finite (fp16: scaled)
    and the weights stay float32."""
    spec = base_spec.replace(recipe=base_spec.recipe.replace(steps_per_epoch=3, epochs=2))
    fp32 = train(spec, device="cpu", progress=False, dataset=toy)
    mixed = train(spec.replace(recipe=spec.recipe.replace(precision=precision)), device="cpu", progress=False,
                  dataset=toy)
    assert all(v.dtype == fp32[k].dtype for k, v in mixed.items())
    assert all(torch.isfinite(v).all() for v in mixed.values() if v.is_floating_point())
    assert any(not torch.equal(fp32[k], mixed[k]) for k in fp32)
    # the same small number of Adam steps from the same start: close to the fp32 weights
    drift = max(float((fp32[k] - mixed[k]).abs().max()) for k in fp32 if fp32[k].is_floating_point())
    assert drift < 0.05


def test_bf16_inference_gives_valid_samples_close_to_fp32(base_spec, toy):
    net_state = train(base_spec, device="cpu", progress=False, dataset=toy)
    from values_seg.engine.networks import arch_info, build_network

    net = build_network(base_spec, arch_info(toy))
    net.load_state_dict(net_state)
    net.eval()
    model = registry.create("prediction_model", "test_time_augmentation")
    case = toy.load(toy.case_ids("test")[0])
    cpu = torch.device("cpu")
    fp32 = predict_case(model, [net], case, cpu, "stream", toy.num_classes)
    bf16 = predict_case(model, [net], case, cpu, "stream", toy.num_classes, precision="bf16")
    assert bf16.dtype == torch.float32 and bf16.shape == fp32.shape  # validated probabilities, float32
    torch.testing.assert_close(bf16.sum(dim=1), torch.ones_like(bf16[:, 0]), atol=1e-5, rtol=0)
    # bfloat16 keeps 8 bits of mantissa: close to fp32 on average (single pixels near a tie can move more)
    assert float((fp32 - bf16).abs().mean()) < 0.02


def test_autocast_is_a_no_op_in_fp32():
    x = torch.randn(4, 4)
    with autocast("fp32", torch.device("cpu")):
        assert (x @ x).dtype == torch.float32
    with autocast("bf16", torch.device("cpu")):
        assert (x @ x).dtype == torch.bfloat16


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_on_cuda_a_spec_trained_twice_with_any_loader_workers_gives_the_same_weights(base_spec, toy, precision):
    """The seed contract on a GPU: cuDNN deterministic, plans drawn in the training process."""
    spec = base_spec.replace(recipe=base_spec.recipe.replace(steps_per_epoch=3, epochs=2, precision=precision))
    a = train(spec, device="cuda", progress=False, dataset=toy, loader_workers=0)
    b = train(spec, device="cuda", progress=False, dataset=toy, loader_workers=2)
    assert all(torch.equal(a[k], b[k]) for k in a)
