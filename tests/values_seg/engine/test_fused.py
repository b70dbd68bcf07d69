"""Fused training (values_seg.engine.fused): a member's weights do not depend on its group."""

from __future__ import annotations

import pytest
import torch

from values_seg import registry
from values_seg.engine import Checkpoints, Recipe, TrainingSpec, dataset_ref, ensure_trained, train
from values_seg.engine import fused, training, training_setup
from values_seg.engine.networks import arch_info, build_network

RECIPE = Recipe(epochs=1, steps_per_epoch=3, batch_size=2)


def data(scenario: str = "1"):
    return dataset_ref("toy", {"scenario": scenario, "dims": 2, "size": 32, "train_cases": 6, "val_cases": 2})


def spec(seed: int, scenario: str = "1", dropout: float = 0.0, **fields) -> TrainingSpec:
    return TrainingSpec.create(data(scenario), "unet", backbone_params={"base_width": 4}, recipe=RECIPE, seed=seed,
                               dropout=dropout, fused=True, **fields)


def trained(group, target, tmp_path, name, train_group=fused.train_group, **kwargs) -> dict:
    store = Checkpoints(tmp_path / name)
    errors = train_group(group, store, progress=False, **kwargs)
    assert errors == {s.key(): None for s in group}
    return store.load(target)["state_dict"]


def assert_identical(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), [k for k in a if not torch.equal(a[k], b[k])][:3]


def others() -> list[TrainingSpec]:
    """Seven other specs: other seeds, other datasets of the same shapes, with and without dropout."""
    return [spec(1, "2"), spec(2), spec(3, "3a", 0.5), spec(4), spec(5, "2", 0.5), spec(6), spec(7, "3b")]


@pytest.mark.parametrize("dropout", [0.0, 0.5])
def test_member_weights_do_not_depend_on_the_group(tmp_path, dropout):
    target = spec(0, dropout=dropout)
    alone = trained([target], target, tmp_path, "alone")
    pair = trained([spec(9, "2", 0.5), target], target, tmp_path, "pair")
    eight = trained([*others()[:3], target, *others()[3:]], target, tmp_path, "eight")
    assert_identical(alone, pair)
    assert_identical(alone, eight)
    # it trained: not its initialisation, and not the same as a neighbour
    training_setup.seed_everything(target.seed)
    init = build_network(target, arch_info(target.dataset.create())).state_dict()
    assert any(not torch.equal(alone[k], init[k]) for k in init)


def test_ssn_member_does_not_depend_on_the_group(tmp_path):
    ssn = registry.create("prediction_model", "ssn", rank=2, num_samples=4, pretrain_epochs=1)
    target, *rest = [ssn.training_specs(s)[0] for s in (spec(0), spec(1, "2"), spec(2, "3a"))]
    assert target.head is not None and target.fused
    assert_identical(trained([target], target, tmp_path, "alone"), trained([*rest, target], target, tmp_path, "three"))


def test_fused_specs_are_keyed_apart_and_normalised():
    one_by_one = spec(0).replace(fused=False)
    assert spec(0).key() != one_by_one.key()
    assert "fused" not in one_by_one.to_dict()  # the keys of one-by-one trainings stay what they were
    assert spec(0).stream_identity() == one_by_one.stream_identity()
    # where a member's arithmetic depends on its group, the spec is not fused
    assert not spec(0, threads=2).fused
    assert not spec(0).replace(recipe=RECIPE.replace(precision="fp16")).fused
    assert TrainingSpec.from_dict(spec(0).to_dict()) == spec(0)


def test_job_groups_share_backbone_recipe_and_head():
    ssn = registry.create("prediction_model", "ssn", rank=2)
    a, b, c = spec(0), spec(1, "2", 0.5), ssn.training_specs(spec(2))[0]
    d = spec(3).replace(recipe=RECIPE.replace(lr=1e-2))
    e = spec(4).replace(fused=False)
    assert fused.job_groups([a, c, b, d, e]) == [[a, b], [c], [d], [e]]


def test_a_diverging_member_fails_alone(tmp_path, monkeypatch):
    target = spec(0)
    reference = trained([target, spec(2)], target, tmp_path, "reference")
    loss_function = training_setup._loss_function

    def blow_up_seed_1(s, ignore_index):  # a test hook: member seed 1's loss becomes inf at its second step
        base, calls = loss_function(s, ignore_index), []

        def loss(output, target, epoch):
            calls.append(1)
            value = base(output, target, epoch)
            return value * float("inf") if s.seed == 1 and len(calls) >= 2 else value
        return loss

    monkeypatch.setattr(training_setup, "_loss_function", blow_up_seed_1)
    diverging = spec(1)
    store = Checkpoints(tmp_path / "group")
    errors = fused.train_group([target, diverging, spec(2)], store, progress=False)
    assert errors[target.key()] is None and errors[spec(2).key()] is None
    assert "FloatingPointError" in errors[diverging.key()] and diverging.describe() in errors[diverging.key()]
    assert "near step 2" in errors[diverging.key()]
    assert not store.has(diverging) and store.has(spec(2))
    assert_identical(store.load(target)["state_dict"], reference)
    # ensure_trained names it after saving the others
    with pytest.raises(FloatingPointError, match="seed1"):
        ensure_trained([target, diverging], Checkpoints(tmp_path / "ensure"), progress=False)
    assert Checkpoints(tmp_path / "ensure").has(target)


