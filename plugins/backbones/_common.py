"""Shared pieces of the built-in backbones."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn


class PadToMultiple(nn.Module):
    """Runs ``net`` on the input zero-padded (centred) to a multiple of ``multiple`` per spatial
    axis and crops the output back, so any image size works with strided encoders. If the
    coarsest level would be a single pixel (which instance norm cannot normalise), the last
    axis is padded to twice the multiple."""

    def __init__(self, net: nn.Module, multiple: int):
        super().__init__()
        self.net = net
        self.multiple = int(multiple)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        spatial = x.shape[2:]
        pads = [(-s) % self.multiple for s in spatial]
        if all(s + p == self.multiple for s, p in zip(spatial, pads)):
            pads[-1] += self.multiple
        if not any(pads):
            return self.net(x)
        pad_arg = []
        for p in reversed(pads):  # F.pad takes the last axis first
            pad_arg += [p // 2, p - p // 2]
        y = self.net(F.pad(x, pad_arg))
        index = [slice(None), slice(None)] + [slice(p // 2, p // 2 + s) for p, s in zip(pads, spatial)]
        return y[tuple(index)]


def dropout_layer(dims: int, p: float, mode: Literal["element", "channel"]) -> nn.Module:
    if mode == "element":
        return nn.Dropout(p)
    if mode == "channel":
        return {1: nn.Dropout1d, 2: nn.Dropout2d, 3: nn.Dropout3d}[dims](p)
    raise ValueError(f"dropout_mode must be 'element' or 'channel', got {mode!r}")
