"""C1 ``ssn``: stochastic segmentation network (Monteiro et al. 2020), with its own head and loss.

The backbone emits ``C * (rank + 2)`` channels, read as the mean logits ``mu`` [B, C, *spatial],
the log of the diagonal ``d`` and the low-rank factor ``P`` of a Gaussian over the flattened
logit vector (length C x pixels, channel-major). Samples ``eta = mu + P z + sqrt(d) eps``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import LowRankMultivariateNormal

from values_seg import hookimpl
from values_seg.engine.losses import valid_pixels
from values_seg.prediction_model import Head, PredictionModel

log = logging.getLogger("values_seg.ssn")


class SSNNetwork(nn.Module):
    """The SSN head over any backbone: ``forward`` returns ``(mean, cov_factor, cov_diag)``."""

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


def ssn_loss(mean, cov_factor, cov_diag, target, mc_samples: int, ignore_index: int | None = None,
             mean_only: bool = False) -> torch.Tensor:
    """Monteiro et al. (2020): ``-log (1/M) sum_m p(y | eta_m)`` with ``eta_m`` drawn from the
    low-rank Gaussian (antithetic pairs, as in their code), averaged over the batch and divided
    by the number of pixels per image (scale only). ``mean_only``: the same with zero covariance,
    i.e. the cross-entropy of the mean logits (mean pre-training)."""
    b, c = mean.shape[:2]
    n_pix = math.prod(mean.shape[2:])
    tgt, valid = valid_pixels(target, ignore_index)
    if mean_only:
        logits = mean.float().unsqueeze(0)
    else:
        dist = low_rank_normal(mean, cov_factor, cov_diag)
        half = max(mc_samples // 2, 1)
        noise = dist.rsample((half,)) - dist.loc
        flat = torch.cat([dist.loc + noise, dist.loc - noise]) if mc_samples > 1 else dist.loc + noise
        logits = flat.reshape(-1, b, c, *mean.shape[2:])
    m = logits.shape[0]
    logp = -F.cross_entropy(
        logits.reshape(m * b, c, -1), tgt.reshape(1, b, -1).expand(m, b, -1).reshape(m * b, -1), reduction="none"
    ).reshape(m, b, -1)
    loglik = (logp * valid.reshape(1, b, -1)).sum(-1)  # [M, B]
    loglik = torch.logsumexp(loglik, dim=0) - math.log(m)
    return -(loglik / n_pix).mean()


@dataclass(frozen=True)
class SSNHead(Head):
    """Low-rank Gaussian over the logits; loss over ``mc_samples`` samples after ``pretrain_epochs``
    epochs of mean-only training."""

    name = "ssn"
    rank: int = 10
    mc_samples: int = 20
    pretrain_epochs: int = 5

    def out_channels(self, num_classes: int) -> int:
        return num_classes * (self.rank + 2)

    def build(self, backbone: nn.Module, arch: dict) -> nn.Module:
        return SSNNetwork(backbone, arch["num_classes"], self.rank)

    def loss(self, output, target, *, ignore_index, epoch, recipe) -> torch.Tensor:
        mean, factor, diag = output
        return ssn_loss(mean, factor, diag, target, self.mc_samples, ignore_index, mean_only=epoch < self.pretrain_epochs)


class SSN(PredictionModel):
    """Stochastic segmentation network: low-rank Gaussian over the logits, num_samples softmaxed samples.

    Training: the backbone emits the mean, the log-diagonal and a rank-``rank`` factor of the
    covariance; loss ``-logsumexp_m log p(y | eta_m) + log M`` over ``mc_samples`` Monte-Carlo
    samples, after ``pretrain_epochs`` epochs training only the mean. The optimiser parameters
    override the recipe's when set (paper, GTA5/Cityscapes: RMSprop, lr 1e-4, weight decay 5e-4,
    momentum 0.6).
    """

    name = "ssn"
    label = "SSN"
    family = "variability"

    def __init__(
        self,
        rank: int = 5,
        num_samples: int = 10,
        mc_samples: int = 20,
        pretrain_epochs: int = 5,
        optimizer: Literal["adam", "sgd", "rmsprop"] | None = None,
        lr: float | None = None,
        weight_decay: float | None = None,
        momentum: float | None = None,
    ):
        if rank < 1 or num_samples < 1 or mc_samples < 1 or pretrain_epochs < 0:
            raise ValueError("ssn: rank, num_samples, mc_samples >= 1 and pretrain_epochs >= 0 required")
        self.rank = rank
        self.num_samples = num_samples
        self.mc_samples = mc_samples
        self.pretrain_epochs = pretrain_epochs
        self.optimizer = optimizer
        self.lr = lr
        self.weight_decay = weight_decay
        self.momentum = momentum

    def training_specs(self, base):
        overrides = {k: getattr(self, k) for k in ("optimizer", "lr", "weight_decay", "momentum") if getattr(self, k) is not None}
        recipe = base.recipe.replace(**overrides)
        if recipe.epochs <= self.pretrain_epochs:
            log.warning("ssn: %d epochs <= %d mean-only pre-training epochs; the covariance is never trained",
                        recipe.epochs, self.pretrain_epochs)
        head = SSNHead(rank=self.rank, mc_samples=self.mc_samples, pretrain_epochs=self.pretrain_epochs)
        return [base.replace(head=head, recipe=recipe)]

    def predict(self, networks, image):
        net = networks[0]
        if not isinstance(net, SSNNetwork):
            raise TypeError(f"ssn: expected an SSN network, got {type(net).__name__}")
        logits = net.sample_logits(image[None], self.num_samples)[:, 0]  # [S, C, *spatial]
        return logits.float().softmax(dim=1)


@hookimpl
def values_seg_prediction_models():
    return [SSN]