def test_a_member_whose_last_update_makes_its_weights_non_finite_fails_alone(tmp_path, monkeypatch):
    """Its losses were all finite, so it was saved as trained; now it fails alone, named with its
    first non-finite tensor, and the others are saved with their own weights."""
    target = spec(0)
    reference = trained([target, spec(2)], target, tmp_path, "reference")
    loss_function = training_setup._loss_function

    def poison_seed_1(s, ignore_index):  # a test hook: member seed 1's gradients become inf at its last step
        base, calls = loss_function(s, ignore_index), []

        def loss(output, target, epoch):
            calls.append(1)
            if s.seed == 1 and len(calls) == RECIPE.steps_per_epoch:
                output.register_hook(lambda grad: grad * float("inf"))
            return base(output, target, epoch)
        return loss

    monkeypatch.setattr(training_setup, "_loss_function", poison_seed_1)
    poisoned = spec(1)
    store = Checkpoints(tmp_path / "group")
    errors = fused.train_group([target, poisoned, spec(2)], store, progress=False)
    assert errors[target.key()] is None and errors[spec(2).key()] is None
    assert errors[poisoned.key()].startswith(f"FloatingPointError: spec {poisoned.describe()}: weights became "
                                             "non-finite after step 3, first in 'net.")
    assert not store.has(poisoned) and store.has(spec(2))
    assert_identical(store.load(target)["state_dict"], reference)


def test_a_memory_budget_splits_the_group_without_changing_a_member(tmp_path, monkeypatch):
    group = [spec(0), *others()[:4]]
    whole = trained(group, group[0], tmp_path, "whole")
    sizes = []
    real = fused._train_fused
    monkeypatch.setattr(fused, "_train_fused", lambda specs, *a: sizes.append(len(specs)) or real(specs, *a))
    split = trained(group, group[0], tmp_path, "split", budget=1)  # 1 byte: the narrowest groups
    assert sizes == [2, 2, 1]
    assert_identical(whole, split)


def test_a_partly_trained_group_resumes_only_the_missing_members(tmp_path, monkeypatch):
    group = [spec(0), spec(1), spec(2, "2")]
    store = Checkpoints(tmp_path / "ck")
    ensure_trained(group, store, progress=False)
    before = store.load(group[0])["state_dict"]
    store.remove(group[1])
    seen = []
    real = fused._train_fused
    monkeypatch.setattr(fused, "_train_fused", lambda specs, *a: seen.append(list(specs)) or real(specs, *a))
    ensure_trained(group, store, progress=False)
    assert seen == [[group[1]]]
    assert all(store.has(s) for s in group)
    assert_identical(store.load(group[0])["state_dict"], before)


def test_one_by_one_training_is_untouched(tmp_path):
    """``fused=False`` trains through the plain loop (ensure_trained does not group it)."""
    s = spec(0).replace(fused=False)
    store = Checkpoints(tmp_path / "ck")
    ensure_trained([s], store, progress=False)
    assert_identical(store.load(s)["state_dict"], train(s, progress=False))
    assert "fused_group" not in store.meta(s)


def test_spread_gives_parallel_workers_their_share():
    a = [spec(i) for i in range(24)]
    b = [spec(i).replace(dropout=0.5) for i in range(4)]  # (a stand-in for another group)
    assert [len(g) for g in fused.spread([a, b], 2)] == [4, 12, 12]
    assert [len(g) for g in fused.spread([a, b], 1)] == [24, 4]
    assert [len(g) for g in fused.spread([a[:3]], 4)] == [3]  # not below two slots a group
    assert fused.spread([], 2) == []  # nothing missing
    assert sorted(s.key() for g in fused.spread([a, b], 8) for s in g) == sorted(s.key() for s in a + b)


def _unet() -> torch.nn.Module:
    return registry.create("backbone", "unet", dims=2, in_channels=1, num_classes=2, base_width=4).eval()


