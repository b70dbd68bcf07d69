"""Networks of a training spec: the registered backbone, wrapped by the spec's head if it has one.

Without a head the network is the backbone itself (``num_classes`` logit channels). A prediction
model's :class:`~values_seg.engine.head.Head` says how many channels the backbone emits and
builds the network around it.
"""

from __future__ import annotations

from torch import nn
from torch.nn.modules.dropout import _DropoutNd

from values_seg.engine.specs import TrainingSpec


def arch_info(dataset) -> dict:
    """What a network needs to know of its dataset (stored with each checkpoint)."""
    return {
        "dims": int(dataset.dims),
        "in_channels": int(dataset.in_channels),
        "num_classes": int(dataset.num_classes),
        "ignore_index": None if dataset.ignore_index is None else int(dataset.ignore_index),
    }


def build_backbone(spec: TrainingSpec, arch: dict, out_channels: int) -> nn.Module:
    from values_seg import registry

    factory = registry.get("backbone", spec.backbone.name).obj
    net = factory(arch["dims"], arch["in_channels"], out_channels, dropout=spec.dropout, **spec.backbone.kwargs)
    if not isinstance(net, nn.Module):
        raise TypeError(f"backbone {spec.backbone.name!r} returned {type(net).__name__}, not a torch.nn.Module")
    if spec.dropout > 0 and not any(isinstance(m, _DropoutNd) for m in net.modules()):
        raise ValueError(f"backbone {spec.backbone.name!r} built no dropout layers for dropout={spec.dropout}")
    return net


def build_network(spec: TrainingSpec, arch: dict) -> nn.Module:
    """The untrained network of ``spec`` (initialised from the global torch RNG)."""
    c = arch["num_classes"]
    if spec.head is None:
        return build_backbone(spec, arch, c)
    return spec.head.build(build_backbone(spec, arch, spec.head.out_channels(c)), arch)


def enable_dropout(net: nn.Module) -> int:
    """Put every dropout layer in training mode (others stay as they are); returns their number."""
    n = 0
    for m in net.modules():
        if isinstance(m, _DropoutNd):
            m.train()
            n += 1
    return n
