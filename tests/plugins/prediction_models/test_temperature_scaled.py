"""C1 ``temperature_scaled``: the fit against float64 references, the transform, the edge cases, the
shared trainings and keys, the engine's cached fit, and a tiny run with its raw model beside it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from scipy import optimize, special

from values_seg import metrics, registry
from values_seg.engine import PredictionCache, predict_split, prediction_key
from values_seg.engine.derived import FIT

from values_seg_plugins.prediction_models.temperature_scaled import BOUNDS, nll, scale
from values_seg_plugins.quantities.likelihood import FLOOR, nll as case_nll

from tiny import tiny_config, toy


def _ts(model="deterministic", **params):
    return registry.create("prediction_model", "temperature_scaled", model=model, **params)


class Cases:
    """What a derived model's fit iterates (:class:`values_seg.engine.derived.FitCases`), in memory."""

    def __init__(self, cases, num_classes, ignore_index=None):
        self.cases, self.num_classes, self.ignore_index = cases, num_classes, ignore_index

    def __len__(self):
        return len(self.cases)

    def __iter__(self):
        return iter(self.cases)


def _synthetic(seed=0, S=1, C=2, R=3, n_cases=3, size=12, sharpen=3.0, ignore=None):
    """Overconfident samples (logits scaled by ``sharpen``) and raters drawn from the unscaled ones."""
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(n_cases):
        logits = rng.normal(0, 1.5, (C, size, size)) + rng.normal(0, 0.3, (S, C, size, size))
        truth = special.softmax(logits.mean(0), axis=0)
        cum = truth.cumsum(0)
        raters = (rng.random((R, 1, size, size)) > cum[None, :-1]).sum(1).astype(np.int64)
        if ignore is not None:
            raters[rng.random(raters.shape) < 0.2] = ignore
        samples = torch.from_numpy(special.softmax(sharpen * logits, axis=1)).float()
        cases.append((f"case_{i}", samples, raters))
    return Cases(cases, C, ignore)


def _reference_nll(log_t, cases):
    """The pooled NLL in float64 numpy, written out pair by pair of (rater, pixel)."""
    t = np.exp(np.asarray(log_t, dtype=np.float64)).reshape(-1, 1)
    total, pairs = 0.0, 0
    for _, samples, raters in cases:
        z = np.log(np.maximum(samples.numpy().astype(np.float64), FLOOR))
        S, C = z.shape[:2]
        z = z.reshape(S, C, -1)
        mean = special.softmax(z / t, axis=1).mean(axis=0)  # [C, P]
        for labels in raters.reshape(len(raters), -1):
            keep = labels != cases.ignore_index if cases.ignore_index is not None else np.ones(labels.shape, bool)
            total -= np.log(mean[labels[keep], np.flatnonzero(keep)]).sum()
            pairs += int(keep.sum())
    return total / pairs


# -- the fit against float64 references ------------------------------------------------------------
@pytest.mark.parametrize("S, C, R, ignore", [(1, 2, 1, None), (1, 3, 3, 255), (5, 2, 3, None), (4, 3, 2, 7)])
def test_the_temperature_is_the_float64_reference_fit(S, C, R, ignore):
    cases = _synthetic(S=S, C=C, R=R, ignore=ignore)
    fitted = _ts().fit(cases)["temperature"]
    ref = optimize.minimize_scalar(lambda a: _reference_nll(a, cases), bounds=(-3, 3), method="bounded",
                                   options={"xatol": 1e-10})
    assert fitted == pytest.approx(math.exp(ref.x), rel=1e-5)
    assert fitted > 1.5  # the samples were made 3x too sharp: T undoes most of it


@pytest.mark.parametrize("S, C, ignore", [(1, 3, None), (3, 3, 255), (2, 4, None)])
def test_per_class_temperatures_are_the_float64_reference_fit(S, C, ignore):
    cases = _synthetic(seed=1, S=S, C=C, ignore=ignore, sharpen=2.0)
    fitted = _ts(per_class=True).fit(cases)["temperature"]
    ref = optimize.minimize(lambda a: _reference_nll(a, cases), np.zeros(C), method="Nelder-Mead",
                            options={"xatol": 1e-9, "fatol": 1e-14, "maxiter": 20000, "maxfev": 20000})
    assert len(fitted) == C
    assert np.allclose(fitted, np.exp(ref.x), rtol=1e-4)
    assert _reference_nll(np.log(fitted), cases) <= ref.fun + 1e-12


