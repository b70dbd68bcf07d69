"""NnUNetModel: per-fold / per-mirror softmax samples from an nnU-Net v2 model folder."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from values_seg_plugins._nnunet import NnUNetModel, NnUNetModelError
from values_seg_plugins._nnunet.model import parse_folds
from values_seg_plugins._nnunet.testing import make_model_folder
from values_seg.numerics.validation import check_probabilities

MIRRORS_2D = [(), (0,), (1,), (0, 1)]


def image_2d(shape=(32, 32), channels=1, seed=0):
    rng = np.random.default_rng(seed)
    img = rng.normal(2.0, 3.0, size=(channels, *shape)).astype(np.float32)
    img[:, shape[0] // 4: shape[0] // 2, shape[1] // 3:] += 5.0  # asymmetric, so flips matter
    return img


def reference_samples(folder, folds, image, mirrors, checkpoint="checkpoint_final.pth"):
    """Per-fold, per-mirror softmax computed independently: z-score, network, flips, softmax."""
    from nnunetv2.utilities.get_network_from_plans import get_network_from_plans

    plans = json.loads((folder / "plans.json").read_text())
    dataset_json = json.loads((folder / "dataset.json").read_text())
    arch = next(iter(plans["configurations"].values()))["architecture"]
    net = get_network_from_plans(arch["network_class_name"], arch["arch_kwargs"], arch["_kw_requires_import"],
                                 len(dataset_json["channel_names"]), len(dataset_json["labels"]),
                                 deep_supervision=False)
    x = torch.from_numpy(image).double()
    dims = tuple(range(1, x.ndim))
    x = ((x - x.mean(dim=dims, keepdim=True)) / x.std(dim=dims, unbiased=False, keepdim=True)).float()[None]
    out = []
    for f in folds:
        state = torch.load(folder / f"fold_{f}" / checkpoint, map_location="cpu", weights_only=False)
        net.load_state_dict(state["network_weights"])
        net.eval()
        with torch.no_grad():
            for axes in mirrors:
                flip = [a + 2 for a in axes]
                logits = net(torch.flip(x, flip)) if axes else net(x)
                logits = torch.flip(logits, flip) if axes else logits
                out.append(torch.softmax(logits[0].double(), dim=0))
    return torch.stack(out)


@pytest.mark.parametrize("mirroring, expected", [(False, 2), (True, 8)])
def test_shapes_and_valid_probabilities(model_2d, mirroring, expected):
    model = NnUNetModel(model_2d, folds=(0, 1), mirroring=mirroring)
    assert model.n_samples == expected == len(model.sample_labels())
    assert (model.in_channels, model.num_classes) == (1, 2)
    samples = model.predict(image_2d())
    assert samples.shape == (expected, 2, 32, 32) and samples.dtype == torch.float32
    check_probabilities(samples)
    assert torch.allclose(samples.sum(1), torch.ones(1), atol=1e-5)


def test_samples_equal_independent_per_fold_per_mirror_softmax(model_2d):
    image = image_2d()
    model = NnUNetModel(model_2d, folds=(0, 1), mirroring=True)
    samples = model.predict(image).double()
    reference = reference_samples(model_2d, (0, 1), image, MIRRORS_2D)
    assert torch.allclose(samples, reference, atol=2e-5), float((samples - reference).abs().max())
    assert torch.allclose(samples.mean(0), reference.mean(0), atol=1e-5)


def test_folds_with_different_weights_differ(model_2d):
    samples = NnUNetModel(model_2d, folds=(0, 1)).predict(image_2d())
    assert float((samples[0] - samples[1]).abs().max()) > 1e-2


def test_same_weights_give_identical_fold_samples(model_2d_same):
    model = NnUNetModel(model_2d_same, folds=(0, 1), mirroring=True)
    samples = model.predict(image_2d())
    assert samples.shape[0] == 8
    torch.testing.assert_close(samples[:4], samples[4:], rtol=0, atol=1e-6)
    # the mirrors themselves do differ: the network is not flip-invariant
    assert float((samples[0] - samples[1]).abs().max()) > 1e-3


@pytest.mark.parametrize("axes", [(0,), (1,), (0, 1)])
def test_mirroring_is_inverted(model_2d, axes):
    """The mirror-``axes`` sample of x equals the unmirrored sample of flip(x), flipped back."""
    image = image_2d(shape=(32, 32))
    model = NnUNetModel(model_2d, folds=(0,), mirroring=True)
    assert model.mirror_axes == MIRRORS_2D
    samples = model.predict(image)
    flipped = model.predict(np.flip(image, [a + 1 for a in axes]).copy())
    back = torch.flip(flipped[0], [a + 1 for a in axes])
    torch.testing.assert_close(samples[MIRRORS_2D.index(axes)], back, rtol=0, atol=1e-5)


def test_sliding_window_on_larger_image_matches_nnunet(model_2d):
    """Per-fold logits on an image larger than the patch agree with nnU-Net's own sliding window
    (which accumulates in float16, hence the tolerance); mirrored members average to its TTA."""
    image = image_2d(shape=(45, 70), seed=1)
    model = NnUNetModel(model_2d, folds=(0, 1), mirroring=True)
    logits, _ = model.member_logits(image)
    assert logits.shape == (8, 2, 1, 45, 70)
    data, _ = model.preprocess(image)
    predictor = model.predictor
    for fold in range(2):
        model._load_fold(fold)
        for use_mirroring in (False, True):
            predictor.use_mirroring = use_mirroring
            expected = predictor.predict_sliding_window_return_logits(torch.from_numpy(data)).float()
            members = logits[fold * 4: fold * 4 + 4]
            ours = members.mean(0) if use_mirroring else members[0]
            scale = float(expected.abs().max())
            assert float((ours - expected).abs().max()) < 5e-3 * max(scale, 1.0)
    samples = model.predict(image)
    assert samples.shape == (8, 2, 45, 70)
    check_probabilities(samples)


def test_image_smaller_than_patch_is_padded(model_2d):
    samples = NnUNetModel(model_2d, folds=(0,)).predict(image_2d(shape=(20, 27)))
    assert samples.shape == (1, 2, 20, 27)
    check_probabilities(samples)


def test_zero_border_is_cropped_like_nnunet(model_2d):
    """nnU-Net crops to the non-zero region; outside it the probabilities are background = 1."""
    image = np.zeros((1, 40, 40), np.float32)
    image[:, 5:35, 8:38] = image_2d(shape=(30, 30))
    samples = NnUNetModel(model_2d, folds=(0, 1)).predict(image)
    assert samples.shape == (2, 2, 40, 40)
    assert torch.all(samples[:, 0, :5] == 1) and torch.all(samples[:, 0, :, :8] == 1)
    check_probabilities(samples)


def test_2d_model_on_3d_image_predicts_slice_by_slice(model_2d):
    model = NnUNetModel(model_2d, folds=(0,), mirroring=True)
    volume = np.stack([image_2d(seed=s)[0] for s in range(3)])[None]  # [1, 3, 32, 32]
    samples = model.predict(volume)
    assert samples.shape == (4, 2, 3, 32, 32)
    check_probabilities(samples)


def test_3d_model(tmp_path):
    folder = make_model_folder(tmp_path, dims=3, folds=(0,), num_classes=3)
    model = NnUNetModel(folder, mirroring=True)
    assert model.mirror_axes == [(), (0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]
    image = np.random.default_rng(0).normal(size=(1, 16, 16, 16)).astype(np.float32)
    samples = model.predict(image)
    assert samples.shape == (8, 3, 16, 16, 16)
    check_probabilities(samples)
    reference = reference_samples(folder, (0,), image, model.mirror_axes)
    assert torch.allclose(samples.double(), reference, atol=2e-5)


def test_multichannel_and_checkpoint_best(tmp_path):
    folder = make_model_folder(tmp_path, in_channels=2, num_classes=3, folds=(0, 2), checkpoint="checkpoint_best.pth")
    model = NnUNetModel(folder, checkpoint="checkpoint_best.pth")  # auto-detects folds 0 and 2
    assert model.folds == [0, 2] and model.in_channels == 2
    image = image_2d(channels=2)
    samples = model.predict(image)
    assert samples.shape == (2, 3, 32, 32)
    reference = reference_samples(folder, (0, 2), image, [()], checkpoint="checkpoint_best.pth")
    assert torch.allclose(samples.double(), reference, atol=2e-5)


def test_fold_all(tmp_path):
    folder = make_model_folder(tmp_path, folds=("all", 0))
    assert NnUNetModel(folder, folds="all").folds == ["all"]
    assert NnUNetModel(folder).folds == [0]  # auto: numbered folds only, like nnU-Net
    assert NnUNetModel(folder, folds=[0, "all"]).n_samples == 2


@pytest.mark.parametrize(
    "given, expected",
    [("auto", None), (None, None), ("all", ["all"]), (3, [3]), ("0,1", [0, 1]), ("[0, 1, 2]", [0, 1, 2]),
     ((0, "all"), [0, "all"]), (["1", "2"], [1, 2])],
)
def test_parse_folds(given, expected):
    assert parse_folds(given) == expected


@pytest.mark.parametrize("bad", ["x", [0, 0], [], [-1], "0,a"])
def test_parse_folds_rejects(bad):
    with pytest.raises(NnUNetModelError):
        parse_folds(bad)


def test_errors_are_clear(model_2d, tmp_path):
    with pytest.raises(NnUNetModelError, match="does not exist"):
        NnUNetModel(tmp_path / "nope")
    with pytest.raises(NnUNetModelError, match="plans.json"):
        NnUNetModel(tmp_path)
    with pytest.raises(NnUNetModelError, match=r"fold\(s\) 3.*fold_0: checkpoint_final.pth"):
        NnUNetModel(model_2d, folds=(0, 3))
    with pytest.raises(NnUNetModelError, match="checkpoint_best.pth.*present: fold_0"):
        NnUNetModel(model_2d, checkpoint="checkpoint_best.pth")
    model = NnUNetModel(model_2d, folds=(0,))
    with pytest.raises(NnUNetModelError, match="case 'c7'.*2 input channel.*expects 1"):
        model.predict(image_2d(channels=2), case_id="c7")
    broken = tmp_path / "broken"
    shutil.copytree(model_2d, broken)
    for sub in broken.glob("fold_*"):
        shutil.rmtree(sub)
    with pytest.raises(NnUNetModelError, match="no fold_"):
        NnUNetModel(broken)


class _Payload:
    """What a malicious checkpoint could hold: an object whose unpickling runs code."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        import os

        return (os.makedirs, (self.marker,))


