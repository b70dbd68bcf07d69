"""Prediction: cached float16 samples, lazy handles, validation, re-predicting what is corrupt."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from values_seg import registry
from values_seg.engine import (
    Checkpoints,
    CorruptFileError,
    CorruptFileWarning,
    PredictionCache,
    ensure_trained,
    predict_split,
    prediction_key,
    validate_samples,
)
from values_seg.components.prediction_model import PredictionModel


@pytest.fixture(scope="module")
def trained(tmp_path_factory, base_spec):
    store = Checkpoints(tmp_path_factory.mktemp("ckpt"))
    ensure_trained([base_spec], store, device="cpu", progress=False)
    return store


def _predict(model, spec, store, toy_ref, cache, split="val"):
    return predict_split(model, [spec], store, toy_ref, split, cache, device="cpu", progress=False)


def test_predict_split_caches_float16_and_loads_lazily(tmp_path, base_spec, trained, toy_ref, toy):
    model = registry.create("prediction_model", "test_time_dropout", p=0.5, num_samples=3)
    spec = model.training_specs(base_spec)[0]
    cache = PredictionCache(tmp_path)
    handles = _predict(model, spec, trained, toy_ref, cache)
    assert [h.case_id for h in handles] == toy.case_ids("val")
    for h in handles:
        assert np.load(h.path).dtype == np.float16
        s = h.load()
        assert s.dtype == torch.float32 and s.shape == (3, 2, 32, 32) and h.shape == (3, 2, 32, 32)
        assert torch.allclose(s.sum(1), torch.ones(()), atol=1e-6) and (s >= 0).all()
        assert not torch.equal(s[0], s[1])  # dropout on at inference
    # rerun: nothing predicted; seeded per case, so a fresh prediction reproduces the samples
    mtimes = [h.path.stat().st_mtime_ns for h in handles]
    again = _predict(model, spec, trained, toy_ref, cache)
    assert [h.path.stat().st_mtime_ns for h in again] == mtimes
    other = _predict(model, spec, trained, toy_ref, PredictionCache(tmp_path / "other"))
    assert all(torch.equal(a.load(), b.load()) for a, b in zip(handles, other))


def test_cache_keys(base_spec):
    det = registry.create("prediction_model", "deterministic")
    ttd = registry.create("prediction_model", "test_time_dropout")
    ttd3 = registry.create("prediction_model", "test_time_dropout", num_samples=3)
    keys = {prediction_key(det, [base_spec]), prediction_key(ttd, [base_spec]), prediction_key(ttd3, [base_spec]),
            prediction_key(det, [base_spec.replace(seed=1)])}
    assert len(keys) == 4


def test_corrupt_prediction_is_reported_and_repredicted(tmp_path, base_spec, trained, toy_ref):
    model = registry.create("prediction_model", "deterministic")
    cache = PredictionCache(tmp_path)
    handles = _predict(model, base_spec, trained, toy_ref, cache)
    good = handles[0].path.read_bytes()
    handles[0].path.write_bytes(good[: len(good) - 7])  # truncated
    with pytest.warns(CorruptFileWarning, match="corrupt prediction"):
        again = predict_split(model, [base_spec], trained, toy_ref, "val", PredictionCache(tmp_path), device="cpu", progress=False)
    assert again[0].path.read_bytes() == good
    # damaged after the check: the lazy load refuses it
    again[1].path.write_bytes(b"\x93NUMPY garbage")
    with pytest.warns(CorruptFileWarning), pytest.raises(CorruptFileError):
        again[1].load()


class _Broken(PredictionModel):
    """Returns what it is told to (for validation tests)."""

    name = "broken_for_test"
    family = "deterministic"

    def __init__(self, mode: str = "nan"):
        self.mode = mode

    def predict(self, networks, image):
        p = networks[0](image[None]).float().softmax(1)
        if self.mode == "nan":
            p[0, 0, 0, 0] = float("nan")
        elif self.mode == "sum":
            p = p * 1.01
        elif self.mode == "negative":
            p[0, 0, 0, 0], p[0, 1, 0, 0] = -0.5, 1.5
        elif self.mode == "shape":
            p = p[:, :, :-1]
        return p


@pytest.mark.parametrize("mode, match", [("nan", "NaN"), ("sum", "sum to 1"), ("negative", "negative"), ("shape", "spatial shape")])
def test_invalid_samples_raise_naming_the_case(tmp_path, base_spec, trained, toy_ref, toy, mode, match):
    first = toy.case_ids("val")[0]
    with pytest.raises(ValueError, match=f"case '{first}'.*{match}"):
        _predict(_Broken(mode), base_spec, trained, toy_ref, PredictionCache(tmp_path))
    assert not list(tmp_path.rglob("*.npy"))  # nothing invalid was cached


def test_validate_samples():
    ok = torch.full((2, 4, 3, 3), 0.25)
    validate_samples(ok, "c1", num_classes=4, spatial=(3, 3), num_samples=2)
    with pytest.raises(ValueError, match="'c1'.*classes"):
        validate_samples(ok, "c1", num_classes=3)
    with pytest.raises(ValueError, match="'c1'.*samples"):
        validate_samples(ok, "c1", num_samples=3)
    validate_samples(ok + 0.0002, "c1")  # within 1e-3
    with pytest.raises(ValueError, match="infinite"):
        validate_samples(ok.clone().index_fill_(0, torch.tensor([0]), float("inf")), "c1")


def test_predict_split_trains_what_is_missing(tmp_path, base_spec, toy_ref):
    store = Checkpoints(tmp_path / "ckpt")
    model = registry.create("prediction_model", "deterministic")
    handles = predict_split(model, [base_spec], store, toy_ref, "val", PredictionCache(tmp_path / "pred"), device="cpu", progress=False)
    assert store.has(base_spec) and len(handles) == 2


def test_dataset_instance_needs_a_key(tmp_path, base_spec, trained, toy):
    model = registry.create("prediction_model", "deterministic")
    cache = PredictionCache(tmp_path)
    h1 = predict_split(model, [base_spec], trained, toy, "val", cache, device="cpu", progress=False)  # specs' dataset
    h2 = predict_split(model, [base_spec], trained, base_spec.dataset, "val", cache, device="cpu", progress=False)
    assert [h.path for h in h1] == [h.path for h in h2]
    with pytest.raises(ValueError, match="dataset_key"):
        predict_split(model, [], trained, toy, "val", cache, device="cpu", progress=False)


@pytest.mark.parametrize("name, params", [("test_time_dropout", {"p": 0.5, "num_samples": 3}),
                                          ("test_time_augmentation", {})])
def test_a_code_change_recomputes_the_same_draws(tmp_path, monkeypatch, base_spec, trained, toy_ref, name, params):
    """Item 5: a change to the prediction code gives a new prediction key (the cache misses and the
    cases are predicted again) but the same random draws, so the same samples."""
    model = registry.create("prediction_model", name, **params)
    specs = model.training_specs(base_spec)
    ensure_trained(specs, trained, device="cpu", progress=False)
    cache = PredictionCache(tmp_path)
    before = predict_split(model, specs, trained, toy_ref, "val", cache, device="cpu", progress=False)
    import values_seg.storage.provenance

    digest = values_seg.storage.provenance.code_digest
    monkeypatch.setattr(values_seg.storage.provenance, "code_digest", lambda *a, **k: "edited-" + digest(*a, **k))
    after = predict_split(model, specs, trained, toy_ref, "val", cache, device="cpu", progress=False)
    assert all(a.path != b.path for a, b in zip(before, after))  # recomputed, not reused
    for a, b in zip(before, after):
        assert torch.equal(a.load(), b.load()), f"{name}: the draws of case {a.case_id} changed with the code"


def test_streams_follow_what_determines_them(base_spec):
    """The stream of a case depends on the model, its parameters, the trainings' seeds (experiment
    seed and member) and the data set; not on code digests or thread counts."""
    from values_seg.engine.inference import case_seed, stream_key

    ttd = registry.create("prediction_model", "test_time_dropout", num_samples=3)
    ttd4 = registry.create("prediction_model", "test_time_dropout", num_samples=4)
    same = stream_key(ttd, [base_spec], "d")
    assert stream_key(ttd, [base_spec.replace(threads=3)], "d") == same
    others = [stream_key(ttd4, [base_spec], "d"), stream_key(ttd, [base_spec.replace(seed=1)], "d"),
              stream_key(ttd, [base_spec], "other data"), stream_key(ttd, [base_spec, base_spec.replace(seed=1)], "d")]
    assert len({same, *others}) == 5
    assert case_seed(same, "a") != case_seed(same, "b")


def test_each_dtype_has_its_own_cache(tmp_path, base_spec, trained, toy_ref, caplog):
    """A float32 cache over the same folder predicts again instead of serving float16 samples."""
    model = registry.create("prediction_model", "deterministic")
    half = _predict(model, base_spec, trained, toy_ref, PredictionCache(tmp_path))
    with caplog.at_level("INFO", logger="values_seg.engine"):
        full = _predict(model, base_spec, trained, toy_ref, PredictionCache(tmp_path, dtype="float32"))
    assert "predicting 2 of 2 cases" in caplog.text
    assert all(np.load(h.path).dtype == np.float32 for h in full)
    assert all(np.load(h.path).dtype == np.float16 for h in half)  # both kept
    a, b = half[0].load(), full[0].load()
    assert not torch.equal(a, b) and torch.allclose(a, b, atol=1e-3)  # float16 rounding, nothing more


def test_the_splits_of_one_evaluation_load_each_network_once(tmp_path, monkeypatch, base_spec, trained, toy_ref):
    """Issue 34, item 2: with the evaluation's ``networks``, the test split reuses what the
    validation split loaded (each checkpoint read and hash-checked once), and predicts the same."""
    from values_seg.engine import training

    reads = []
    original = training.load_network
    monkeypatch.setattr(training, "load_network", lambda spec, *a, **k: reads.append(spec.key()) or original(spec, *a, **k))
    model = registry.create("prediction_model", "test_time_augmentation")
    networks: dict = {}
    shared = [predict_split(model, [base_spec], trained, toy_ref, split, PredictionCache(tmp_path / "a"), device="cpu",
                            progress=False, networks=networks) for split in ("val", "test")]
    assert reads == [base_spec.key()]
    alone = [predict_split(model, [base_spec], trained, toy_ref, split, PredictionCache(tmp_path / "b"), device="cpu",
                           progress=False) for split in ("val", "test")]
    assert reads == [base_spec.key()] * 3  # without it, one read per split
    for a, b in zip(shared, alone):
        for x, y in zip(a, b):
            assert torch.equal(x.load(), y.load())


def test_fixed_threads_inside_the_same_count_inspects_no_library_again(monkeypatch):
    """Issue 34, item 2: per case inside an evaluation that fixed the count, no new
    ``threadpool_limits`` (2.7 ms a call); a different count, or none around it, still sets one."""
    import threadpoolctl

    from values_seg.engine.device import fixed_threads

    calls = []
    original = threadpoolctl.threadpool_limits
    monkeypatch.setattr(threadpoolctl, "threadpool_limits", lambda **k: calls.append(k["limits"]) or original(**k))
    before = torch.get_num_threads()
    with fixed_threads(1):
        for _ in range(3):
            with fixed_threads(1):
                assert torch.get_num_threads() == 1
        with fixed_threads(2):
            assert torch.get_num_threads() == 2
            with fixed_threads(1):
                assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    assert calls == [1, 2, 1]
    with fixed_threads(1):
        pass
    assert calls == [1, 2, 1, 1]


def test_cached_samples_skip_the_value_check_only_while_unchanged(tmp_path, monkeypatch, base_spec, trained, toy_ref):
    """Issue 34, item 2: samples read from the cache (checked when predicted, hash-checked when
    read) skip ``check_probabilities``' pass over the values; changed in place, they are checked."""
    from values_seg.numerics import validation

    passes = []
    original = validation._class_sums
    monkeypatch.setattr(validation, "_class_sums", lambda t: passes.append(1) or original(t))
    model = registry.create("prediction_model", "deterministic")
    samples = _predict(model, base_spec, trained, toy_ref, PredictionCache(tmp_path))[0].load()
    passes.clear()
    assert validation.check_probabilities(samples) is samples and passes == []
    assert validation.check_probabilities(samples.clone()) is not None and passes == [1]  # another tensor: checked
    samples[0, 0] = -1.0  # changed in place: checked again, and found wrong
    with pytest.raises(ValueError, match="non-negative|sum to 1"):
        validation.check_probabilities(samples)
