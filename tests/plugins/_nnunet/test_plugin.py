"""The ``nnunet`` C1 plugin through the registry and the engine's per-case prediction."""

from __future__ import annotations

import json
import pickle

import pytest
import torch

from values_seg import registry
from values_seg_plugins._nnunet import NnUNetModelError

from .conftest import TinyDataset


def test_registered_with_family_and_typed_params():
    component = registry.get("prediction_model", "nnunet")
    assert component.obj.family == "bayesian"
    assert [p.name for p in component.params] == [
        "model_folder", "folds", "checkpoint", "mirroring", "tile_step_size", "spacing", "trust_checkpoint"]


def test_create_from_strings_and_predict_case(model_2d):
    from values_seg.engine.inference import predict_case, prediction_key

    model = registry.create("prediction_model", "nnunet", model_folder=str(model_2d), folds="0,1", mirroring="true")
    assert model.folds == [0, 1] and model.mirroring is True
    assert model.training_specs(None) == []
    params = model.params()
    json.dumps(params)  # cache keys need JSON
    assert params["folds"] == [0, 1] and params["model_folder"] == str(model_2d.resolve())
    assert model.num_samples_predicted == 8

    ds = TinyDataset(dims=2, size=32, per_split=1)
    case = ds.load("test_00")
    samples = predict_case(model, [], case, torch.device("cpu"), prediction_key(model, []), ds.num_classes)
    assert samples.shape == (8, 2, 32, 32)
    direct = model.predict([], torch.from_numpy(case.image))
    torch.testing.assert_close(samples, direct)


def test_default_folds_and_pickling(model_2d):
    model = registry.create("prediction_model", "nnunet", model_folder=str(model_2d))
    assert model.folds == "auto" and model.num_samples == 2
    clone = pickle.loads(pickle.dumps(model))
    assert clone._model is None and clone.params() == model.params()
    assert clone.num_samples == 2
    assert clone.fingerprint() == model.fingerprint()


def test_fingerprint_identifies_the_weights(model_2d, model_2d_same):
    a = registry.create("prediction_model", "nnunet", model_folder=str(model_2d), folds=[0, 1])
    b = registry.create("prediction_model", "nnunet", model_folder=str(model_2d_same), folds=[0, 1])
    c = registry.create("prediction_model", "nnunet", model_folder=str(model_2d), folds=[0])
    assert len({a.fingerprint(), b.fingerprint(), c.fingerprint()}) == 3


def test_errors_at_creation_and_per_case(model_2d, tmp_path):
    with pytest.raises(NnUNetModelError, match="does not exist"):
        registry.create("prediction_model", "nnunet", model_folder=str(tmp_path / "missing"))
    with pytest.raises(NnUNetModelError, match=r"fold\(s\) 4.*present: fold_0.*fold_1"):
        registry.create("prediction_model", "nnunet", model_folder=str(model_2d), folds=[0, 4])
    model = registry.create("prediction_model", "nnunet", model_folder=str(model_2d), folds=0)
    case = TinyDataset(dims=2, size=32, in_channels=3, per_split=1).load("val_00")
    with pytest.raises(NnUNetModelError, match="case 'val_00'.*3 input channel.*expects 1"):
        model.predict_case([], case, torch.device("cpu"))


def test_a_case_with_geometry_is_predicted_at_its_own_spacing(model_2d):
    """nnU-Net resamples a case to the plans' spacing (1.0) from the spacing its meta states."""
    model = registry.create("prediction_model", "nnunet", model_folder=str(model_2d), folds=0)
    case = TinyDataset(dims=2, size=32, per_split=1).load("test_00")
    case.meta.update({"spacing": [0.5, 2.0], "origin": [0.0, 0.0], "direction": [1.0, 0.0, 0.0, 1.0]})  # (x, y)
    samples = model.predict_case([], case, torch.device("cpu"))
    assert samples.shape == (1, 2, 32, 32)
    at_own = model.model.predict(case.image, spacing=[2.0, 0.5])  # NumPy (y, x) order
    torch.testing.assert_close(samples, at_own)
    assert not torch.allclose(samples, model.model.predict(case.image))  # not the unit spacing
    fixed = registry.create("prediction_model", "nnunet", model_folder=str(model_2d), folds=0, spacing=[1.0, 1.0])
    torch.testing.assert_close(fixed.predict_case([], case, torch.device("cpu")), model.model.predict(case.image))


def test_the_cache_key_follows_the_weights(model_2d, model_2d_same, tmp_path):
    """Retrained weights in the same folder get a new prediction key (no stale cached predictions)."""
    import shutil

    from values_seg.engine.inference import prediction_key

    folder = tmp_path / model_2d.name
    shutil.copytree(model_2d, folder)
    before = registry.create("prediction_model", "nnunet", model_folder=str(folder), folds=[0, 1])
    assert before.cache_identity()["weights"] == before.fingerprint()
    shutil.copyfile(model_2d_same / "fold_1" / "checkpoint_final.pth", folder / "fold_1" / "checkpoint_final.pth")
    after = registry.create("prediction_model", "nnunet", model_folder=str(folder), folds=[0, 1])
    assert after.params() == before.params() and prediction_key(after, []) != prediction_key(before, [])