def test_untrusted_checkpoints_cannot_run_code(tmp_path):
    """Checkpoints load with weights_only=True: one holding more than weights and plain data is
    refused (its code does not run) unless the user opts in with trust_checkpoint=True."""
    import torch

    from values_seg_plugins._nnunet.model import NnUNetModel, NnUNetModelError
    from values_seg_plugins._nnunet.testing import make_model_folder

    folder = make_model_folder(tmp_path / "model", folds=(0,))
    path = folder / "fold_0" / "checkpoint_final.pth"
    checkpoint = torch.load(path, weights_only=True)
    marker = tmp_path / "code_ran"
    torch.save({**checkpoint, "logging": _Payload(marker)}, path)
    with pytest.raises(NnUNetModelError, match=r"refusing to load .*checkpoint_final.pth.*trust_checkpoint=True"):
        NnUNetModel(folder, folds=[0])
    assert not marker.exists()
    NnUNetModel(folder, folds=[0], trust_checkpoint=True)  # the user's choice: nnU-Net's full unpickling
    assert marker.exists()


def test_untrusted_plans_cannot_name_code_to_run(tmp_path):
    """plans.json names the network class and nnU-Net resolves it with pydoc.locate: a folder whose
    plans name ``torch.hub.load`` with a hubconf.py beside it ran that file. Without trust it is
    refused before nnU-Net is touched, naming the class and the setting; nothing runs."""
    from values_seg_plugins._nnunet.model import NnUNetModel, NnUNetModelError
    from values_seg_plugins._nnunet.testing import make_model_folder, plant_hub_payload

    folder = make_model_folder(tmp_path / "model", folds=(0,))
    marker = tmp_path / "code_ran"
    plant_hub_payload(folder, marker)
    with pytest.raises(NnUNetModelError, match=r"plans.json: configuration '2d' names the network class "
                                                r"'torch.hub.load'.*trust_checkpoint=True"):
        NnUNetModel(folder, folds=[0])
    assert not marker.exists()
    with pytest.raises(NnUNetModelError):  # trusted: nnU-Net builds what the plans name (the payload runs)
        NnUNetModel(folder, folds=[0], trust_checkpoint=True)
    assert marker.exists()