def test_the_nll_gradient_is_the_finite_difference():
    cases = _synthetic(seed=2, S=3, C=3)
    z = np.concatenate([s.clamp_min(FLOOR).log().reshape(3, 3, -1).numpy() for _, s, _ in cases], axis=2)
    counts = np.concatenate([np.stack([(r == c).sum(0).reshape(-1) for c in range(3)]) for _, _, r in cases], axis=1)
    a = np.array([0.2, -0.1, 0.4])
    value, grad = nll(a, z, counts, gradient=True)
    assert value == pytest.approx(_reference_nll(a, cases), rel=1e-6)
    for c in range(3):
        step = np.eye(3)[c] * 1e-6
        numeric = (nll(a + step, z, counts) - nll(a - step, z, counts)) / 2e-6
        assert grad[c] == pytest.approx(numeric, rel=1e-4, abs=1e-8)


def test_the_fit_is_deterministic_and_a_capped_fit_subsamples_each_case_alike():
    cases = _synthetic(seed=3, S=2, n_cases=4, size=40)
    model = _ts(max_pixels=2000)
    first, again = model.fit(cases), model.fit(cases)
    assert first == again and first["pixels"] == 4 * 500
    full = _ts().fit(cases)
    assert full["pixels"] == 4 * 1600 and first["temperature"] == pytest.approx(full["temperature"], rel=0.1)


# -- the transform ---------------------------------------------------------------------------------
def test_temperature_one_is_the_identity_and_t_scales_the_logits():
    logits = torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(0)) * 2  # p above the floor
    samples = logits.softmax(1)
    assert torch.allclose(scale(samples, 1.0), samples, atol=1e-6)
    assert torch.allclose(scale(samples, [1.0, 1.0, 1.0]), samples, atol=1e-6)
    assert torch.allclose(scale(samples, 2.5), (logits / 2.5).softmax(1), atol=1e-6)  # logits up to a constant
    t = [0.5, 2.0, 1.5]
    per_class = (samples.log() / torch.tensor(t).reshape(3, 1, 1)).softmax(1)
    assert torch.allclose(scale(samples, t), per_class, atol=1e-6)
    zeros = torch.zeros(1, 2, 4, 4)
    zeros[:, 0] = 1.0  # a float16 zero: floored, never NaN
    assert torch.isfinite(scale(zeros, 3.0)).all() and torch.allclose(scale(zeros, 1.0), zeros, atol=1e-6)


# -- edge cases --------------------------------------------------------------------------------------
def test_every_label_ignored_is_a_clear_error():
    cases = _synthetic(ignore=255)
    for _, _, raters in cases:
        raters[:] = 255
    with pytest.raises(ValueError, match="no labelled validation pixel"):
        _ts().fit(cases)


def test_a_constant_map_fits_the_label_frequency_and_a_uniform_one_keeps_t_1():
    samples = torch.tensor([0.9, 0.1]).reshape(1, 2, 1, 1).expand(1, 2, 10, 10).clone()
    raters = np.zeros((1, 10, 10), np.int64)
    raters.reshape(-1)[:30] = 1  # 70 % class 0: the calibrated constant says 0.7
    t = _ts().fit(Cases([("c", samples, raters)], 2))["temperature"]
    assert t == pytest.approx(math.log(9) / math.log(7 / 3), rel=1e-6)
    uniform = torch.full((2, 3, 10, 10), 1 / 3)
    labels = np.random.default_rng(0).integers(0, 3, (2, 10, 10))
    assert _ts().fit(Cases([("u", uniform, labels)], 3))["temperature"] == 1.0  # no T changes these samples
    assert _ts(per_class=True).fit(Cases([("u", torch.ones(1, 1, 5, 5), np.zeros((1, 5, 5)))], 1))["temperature"] == [1.0]


