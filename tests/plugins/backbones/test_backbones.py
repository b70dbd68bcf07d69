"""C0 backbones: registered factories building working 2D/3D networks."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn
from torch.nn.modules.dropout import _DropoutNd

from values_seg import registry


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    """Every test here on one torch thread (see tests/conftest.py)."""


def _build(name, dims, **kw):
    return registry.create("backbone", name, dims=dims, in_channels=1, num_classes=3, **kw)


def test_registered_with_typed_params():
    assert {"unet", "hrnet"} <= set(registry.names("backbone"))
    unet = {p.name: p for p in registry.get("backbone", "unet").params}
    assert unet["base_width"].default == 8 and "dropout" not in unet  # the engine supplies dims, ..., dropout
    hrnet = {p.name: p for p in registry.get("backbone", "hrnet").params}
    assert hrnet["pretrained_path"].default is None and "variant" in hrnet
    assert registry.get("backbone", "unet").description.startswith("U-Net")


@pytest.mark.parametrize("dims, shape", [(2, (30, 37)), (2, (16, 16)), (3, (12, 16, 20))])
def test_unet_any_size(dims, shape):
    net = _build("unet", dims, base_width=4)
    x = torch.randn(2, 1, *shape)
    net.train()
    assert net(x).shape == (2, 3, *shape)


def test_unet_stages_and_widths():
    net = _build("unet", 3, base_width=8).net
    assert len(net.encoder.stages) == 5 and len(net.decoder.stages) == 4  # 4 down + bottleneck, 4 up
    convs = [m for m in net.encoder.modules() if isinstance(m, nn.Conv3d)]
    assert sorted({c.out_channels for c in convs}) == [8, 16, 32, 64, 128]
    assert any(isinstance(m, nn.InstanceNorm3d) for m in net.modules())
    assert sorted({c.out_channels for c in _build("unet", 2, base_width=16).modules() if isinstance(c, nn.Conv2d)})[-1] == 256


def test_unet_dropout_after_every_conv_block():
    plain = _build("unet", 2, base_width=4)
    assert not any(isinstance(m, _DropoutNd) for m in plain.modules())
    net = _build("unet", 2, base_width=4, dropout=0.5)
    n_blocks = sum(type(m).__name__ == "ConvDropoutNormReLU" for m in net.modules())
    drops = [m for m in net.modules() if isinstance(m, _DropoutNd)]
    assert len(drops) == n_blocks == 18 and all(d.p == 0.5 for d in drops)
    for block in (m for m in net.modules() if type(m).__name__ == "ConvDropoutNormReLU"):
        assert isinstance(block.all_modules[-1], nn.Dropout)  # conv -> norm -> nonlin -> dropout
    chan = _build("unet", 3, base_width=4, dropout=0.2, dropout_mode="channel")
    assert any(isinstance(m, nn.Dropout3d) for m in chan.modules())
    # same weights layout with and without dropout (dropout has no parameters)
    assert plain.state_dict().keys() == net.state_dict().keys()


def test_hrnet_forward_and_branch_dropout(tmp_path):
    net = _build("hrnet", 2, variant="hrnet_w18_small", dropout=0.5).eval()
    drops = [m for m in net.modules() if isinstance(m, _DropoutNd)]
    assert len(drops) == 4  # one per branch
    with torch.no_grad():
        assert net(torch.randn(1, 1, 64, 70)).shape == (1, 3, 64, 70)
    with pytest.raises(ValueError, match="2D only"):
        _build("hrnet", 3, variant="hrnet_w18_small")


def test_hrnet_pretrained_from_local_file(tmp_path):
    import timm

    source = timm.create_model("hrnet_w18_small", pretrained=False, in_chans=3)  # an "ImageNet" checkpoint
    path = tmp_path / "hrnet.pth"
    torch.save({"state_dict": source.state_dict()}, path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        net = _build("hrnet", 2, variant="hrnet_w18_small", pretrained_path=str(path))
    assert not [w for w in caught if "not found in" in str(w.message)]  # every tensor matched
    body = net.net.body.state_dict()
    ref = source.state_dict()
    assert torch.equal(body["layer1.0.conv1.weight"], ref["layer1.0.conv1.weight"])
    assert body["conv1.weight"].shape[1] == 1  # first conv adapted to one input channel
    bad = tmp_path / "bad.pth"
    torch.save({"x": torch.zeros(1)}, bad)
    with pytest.raises(ValueError, match="no weights"):
        _build("hrnet", 2, variant="hrnet_w18_small", pretrained_path=str(bad))