def test_plans_nnunet_cannot_read_are_refused_when_the_model_is_made_trusted_or_not(tmp_path):
    """The plans' structure is checked where the model is made (before any work; trusted plans
    too), not where nnU-Net first loads them, in the middle of the prediction."""
    from values_seg import registry

    folder = make_model_folder(tmp_path / "model", folds=(0,))
    plans = json.loads((folder / "plans.json").read_text())
    plans["configurations"] = list(plans["configurations"].values())
    (folder / "plans.json").write_text(json.dumps(plans))
    for trust in (False, True):
        with pytest.raises(NnUNetModelError, match=r"plans.json: 'configurations' must map configuration names"):
            registry.create("prediction_model", "nnunet", model_folder=str(folder), trust_checkpoint=trust)


@pytest.mark.parametrize("value", ["os.system", "builtins.exec", "torch.hub.load", ["torch.nn.Conv2d"]])
def test_untrusted_plans_cannot_name_callables_in_keyword_arguments(tmp_path, value):
    """The plans' imported keyword arguments (``_kw_requires_import``) may name torch.nn module
    classes only: nnU-Net locates and calls them too."""
    import json

    from values_seg_plugins._nnunet.model import NnUNetModel, NnUNetModelError

    from values_seg_plugins._nnunet.testing import make_model_folder

    folder = make_model_folder(tmp_path / "model", folds=(0,))
    plans = json.loads((folder / "plans.json").read_text())
    plans["configurations"]["2d"]["architecture"]["arch_kwargs"]["nonlin"] = value
    (folder / "plans.json").write_text(json.dumps(plans))
    with pytest.raises(NnUNetModelError, match=r"arch_kwargs.nonlin names .*not a torch.nn module class.*"
                                                r"trust_checkpoint=True"):
        NnUNetModel(folder, folds=[0])


def test_the_allow_lists_hold_what_nnunet_plans_name_and_nothing_else():
    """Derived from dynamic_network_architectures and torch.nn.modules, compared as whole names."""
    from values_seg_plugins._nnunet.architectures import shipped_network_classes, torch_building_blocks

    classes = shipped_network_classes()
    assert {"dynamic_network_architectures.architectures.unet.PlainConvUNet",
            "dynamic_network_architectures.architectures.unet.ResidualEncoderUNet"} <= classes
    assert all(name.startswith("dynamic_network_architectures.architectures.") for name in classes)
    blocks = torch_building_blocks()
    assert {"torch.nn.modules.conv.Conv3d", "torch.nn.modules.instancenorm.InstanceNorm2d", "torch.nn.LeakyReLU",
            "torch.nn.modules.dropout.Dropout3d"} <= blocks
    for name in ("torch.hub.load", "torch.hub", "dynamic_network_architectures.architectures", "os.system",
                 "torch.nn.functional.relu", "torch.nn.modules.conv"):
        assert name not in classes | blocks
