"""Training: real steps on tiny toy data, reproducibility, the store, retraining what is corrupt."""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest
import torch

from values_seg.engine import (
    Checkpoints,
    CorruptFileError,
    CorruptFileWarning,
    Recipe,
    ensure_trained,
    load_network,
    resolve,
    train,
    training,
)
from values_seg.engine import augment, losses


@pytest.fixture
def count_trainings(monkeypatch):
    calls = []
    real = training.train_with_info

    def counting(spec, **kw):
        calls.append(spec.key())
        return real(spec, **kw)

    monkeypatch.setattr(training, "train_with_info", counting)
    return calls


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_same_seed_same_weights_on_cpu(base_spec, toy):
    a = train(base_spec, device="cpu", progress=False, dataset=toy)
    b = train(base_spec, device="cpu", progress=False, dataset=toy)
    c = train(base_spec.replace(seed=1), device="cpu", progress=False, dataset=toy)
    assert _same(a, b)
    assert not _same(a, c)
    assert all(v.device.type == "cpu" for v in a.values())


def test_a_code_change_retrains_with_the_same_draws(tmp_path, base_spec, monkeypatch, count_trainings):
    """A changed training code digest gives a new key (trained again) and the same weights:
    training draws from the spec's seed (experiment seed and member), never from a digest."""
    import values_seg.storage.provenance

    store = Checkpoints(tmp_path)
    first = base_spec.replace()  # a fresh spec: its key is not memoised yet
    ensure_trained([first], store, device="cpu", progress=False)
    digest = values_seg.storage.provenance.code_digest
    monkeypatch.setattr(values_seg.storage.provenance, "code_digest", lambda *a, **k: "edited-" + digest(*a, **k))
    edited = base_spec.replace()
    ensure_trained([edited], store, device="cpu", progress=False)
    assert edited.key() != first.key() and len(count_trainings) == 2
    assert _same(store.load(first)["state_dict"], store.load(edited)["state_dict"])


def test_training_changes_weights_and_progress_bar_runs(base_spec, toy, capsys):
    from values_seg.engine.networks import arch_info, build_network
    from values_seg.engine.training_setup import seed_everything

    seed_everything(base_spec.seed)
    init = build_network(base_spec, arch_info(toy)).state_dict()
    trained = train(base_spec.replace(recipe=base_spec.recipe.replace(steps_per_epoch=1)), device="cpu", progress=True, dataset=toy)
    assert not _same(init, trained)
    assert "loss" in capsys.readouterr().err


def test_rerun_loads_from_store_and_trains_nothing(tmp_path, base_spec, count_trainings):
    store = Checkpoints(tmp_path)
    paths = ensure_trained([base_spec, base_spec], store, device="cpu", progress=False)
    assert count_trainings == [base_spec.key()]
    assert paths == {base_spec.key(): store.path(base_spec)} and store.has(base_spec)
    assert ensure_trained([base_spec], Checkpoints(tmp_path), device="cpu", progress=False) == paths
    assert count_trainings == [base_spec.key()]
    net = load_network(base_spec, store, "cpu")
    assert not net.training
    meta = store.meta(base_spec)
    assert meta["spec_key"] == base_spec.key() and meta["arch"]["num_classes"] == 2 and meta["steps"] == 2


@pytest.mark.parametrize("damage", ["truncate", "flip_byte", "drop_sidecar", "garbage_sidecar"])
def test_corrupt_checkpoint_is_reported_and_retrained(tmp_path, base_spec, count_trainings, damage):
    store = Checkpoints(tmp_path)
    ensure_trained([base_spec], store, device="cpu", progress=False)
    path = store.path(base_spec)
    good = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "flip_byte":
        path.write_bytes(good[:100] + bytes([good[100] ^ 0xFF]) + good[101:])
    elif damage == "drop_sidecar":
        path.with_name(path.name + ".json").unlink()
    else:
        path.with_name(path.name + ".json").write_text("{not json")
    fresh = Checkpoints(tmp_path)  # no in-process memo of earlier checks
    with pytest.warns(CorruptFileWarning, match="corrupt checkpoint"):
        assert not fresh.has(base_spec)
    assert path.with_name(path.name + ".corrupt").exists() or damage in ("drop_sidecar", "garbage_sidecar")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorruptFileWarning)
        ensure_trained([base_spec], fresh, device="cpu", progress=False)
    assert count_trainings == [base_spec.key()] * 2
    assert fresh.has(base_spec) and path.read_bytes() == good  # deterministic retraining


