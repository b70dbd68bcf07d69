"""C0 backbone ``hrnet``: HRNet (timm) with a light segmentation head, 2D."""

from __future__ import annotations

import logging
import warnings
from typing import Annotated, Literal

import torch
import torch.nn.functional as F
from torch import nn

from values_seg import component, hookimpl
from values_seg.params import InputPath
from values_seg_plugins.backbones._common import PadToMultiple, dropout_layer

log = logging.getLogger(__name__)


class HRNetSeg(nn.Module):
    """HRNet branches -> (dropout per branch) -> upsample to the finest branch and concatenate
    -> 1x1 conv, BN, ReLU -> 1x1 conv to the classes -> bilinear upsampling to the input size
    (HRNetV2's segmentation head)."""

    def __init__(self, variant: str, in_channels: int, num_classes: int, dropout: float, dropout_mode: str):
        super().__init__()
        import timm

        self.body = timm.create_model(
            variant, pretrained=False, features_only=True, feature_location="", out_indices=(1, 2, 3, 4), in_chans=in_channels
        )
        chans = list(self.body.feature_info.channels())
        total = sum(chans)
        self.branch_dropout = nn.ModuleList(
            [dropout_layer(2, dropout, dropout_mode) if dropout > 0 else nn.Identity() for _ in chans]
        )
        self.head = nn.Sequential(
            nn.Conv2d(total, total, 1, bias=False),
            nn.BatchNorm2d(total),
            nn.ReLU(inplace=True),
            nn.Conv2d(total, num_classes, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = [drop(f) for drop, f in zip(self.branch_dropout, self.body(x))]
        size = feats[0].shape[2:]
        up = [feats[0]] + [F.interpolate(f, size=size, mode="bilinear", align_corners=False) for f in feats[1:]]
        y = self.head(torch.cat(up, dim=1))
        return F.interpolate(y, size=x.shape[2:], mode="bilinear", align_corners=False)


def load_pretrained(body: nn.Module, path: str) -> None:
    """Load a local (timm/ImageNet) HRNet state dict into the feature body, by matching names.

    Accepts a bare state dict or one under ``state_dict``/``model``; strips ``module.``
    prefixes; adapts the first convolution to other input channel counts (timm's rule); ignores
    the classifier. Raises if nothing matches."""
    from timm.models import adapt_input_conv

    raw = torch.load(path, map_location="cpu", weights_only=True)
    for k in ("state_dict", "model"):
        if isinstance(raw, dict) and k in raw and isinstance(raw[k], dict):
            raw = raw[k]
    own = body.state_dict()
    matched = {}
    for k, v in raw.items():
        k = k.removeprefix("module.").removeprefix("backbone.")
        if k not in own or not isinstance(v, torch.Tensor):
            continue
        if k == "conv1.weight" and v.shape[1] != own[k].shape[1]:
            v = adapt_input_conv(own[k].shape[1], v)
        if v.shape == own[k].shape:
            matched[k] = v
    if not matched:
        raise ValueError(f"hrnet: no weights in {path} match the HRNet body (is it an HRNet checkpoint of this variant?)")
    missing = [k for k in own if k not in matched]
    if missing:
        msg = f"hrnet: {len(missing)} of {len(own)} tensors not found in {path} (kept random), e.g. {missing[:3]}"
        log.warning(msg)
        warnings.warn(msg, stacklevel=2)
    body.load_state_dict(matched, strict=False)


@component(name="hrnet")
def hrnet(
    dims: int,
    in_channels: int,
    num_classes: int,
    dropout: float = 0.0,
    variant: str = "hrnet_w18_small",
    pretrained_path: Annotated[str | None, InputPath()] = None,
    dropout_mode: Literal["element", "channel"] = "element",
) -> nn.Module:
    """HRNet (timm) with a segmentation head, 2D; random init or weights from a local file.

    ``dropout > 0`` adds dropout at the end of each branch (Nash et al. 2022), for test-time
    dropout. Inputs are zero-padded to a multiple of 32 and the output cropped back. Weights are
    never downloaded: ImageNet weights come only from the local file ``pretrained_path`` (its
    bytes, not its path, key the trainings).
    """
    if dims != 2:
        raise ValueError(f"hrnet is 2D only, got dims={dims}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"hrnet: dropout must lie in [0, 1), got {dropout}")
    net = HRNetSeg(variant, in_channels, num_classes, dropout, dropout_mode)
    if pretrained_path:
        load_pretrained(net.body, pretrained_path)
    return PadToMultiple(net, 32)


@hookimpl
def values_seg_backbones():
    return [hrnet]