def assert_within_float32_rounding(stacked: torch.Tensor, loop: torch.Tensor, nets, x: torch.Tensor) -> None:
    """``stacked`` and ``loop`` are float32 evaluations of the same sums in other orders (grouped
    convolutions, one network at a time): each is off the exact outputs by its own float32 rounding,
    errors of one size that grow with the reduction lengths, the magnitudes and the instance norms'
    division by small spreads, and that depend on the machine's kernels (a fixed atol tuned on one
    machine failed on another: 1.25e-5 against 1e-5). So the reference is the exact outputs (the
    networks in float64), the scale the loop's own largest error on these kernels, and the stacked
    outputs may be off by at most twice that (the largest of 10^4 such errors: within 1.4 times the
    loop's over a dozen draws). A wrong or stale weight is off by orders of magnitude more."""
    exact = []
    for net in nets:
        double = _unet().double()
        double.load_state_dict(net.state_dict())
        exact.append(double(x.double()))
    exact = torch.cat(exact)
    loop_error = float((loop.double() - exact).abs().max())
    stacked_error = float((stacked.double() - exact).abs().max())
    assert 0 < loop_error < 1e3 * torch.finfo(torch.float32).eps * float(exact.abs().max())  # the same function
    assert stacked_error <= 2 * loop_error, (stacked_error, loop_error)


def test_stacked_forward_is_every_network_on_its_own():
    """The ensemble's vectorised inference (on a GPU) against the loop, within float32 rounding."""
    from values_seg.components.prediction_model import members_forward, stacked_forward

    nets = []
    for seed in range(3):
        torch.manual_seed(seed)
        nets.append(_unet())
    x = torch.randn(2, 1, 32, 32)
    with torch.inference_mode():
        loop = torch.cat([n(x) for n in nets])
        assert torch.equal(members_forward(nets, x), loop)  # the CPU keeps the loop
        stacked = stacked_forward(nets, x)
        assert_within_float32_rounding(stacked, loop, nets, x)
    with torch.no_grad():
        next(nets[1].parameters()).mul_(2.0)  # an in-place change: stacked again, not the stale copy
        loop = torch.cat([n(x) for n in nets])
        assert_within_float32_rounding(stacked_forward(nets, x), loop, nets, x)
        assert not torch.allclose(stacked, loop)


def test_a_member_whose_data_cannot_be_read_fails_alone(tmp_path):
    broken = spec(1).replace(train_split="no_such_split")
    store = Checkpoints(tmp_path / "ck")
    errors = fused.train_group([spec(0), broken, spec(2)], store, progress=False)
    assert "no_such_split" in errors[broken.key()]
    assert errors[spec(0).key()] is None and store.has(spec(0)) and store.has(spec(2))


def test_vectorised_on_the_cpu_only():
    assert fused.vectorises("cpu") and fused.vectorises(torch.device("cpu"))
    if torch.cuda.is_available():
        assert not fused.vectorises("cuda")


def test_off_the_cpu_a_group_trains_one_by_one_with_the_engine_loop(tmp_path, monkeypatch):
    """Where the engine does not vectorise (a GPU), each member trains as a training of its own
    would, saved under its own (fused) key; a member that diverges fails alone, named."""
    loss_function = training_setup._loss_function

    def blow_up_seed_1(s, ignore_index):  # a test hook: member seed 1's loss becomes inf at once
        base = loss_function(s, ignore_index)
        return lambda output, target, epoch: base(output, target, epoch) * (float("inf") if s.seed == 1 else 1.0)

    monkeypatch.setattr(fused, "vectorises", lambda device: False)  # the branch a GPU takes, here on the CPU
    monkeypatch.setattr(training_setup, "_loss_function", blow_up_seed_1)
    group = [spec(0, dropout=0.5), spec(1), spec(2, "2")]
    store = Checkpoints(tmp_path / "ck")
    errors = training.train_fused(group, store, progress=False)
    assert errors[group[0].key()] is None and errors[group[2].key()] is None
    assert errors[group[1].key()].startswith("FloatingPointError: spec ") and "seed1" in errors[group[1].key()]
    assert not store.has(group[1]) and store.has(group[2])
    for s in (group[0], group[2]):  # bit for bit the plain loop's weights, under the fused spec's key
        assert_identical(store.load(s)["state_dict"], train(s.replace(fused=False), progress=False))
        assert "fused_group" not in store.meta(s)
    assert training.train_fused(group[:1], store, progress=False) == {group[0].key(): None}  # found, not retrained


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_a_member_does_not_depend_on_its_group(tmp_path):
    """The engine's fused training on a GPU (one by one there; vectorised, a member differed)."""
    target, run = spec(0), training.train_fused
    alone = trained([target], target, tmp_path, "alone", run, device="cuda")
    assert_identical(alone, trained([spec(1, "2"), target, spec(2)], target, tmp_path, "three", run, device="cuda"))