def test_weights_made_non_finite_by_the_last_update_are_never_saved(tmp_path, base_spec):
    """One RMSprop step at lr 1e38: the loss was finite, the weights overflow."""
    spec = base_spec.replace(recipe=base_spec.recipe.replace(optimizer="rmsprop", lr=1e38, steps_per_epoch=1))
    store = Checkpoints(tmp_path)
    with pytest.raises(FloatingPointError, match=rf"spec {re.escape(spec.describe())}: weights became non-finite "
                                                 r"after step 1, first in 'net\.encoder\..*' \(\d+ of \d+ values\)"):
        ensure_trained([spec], store, device="cpu", progress=False)
    assert not store.has(spec) and not list(tmp_path.iterdir())


def _forged(state: dict, change: str) -> dict:
    """``state`` with one thing of another network."""
    first = next(iter(state))
    if change == "shape":
        return {**state, first: torch.zeros(state[first].shape[0] * 2, *state[first].shape[1:])}
    if change == "names":
        return {("other." + k if k == first else k): v for k, v in state.items()}
    return {**state, first: torch.full_like(state[first], float("nan"))}  # "nan"


@pytest.mark.parametrize("change, problem", [
    ("shape", r"'net\.[^']+' has shape \(8, .*\), the network's \(4, "),
    ("names", r"1 of the network's tensors missing \(first 'net\..*'\), 1 unknown to it \(first 'other\.net\..*'\)"),
    ("nan", r"a weight is not finite, first in 'net\..*' \(\d+ of \d+ values\)"),
    ("arch", r"it records the architecture .*'in_channels': 3.*, spec .*'s data .*'in_channels': 1"),
], ids=["shape", "names", "nan", "arch"])
def test_a_checkpoint_that_does_not_fit_its_spec_is_set_aside_before_loading(tmp_path, base_spec, toy, change,
                                                                            problem, count_trainings):
    """Its key, its sidecar and its recorded spec say it is this spec's: what it holds does not
    fit the network the spec builds. One warning names the file and the difference; it is set
    aside and the spec trained again."""
    from values_seg.engine.networks import arch_info

    store = Checkpoints(tmp_path)
    ensure_trained([base_spec], store, device="cpu", progress=False)
    genuine, arch = store.load(base_spec)["state_dict"], arch_info(toy)
    if change == "arch":
        store.save(base_spec, genuine, {**arch, "in_channels": 3})
    else:
        store.save(base_spec, _forged(genuine, change), arch)
    path = store.path(base_spec)
    with pytest.warns(CorruptFileWarning, match=rf"corrupt checkpoint {re.escape(str(path))}: ") as caught, \
            pytest.raises(CorruptFileError, match=problem):
        load_network(base_spec, store, "cpu", arch)
    assert len(caught) == 1 and re.search(problem, str(caught[0].message))
    assert path.with_name(path.name + ".corrupt").exists() and not store.has(base_spec)
    ensure_trained([base_spec], store, device="cpu", progress=False)
    assert count_trainings == [base_spec.key()] * 2 and _same(store.load(base_spec)["state_dict"], genuine)
    load_network(base_spec, store, "cpu", arch)


def test_damage_after_check_is_caught_on_load(tmp_path, base_spec):
    store = Checkpoints(tmp_path)
    ensure_trained([base_spec], store, device="cpu", progress=False)
    path = store.path(base_spec)
    data = path.read_bytes()
    path.write_bytes(data[:-10] + b"0123456789")
    with pytest.warns(CorruptFileWarning), pytest.raises(CorruptFileError):
        store.load(base_spec)
    assert not path.exists()


def test_checkpoint_loads_with_weights_only(tmp_path, base_spec):
    store = Checkpoints(tmp_path)
    ensure_trained([base_spec], store, device="cpu", progress=False)
    payload = torch.load(store.path(base_spec), weights_only=True)
    assert payload["spec_key"] == base_spec.key() and "state_dict" in payload


def test_extra_cases_join_training(base_spec, toy):
    from values_seg.engine.training_setup import training_case_ids

    extra = base_spec.replace(extra_cases=(("test", toy.case_ids("test")[0]),))
    assert training_case_ids(extra, toy) == toy.case_ids("train") + [toy.case_ids("test")[0]]
    with pytest.raises(ValueError, match="unknown split"):
        training_case_ids(base_spec.replace(extra_cases=(("nope", "x"),)), toy)


