"""Learning curves (values_seg.engine.curves): recorded into the sidecar by both training loops,
without changing the weights; the Dice against a float64 re-implementation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from values_seg.engine import Checkpoints, Recipe, TrainingSpec, dataset_ref, ensure_trained
from values_seg.engine import training
from values_seg.engine.curves import CurveSettings, mean_dice

RECIPE = Recipe(epochs=3, steps_per_epoch=2, batch_size=2)
DATA = dataset_ref("toy", {"scenario": "1", "dims": 2, "size": 32, "train_cases": 6, "val_cases": 3})
ON = CurveSettings(dice_every=2, dice_cases=2)
OFF = CurveSettings(dice_every=0)


def spec(seed: int, fused: bool, dropout: float = 0.0) -> TrainingSpec:
    return TrainingSpec.create(DATA, "unet", backbone_params={"base_width": 4}, recipe=RECIPE, seed=seed,
                               dropout=dropout, fused=fused)


def trained(specs, tmp_path, name, curves):
    store = Checkpoints(tmp_path / name)
    ensure_trained(specs, store, progress=False, curves=curves)
    return {s.key(): (store.load(s)["state_dict"], store.meta(s)["curve"]) for s in specs}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("fused", [False, True])
def test_curve_in_sidecar_and_weights_bit_identical_with_dice_on_and_off(tmp_path, fused):
    specs = [spec(0, fused, dropout=0.5), spec(1, fused)]
    on, off = trained(specs, tmp_path, "on", ON), trained(specs, tmp_path, "off", OFF)
    for key in on:
        assert same(on[key][0], off[key][0])  # the validation Dice draws nothing, changes nothing
        curve = on[key][1]
        assert len(curve["epoch_loss"]) == 3 and all(np.isfinite(curve["epoch_loss"]))
        assert curve["epoch_loss"] == off[key][1]["epoch_loss"]
        assert [e for e, _ in curve["val_dice"]] == [2, 3]  # every 2nd epoch and the last
        assert all(0 <= d <= 1 for _, d in curve["val_dice"])
        assert curve["val_split"] == "val" and curve["val_cases"] == 2
        assert off[key][1]["val_dice"] == [] and off[key][1]["val_cases"] == 0


def test_epoch_loss_is_the_mean_of_the_steps_losses(tmp_path, monkeypatch):
    """The one-by-one loop: the epoch means equal the mean of the per-step losses the loss function returned."""
    seen = []
    real = training.prepare

    def spying(*args, **kwargs):
        p = real(*args, **kwargs)
        inner = p.loss_fn

        def loss_fn(out, y, epoch):
            value = inner(out, y, epoch)
            seen.append((epoch, float(value.detach())))
            return value

        p.loss_fn = loss_fn
        return p

    monkeypatch.setattr(training, "prepare", spying)
    _, info = training.train_with_info(spec(0, False), progress=False, curves=OFF)
    expected = [np.mean([v for e, v in seen if e == k]) for k in range(3)]
    np.testing.assert_allclose(info["curve"]["epoch_loss"], expected, rtol=1e-12)


def _dice64(pred, raters, classes, ignore, background):
    out = []
    for r in raters:
        for c in classes:
            if c == background:
                continue
            valid = (r != ignore) if ignore is not None else np.ones_like(r, bool)
            p = ((pred == c) & valid).astype(np.float64)
            t = ((r == c) & valid).astype(np.float64)
            if p.sum() + t.sum() > 0:
                out.append(2 * (p * t).sum() / (p.sum() + t.sum()))
    return np.mean(out) if out else np.nan


def test_mean_dice_against_float64_reference():
    rng = np.random.default_rng(0)
    pred = rng.integers(0, 3, (16, 16))
    raters = rng.integers(0, 4, (2, 16, 16))
    raters[raters == 3] = 255
    assert mean_dice(pred, raters, 3, 255) == pytest.approx(_dice64(pred, raters, range(3), 255, 0))
    assert mean_dice(pred, raters, 3, 255, background=None) == pytest.approx(_dice64(pred, raters, range(3), 255, None))
    empty = np.zeros((1, 4, 4), int)
    assert np.isnan(mean_dice(np.zeros((4, 4), int), empty, 2, None))  # no foreground anywhere: nothing to score
    assert mean_dice(np.ones((4, 4), int), empty, 2, None) == 0.0