def test_labels_that_determine_no_temperature_are_a_clear_error():
    samples = torch.tensor([0.8, 0.2]).reshape(1, 2, 1, 1).expand(1, 2, 6, 6).clone()
    all_right = Cases([("c", samples, np.zeros((2, 6, 6), np.int64))], 2)  # one class, predicted right
    with pytest.raises(ValueError, match=r"no minimum inside T in \[0.01, 100.0\].*do not determine"):
        _ts().fit(all_right)
    three = _synthetic(C=3)
    for _, _, raters in three:
        raters[raters == 2] = 0  # class 2 never labelled
    with pytest.raises(ValueError, match=r"class\(es\) \[2\] have no labelled validation pixel"):
        _ts(per_class=True).fit(three)
    assert BOUNDS == (1e-2, 1e2)


def test_the_case_nll_is_the_pairs_mean():
    mean = torch.tensor([[[0.7, 0.2]], [[0.3, 0.8]]], dtype=torch.float64)  # [C=2, 1, 2]
    raters = torch.tensor([[[0, 1]], [[1, 255]]])
    expected = -(math.log(0.7) + math.log(0.8) + math.log(0.3)) / 3
    assert case_nll(mean, raters, 255) == pytest.approx(expected, rel=1e-12)
    assert math.isnan(case_nll(mean, torch.full_like(raters, 255), 255))
    assert case_nll(torch.tensor([[[1.0]], [[0.0]]]), torch.tensor([[[1]]])) == pytest.approx(-math.log(FLOOR))


# -- the wrapper: trainings, family and keys ---------------------------------------------------------
def test_the_wrapper_shares_its_models_trainings_and_family(base):
    for name, params in (("deterministic", {}), ("ensemble", {"members": 3}), ("test_time_dropout", {})):
        raw = registry.create("prediction_model", name, **params)
        wrapped = _ts(name, model_params=params)
        assert [s.key() for s in wrapped.training_specs(base)] == [s.key() for s in raw.training_specs(base)]
        assert wrapped.family == raw.family and wrapped.num_samples_predicted == raw.num_samples_predicted
    with pytest.raises(TypeError, match="cached samples"):
        _ts().predict([], torch.zeros(1, 4, 4))


def test_the_fit_key_changes_with_the_wrapped_model_and_the_option(base):
    det, ens = (registry.create("prediction_model", n) for n in ("deterministic", "ensemble"))
    det_specs, ens_specs = det.training_specs(base), ens.training_specs(base)
    key = prediction_key(_ts(), det_specs)
    assert key == prediction_key(_ts(), det_specs) != prediction_key(det, det_specs)
    assert prediction_key(_ts(per_class=True), det_specs) != key
    assert prediction_key(_ts(max_pixels=5000), det_specs) != key
    assert prediction_key(_ts("ensemble"), ens_specs) != prediction_key(_ts("test_time_augmentation"), det_specs)
    assert prediction_key(_ts("test_time_augmentation"), det_specs) != key  # same trainings, another model
    # the wrapped model enters by its own key: its defaults spelt out key the same
    assert prediction_key(_ts("ensemble"), ens_specs) == prediction_key(_ts("ensemble", model_params={"members": 5}),
                                                                        ens_specs)
    three = registry.create("prediction_model", "ensemble", members=3).training_specs(base)
    assert prediction_key(_ts("ensemble", model_params={"members": 3}), three) != prediction_key(_ts("ensemble"),
                                                                                              ens_specs)


# -- the engine: fitted once, cached beside its samples ----------------------------------------------
def test_the_engine_fits_once_on_validation_and_transforms_the_cached_samples(base, store, toy_ref, tmp_path,
                                                                            count_trainings):
    det, ts = registry.create("prediction_model", "deterministic"), _ts()
    specs = ts.training_specs(base)
    cache = PredictionCache(tmp_path / "a")
    handles = predict_split(ts, specs, store, toy_ref, "test", cache, device="cpu", progress=False)
    trained = len(count_trainings)
    assert trained <= 1  # the deterministic training, shared (none if another test trained it)
    raw = predict_split(det, specs, store, toy_ref, "test", cache, device="cpu", progress=False)
    assert len(count_trainings) == trained  # nothing trained for the raw model: the same checkpoint
    record = cache.record(prediction_key(ts, specs), toy_ref.key(), FIT)
    fitted = json.loads(record.read_text())["fitted"]
    t = fitted["temperature"]
    assert fitted["pixels"] == 2 * 32 * 32 and BOUNDS[0] < t < BOUNDS[1]
    for h, r in zip(handles, raw):  # the raw model's cached samples, scaled
        assert torch.allclose(h.load(), scale(r.load(), t), atol=2e-3)  # float16 storage
    # a fresh cache fits again: the same temperature and the same bytes
    again = predict_split(ts, specs, store, toy_ref, "test", PredictionCache(tmp_path / "b"), device="cpu",
                          progress=False)
    assert json.loads(PredictionCache(tmp_path / "b").record(prediction_key(ts, specs), toy_ref.key(), FIT)
                      .read_text())["fitted"] == fitted
    assert all(a.path.read_bytes() == b.path.read_bytes() for a, b in zip(handles, again))
    val = predict_split(ts, specs, store, toy_ref, "val", cache, device="cpu", progress=False)
    assert len(val) == 2 and record.exists()