def test_hrnet_recipe_trains(base_spec, toy):
    sgd = base_spec.replace(recipe=Recipe.preset("hrnet", epochs=1, steps_per_epoch=1, batch_size=2))
    state = train(sgd, device="cpu", progress=False, dataset=toy)  # SGD, poly lr, rotation, scaling
    assert all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point())


def test_random_rater_per_sample():
    rng = np.random.default_rng(0)
    recipe = Recipe()
    plans = [augment.draw_plan(rng, 0, recipe, 2) for _ in range(300)]
    raters = [min(int(p.rater_u * 3), 2) for p in plans]
    assert set(raters) == {0, 1, 2}
    flips = [p.flips for p in plans]
    assert {(), (0,), (1,), (0, 1)} == set(flips)
    assert 0.35 < np.mean([p.noise for p in plans]) < 0.65


def test_augment_flips_image_and_label_together():
    x = torch.arange(16.0).reshape(1, 1, 4, 4)
    y = torch.arange(16).reshape(1, 4, 4)
    plan = augment.SamplePlan(0, 0.0, (1,), False, 0.0, 1.0)
    xa, ya = augment.apply(x, y, [plan], Recipe(), torch.Generator())
    assert torch.equal(xa[0, 0], x[0, 0].flip(1)) and torch.equal(ya[0], y[0].flip(1))


def test_losses():
    target = torch.tensor([[[0, 1], [1, 0]]])
    perfect = (torch.nn.functional.one_hot(target, 2).movedim(-1, 1).float() * 40 - 20)
    assert losses.dice_ce_loss(perfect, target).item() < 1e-6
    assert losses.dice_ce_loss(-perfect, target).item() > 2
    ignore = torch.tensor([[[0, 255], [1, 255]]])
    logits = torch.randn(1, 2, 2, 2)
    assert math.isfinite(losses.dice_ce_loss(logits, ignore, ignore_index=255).item())
    assert losses.recipe_loss(Recipe(loss="ce")) is losses.ce_loss
    assert losses.recipe_loss(Recipe()) is losses.dice_ce_loss


def test_resolve_device():
    assert resolve("cpu") == torch.device("cpu")
    assert resolve(None).type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve("auto") == resolve(None)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve("cuda")
    with pytest.raises(ValueError, match="unknown device"):
        resolve("tpu9")


def test_non_finite_loss_stops_training(base_spec, toy, monkeypatch):
    monkeypatch.setitem(losses.LOSSES, "dice_ce", lambda logits, y, ignore=None: logits.sum() * float("nan"))
    with pytest.raises(FloatingPointError, match="loss became nan"):
        train(base_spec, device="cpu", progress=False, dataset=toy)


@pytest.mark.slow
def test_training_learns_the_toy_task(toy_ref):
    """A real (short) training: the mean Dice on validation cases rises well above chance."""
    from values_seg import metrics
    from values_seg.engine import TrainingSpec
    from values_seg.engine.networks import arch_info, build_network

    ds = toy_ref.create()
    spec = TrainingSpec.create(toy_ref, "unet", recipe=Recipe(epochs=20, steps_per_epoch=5, batch_size=4), seed=0)
    state = train(spec, device="cpu", progress=False, dataset=ds)
    net = build_network(spec, arch_info(ds))
    net.load_state_dict(state)
    net.eval()
    dice = []
    with torch.no_grad():
        for cid in ds.case_ids("val") + ds.case_ids("train"):
            case = ds.load(cid)
            pred = net(torch.from_numpy(case.image)[None]).argmax(1)[0].numpy()
            dice.append(metrics.dice(pred, case.raters[-1]))
    assert np.mean(dice) > 0.6, dice


def test_3d_trains_and_tta_predicts_16_samples(tmp_path):
    from values_seg import registry
    from values_seg.engine import PredictionCache, TrainingSpec, dataset_ref, predict_split

    ref = dataset_ref("toy", {"scenario": "1", "dims": 3, "size": 24, "train_cases": 2, "val_cases": 1})
    spec = TrainingSpec.create(ref, "unet", backbone_params={"base_width": 2}, recipe=Recipe(epochs=1, steps_per_epoch=1, batch_size=2))
    model = registry.create("prediction_model", "test_time_augmentation")
    (handle,) = predict_split(model, model.training_specs(spec), Checkpoints(tmp_path / "c"), ref, "val",
                              PredictionCache(tmp_path / "p"), device="cpu", progress=False)
    assert handle.load().shape == (16, 2, 24, 24, 24)
