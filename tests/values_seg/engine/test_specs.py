"""Training specs: keys are stable, canonical, and share trainings across prediction models."""

from __future__ import annotations

import json

import pytest

from values_seg import registry
from values_seg.engine import Recipe, TrainingSpec, backbone_ref, dataset_ref, unique_specs
from values_seg.storage.canonical import canonical_json
from values_seg_plugins.prediction_models.ssn import SSNHead


def test_key_is_sha256_of_canonical_json(base_spec):
    key = base_spec.key()
    assert len(key) == 64 and int(key, 16) >= 0
    assert key == TrainingSpec.from_dict(json.loads(canonical_json(base_spec.to_dict()))).key()
    assert base_spec == TrainingSpec.from_dict(base_spec.to_dict())
    assert hash(base_spec) == hash(TrainingSpec.from_dict(base_spec.to_dict()))


def test_defaults_and_types_are_normalised(toy_ref):
    a = dataset_ref("toy", {"scenario": "1", "dims": 2, "size": 32, "train_cases": 6, "val_cases": 2})
    b = dataset_ref("toy", {"scenario": "1", "dims": "2", "size": 32.0, "train_cases": 6, "val_cases": 2, "seed": 0})
    assert a == b == toy_ref and a.key() == b.key()
    assert backbone_ref("unet").key() == backbone_ref("unet", {"base_width": 8}).key()
    assert backbone_ref("unet").key() != backbone_ref("unet", {"base_width": 16}).key()
    with pytest.raises(ValueError, match="engine supplies"):
        backbone_ref("unet", {"dims": 3})
    with pytest.raises(ValueError, match="unknown parameter"):
        dataset_ref("toy", {"sise": 32})


def test_fields_that_cannot_matter_are_dropped():
    assert Recipe(momentum=0.9) == Recipe()  # Adam ignores momentum
    assert Recipe(noise_prob=0.0, noise_std=0.3) == Recipe(noise_std=0.0)
    assert Recipe(lr=1).lr == 1.0 and Recipe(flip_axes=[1, 0, 1]).flip_axes == (0, 1)
    assert Recipe(optimizer="sgd", momentum=0.9) != Recipe(optimizer="sgd")


def test_everything_that_matters_changes_the_key(base_spec):
    keys = {
        base_spec.key(),
        base_spec.replace(seed=1).key(),
        base_spec.replace(dropout=0.5).key(),
        base_spec.replace(recipe=base_spec.recipe.replace(lr=1e-3)).key(),
        base_spec.replace(recipe=base_spec.recipe.replace(epochs=2)).key(),
        base_spec.replace(backbone=backbone_ref("unet", {"base_width": 8})).key(),
        base_spec.replace(extra_cases=(("test", "toy1_test_0000"),)).key(),
        base_spec.replace(head=SSNHead()).key(),
        base_spec.replace(head=SSNHead(rank=3)).key(),
        base_spec.replace(dataset=dataset_ref("toy", {"scenario": "2", "dims": 2, "size": 32})).key(),
    }
    assert len(keys) == 10


def test_extra_cases_are_a_set(base_spec):
    a = base_spec.replace(extra_cases=(("pool", "b"), ("pool", "a"), ("pool", "b")))
    b = base_spec.replace(extra_cases=[("pool", "a"), ("pool", "b")])
    assert a == b and a.extra_cases == (("pool", "a"), ("pool", "b"))


def test_a_head_round_trips_and_must_be_a_head(base_spec):
    spec = base_spec.replace(head=SSNHead(rank=3))
    assert TrainingSpec.from_dict(json.loads(canonical_json(spec.to_dict()))) == spec
    assert spec.to_dict()["head"] == {"kind": "ssn", "params": {
        "rank": 3, "mc_samples": 20, "pretrain_epochs": 5, "features": 32, "init_std": 0.01, "anchor_weight": 1.0,
        "per_sample_weight": 0.1}}
    assert base_spec.to_dict()["head"] == {"kind": "softmax", "params": {}}  # keys of plain trainings are stable
    with pytest.raises(TypeError, match="Head"):
        base_spec.replace(head="ssn")
    with pytest.raises(ValueError, match="unknown head 'nope'"):
        TrainingSpec.from_dict({**base_spec.to_dict(), "head": {"kind": "nope", "params": {}}})


def test_prediction_models_share_trainings(base_spec):
    make = lambda name, **kw: registry.create("prediction_model", name, **kw)  # noqa: E731
    det = [make("deterministic").training_specs(base_spec.replace(seed=s))[0] for s in range(5)]
    ens = make("ensemble", members=5).training_specs(base_spec)
    assert [s.key() for s in ens] == [s.key() for s in det]
    assert make("test_time_augmentation").training_specs(base_spec) == [base_spec]
    (ttd,) = make("test_time_dropout", p=0.5).training_specs(base_spec)
    assert ttd == base_spec.replace(dropout=0.5) and ttd.key() != base_spec.key()
    (ssn,) = make("ssn", rank=5).training_specs(base_spec)
    assert ssn.head == SSNHead(rank=5, mc_samples=20, pretrain_epochs=5) and ssn.recipe == base_spec.recipe
    everything = det + ens + [base_spec, ttd, ssn]
    assert len(unique_specs(everything)) == 7


def test_ssn_optimizer_overrides(base_spec):
    (spec,) = registry.create("prediction_model", "ssn", optimizer="rmsprop", lr=1e-4, momentum=0.6, weight_decay=5e-4).training_specs(
        base_spec.replace(recipe=Recipe.preset("hrnet"))
    )
    r = spec.recipe
    assert (r.optimizer, r.lr, r.momentum, r.weight_decay, r.loss, r.batch_size) == ("rmsprop", 1e-4, 0.6, 5e-4, "ce", 6)


def test_presets():
    assert Recipe.preset("unet") == Recipe()
    h = Recipe.preset("hrnet", epochs=3)
    assert (h.optimizer, h.lr, h.weight_decay, h.momentum, h.batch_size, h.loss, h.epochs) == ("sgd", 0.01, 5e-4, 0.9, 6, "ce", 3)
    with pytest.raises(ValueError, match="available"):
        Recipe.preset("nope")