# -- a tiny run: the recalibrated model beside its raw one ----------------------------------------------
def _val_calibration(handles, dataset):
    """(NLL, top-label ACE) of the validation cases' mean predictions, over every (pixel, rater) pair."""
    nlls, correct, confidence = [], [], []
    for h in handles:
        mean, raters = h.load().mean(0), torch.from_numpy(dataset.load(h.case_id).raters)
        nlls.append(case_nll(mean, raters))
        top, label = mean.max(0)
        correct.append((raters == label).reshape(len(raters), -1).numpy())
        confidence.append(np.broadcast_to(top.reshape(1, -1).numpy(), correct[-1].shape))
    flat = lambda xs: np.concatenate([x.reshape(-1) for x in xs])  # noqa: E731
    return float(np.mean(nlls)), metrics.ace(flat(correct), flat(confidence))


def test_a_tiny_run_shows_the_recalibrated_model_beside_its_raw_one(tmp_path):
    """The calibration task scores the temperature-scaled model beside the raw one (ACE and NLL, with
    intervals). On the validation split T was fitted on, its NLL is no worse (T = 1 is feasible) and,
    on this run, nor is its top-label ACE: an observation, not a guarantee (the quick study's
    deterministic models' rises), as the task's ACE of the Platt-scaled maps need not fall either."""
    import pandas as pd

    from values_seg.config.loading import load_config
    from values_seg.config.sweep import expand
    from values_seg.engine import Checkpoints
    from values_seg.runner import run_experiment
    from values_seg.storage.cache_store import CacheStore

    config = tiny_config(name="tiny_recalibration", datasets=[toy("1", train_cases=12, val_cases=6)],
                         recipe={"epochs": 15, "lr": 3e-3},  # trained to overconfidence, as nets are
                         prediction_models=["deterministic", {"name": "temperature_scaled", "label": "deterministic_ts",
                                                              "params": {"model": "deterministic"}}],
                         tasks=["calibration", "failure_detection"], statistics={"n_resamples": 50},
                         cache_dir=str(tmp_path / "cache"))
    summary = run_experiment(load_config(base=config), tmp_path / "run", progress=False)
    assert summary.ok, summary.describe()
    results = pd.read_csv(tmp_path / "run" / "results.csv")
    calibration = results[results["task"] == "calibration"]
    for metric in ("ace", "nll"):
        rows = calibration[(calibration["metric"] == metric) & (calibration["split"] == "iid")]
        assert set(rows["prediction_model"]) == {"deterministic", "deterministic_ts"}, metric
        assert rows["ci_low"].notna().all()
    # on the validation split it was fitted on: NLL (its objective) no worse; the top-label ACE, on this run
    cfg = load_config(base=config)
    store = CacheStore(tmp_path / "cache")
    by_model = {}
    for combo in expand(cfg):
        model, dataset = combo.model.create(), combo.dataset.create()
        handles = predict_split(model, combo.specs, Checkpoints.of(store), combo.dataset, "val",
                                PredictionCache.of(store), device="cpu", progress=False)
        by_model[combo.model.label] = _val_calibration(handles, dataset)
    (nll_raw, ace_raw), (nll_ts, ace_ts) = by_model["deterministic"], by_model["deterministic_ts"]
    assert nll_ts <= nll_raw + 1e-6 and ace_ts <= ace_raw + 1e-6, by_model
    report = (tmp_path / "run" / "report.md").read_text()
    assert "| deterministic_ts |" in report and "NLL i.i.d." in report
