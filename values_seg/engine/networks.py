"""Networks of a training spec: the registered backbone plus the spec's output head.

``softmax`` head: the backbone itself (``num_classes`` logit channels). ``ssn`` head
(Monteiro et al. 2020): the backbone emits ``C * (rank + 2)`` channels, i.e. three 1x1 heads on
its last features, read as the mean logits ``mu`` [B, C, *spatial], the log of the diagonal
``d`` and the low-rank factor ``P`` of a Gaussian over the flattened logit vector (length
C x pixels, channel-major). Samples ``eta = mu + P z + sqrt(d) eps``.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.distributions import LowRankMultivariateNormal
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
    if spec.head.kind == "softmax":
        return build_backbone(spec, arch, c)
    if spec.head.kind == "ssn":
        rank = spec.head.kwargs["rank"]
        return SSNNetwork(build_backbone(spec, arch, c * (rank + 2)), c, rank)
    raise ValueError(f"unknown head {spec.head.kind!r}")


class SSNNetwork(nn.Module):
    """Stochastic segmentation network head over any backbone (Monteiro et al. 2020)."""

    def __init__(self, backbone: nn.Module, num_classes: int, rank: int, eps: float = 1e-5, max_log_var: float = 15.0):
        super().__init__()
        self.backbone = backbone
        self.num_classes = num_classes
        self.rank = rank
        self.eps = eps
        self.max_log_var = max_log_var

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(mean [B, C, *spatial], cov_factor [B, C*N, rank], cov_diag [B, C*N])``."""
        out = self.backbone(x)
        b, c, r = out.shape[0], self.num_classes, self.rank
        spatial = out.shape[2:]
        mean = out[:, :c]
        log_diag = out[:, c : 2 * c].clamp(max=self.max_log_var)
        factor = out[:, 2 * c :].reshape(b, r, c * math.prod(spatial)).transpose(1, 2)
        diag = log_diag.exp().reshape(b, -1) + self.eps
        return mean, factor.float(), diag.float()

    def distribution(self, x: torch.Tensor) -> tuple[LowRankMultivariateNormal, tuple[int, ...]]:
        """The Gaussian over flattened logits and the logit shape ``(C, *spatial)``."""
        mean, factor, diag = self(x)
        return low_rank_normal(mean, factor, diag), tuple(mean.shape[1:])

    @torch.no_grad()
    def sample_logits(self, x: torch.Tensor, n: int) -> torch.Tensor:
        """``n`` logit samples ``[n, B, C, *spatial]``."""
        dist, shape = self.distribution(x)
        return dist.sample((n,)).reshape(n, x.shape[0], *shape)


def low_rank_normal(mean: torch.Tensor, factor: torch.Tensor, diag: torch.Tensor) -> LowRankMultivariateNormal:
    return LowRankMultivariateNormal(mean.float().reshape(mean.shape[0], -1), factor, diag, validate_args=False)


def enable_dropout(net: nn.Module) -> int:
    """Put every dropout layer in training mode (others stay as they are); returns their number."""
    n = 0
    for m in net.modules():
        if isinstance(m, _DropoutNd):
            m.train()
            n += 1
    return n
