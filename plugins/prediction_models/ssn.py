"""C1 ``ssn``: stochastic segmentation network (Monteiro et al. 2020), with its own head and loss.

The network, the loss, and where it departs from Monteiro et al. and the ValUES code (each a
parameter) and why: docs/design-rationale.md, "Stochastic segmentation network".
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Annotated, Literal

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import LowRankMultivariateNormal

from values_seg import hookimpl
from values_seg.engine.losses import recipe_loss, valid_pixels
from values_seg.components.prediction_model import PredictionModel
from values_seg.engine.head import Head
from values_seg.params import Range

log = logging.getLogger("values_seg.ssn")

_CONV = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}


class SSNNetwork(nn.Module):
    """The SSN head over any backbone: ``forward`` returns ``(mean, cov_factor, cov_diag)``.

    ``init_std``: the factor layer starts at zero and the log-diagonal layer at a constant
    ``log(init_std**2 - eps)``, so every sample is the mean plus noise of std ``init_std``;
    ``None`` keeps PyTorch's default initialisation (the reference implementations').
    """

    def __init__(self, backbone: nn.Module, dims: int, features: int, num_classes: int, rank: int,
                 init_std: float | None = None, eps: float = 1e-5, max_log_var: float = 15.0):
        super().__init__()
        if dims not in _CONV:
            raise ValueError(f"ssn: dims must be 1, 2 or 3, got {dims}")
        conv = _CONV[dims]
        self.backbone = backbone
        self.num_classes = num_classes
        self.rank = rank
        self.eps = eps
        self.max_log_var = max_log_var
        self.mean_conv = conv(features, num_classes, 1)
        self.log_diag_conv = conv(features, num_classes, 1)
        self.factor_conv = conv(features, num_classes * rank, 1)
        if init_std is not None:
            for layer in (self.factor_conv, self.log_diag_conv):
                nn.init.zeros_(layer.weight)
                nn.init.zeros_(layer.bias)
            nn.init.constant_(self.log_diag_conv.bias, math.log(max(init_std**2 - eps, 1e-12)))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(mean [B, C, *spatial], cov_factor [B, C*N, rank], cov_diag [B, C*N])``."""
        h = F.leaky_relu(self.backbone(x), 0.01)
        b, c, r = h.shape[0], self.num_classes, self.rank
        mean = self.mean_conv(h)
        n = math.prod(mean.shape[2:])
        factor = self.factor_conv(h).reshape(b, r, c * n).transpose(1, 2)
        diag = self.log_diag_conv(h).clamp(max=self.max_log_var).exp().reshape(b, -1) + self.eps
        return mean, factor.float(), diag.float()

    def distribution(self, x: torch.Tensor) -> tuple[LowRankMultivariateNormal, tuple[int, ...]]:
        """The Gaussian over flattened logits and the logit shape ``(C, *spatial)`` (for analysis;
        training and sampling use :func:`sample_low_rank`)."""
        mean, factor, diag = self(x)
        return low_rank_normal(mean, factor, diag), tuple(mean.shape[1:])

    @torch.no_grad()
    def sample_logits(self, x: torch.Tensor, n: int) -> torch.Tensor:
        """``n`` logit samples ``[n, B, C, *spatial]``."""
        mean, factor, diag = self(x)
        return sample_low_rank(mean.float().reshape(mean.shape[0], -1), factor, diag, n).reshape(n, *mean.shape)


def low_rank_normal(mean: torch.Tensor, factor: torch.Tensor, diag: torch.Tensor) -> LowRankMultivariateNormal:
    """``torch.distributions``' low-rank normal over the flattened logits of ``mean`` [B, C, *spatial]."""
    return LowRankMultivariateNormal(mean.float().reshape(mean.shape[0], -1), factor, diag, validate_args=False)


def sample_low_rank(loc: torch.Tensor, factor: torch.Tensor, diag: torch.Tensor, n: int) -> torch.Tensor:
    """``n`` reparameterised samples ``loc + factor z + sqrt(diag) eps``, ``[n, B, D]``.

    The draws are those of ``LowRankMultivariateNormal.rsample`` (z first, then eps), without the
    Cholesky factorisation that class computes on construction, which fails in float32 once the
    factor dominates a tiny diagonal (Monteiro et al.'s toy-problem code samples the same way).
    """
    z = torch.randn((n, *factor.shape[:-2], factor.shape[-1]), dtype=loc.dtype, device=loc.device)
    eps = torch.randn((n, *loc.shape), dtype=loc.dtype, device=loc.device)
    return loc + torch.einsum("bdr,nbr->nbd", factor, z) + diag.sqrt() * eps


def ssn_loss(mean: torch.Tensor, cov_factor: torch.Tensor, cov_diag: torch.Tensor, target: torch.Tensor,
             mc_samples: int, ignore_index: int | None = None, mean_only: bool = False,
             per_sample_weight: float = 0.0) -> torch.Tensor:
    """Monteiro et al. (2020), eq. 8: ``-log (1/M) sum_m p(y | eta_m)`` over ``mc_samples``
    samples ``eta_m`` (antithetic pairs ``mu ± noise``, as in their code), ``p(y | eta)`` the
    product of the pixels' softmax probabilities; averaged over the batch and divided by the
    number of pixels per image (scale only). With ``per_sample_weight`` beta the image term is
    ``(1 - beta) log-mean-exp_m + beta mean_m`` of the samples' log-likelihoods (see the module
    docstring). ``mean_only``: zero covariance, i.e. the cross-entropy of the mean logits."""
    b, c = mean.shape[:2]
    n_pix = math.prod(mean.shape[2:])
    tgt, valid = valid_pixels(target, ignore_index)
    loc = mean.float().reshape(b, -1)
    if mean_only:
        flat = loc.unsqueeze(0)
    else:
        noise = sample_low_rank(torch.zeros_like(loc), cov_factor, cov_diag, max(mc_samples // 2, 1))
        flat = torch.cat([loc + noise, loc - noise]) if mc_samples > 1 else loc + noise
    m = flat.shape[0]
    logp = -F.cross_entropy(
        flat.reshape(m * b, c, -1), tgt.reshape(1, b, -1).expand(m, b, -1).reshape(m * b, -1), reduction="none"
    ).reshape(m, b, -1)
    loglik = (logp * valid.reshape(1, b, -1)).sum(-1)  # [M, B]
    image = torch.logsumexp(loglik, dim=0) - math.log(m)
    if per_sample_weight:
        image = (1 - per_sample_weight) * image + per_sample_weight * loglik.mean(0)
    return -(image / n_pix).mean()


@dataclass(frozen=True)
class SSNHead(Head):
    """The SSN's head and loss; every field changes the weights (see :class:`SSN` for each)."""

    name = "ssn"
    rank: int = 5
    mc_samples: int = 20
    pretrain_epochs: int = 5
    features: int = 32
    init_std: float | None = 0.01
    anchor_weight: float = 1.0
    per_sample_weight: float = 0.1

    def out_channels(self, num_classes: int) -> int:
        return self.features

    def build(self, backbone: nn.Module, arch: dict) -> nn.Module:
        return SSNNetwork(backbone, arch["dims"], self.features, arch["num_classes"], self.rank, self.init_std)

    def phases(self) -> list[tuple[str, int, int]]:
        return [("pre-training (mean only)", 1, self.pretrain_epochs)] if self.pretrain_epochs else []

    def loss(self, output, target, *, ignore_index, epoch, recipe) -> torch.Tensor:
        """:func:`ssn_loss` (mean only for the first ``pretrain_epochs`` epochs) plus
        ``anchor_weight`` x the recipe's loss of the mean logits."""
        mean, factor, diag = output
        loss = ssn_loss(mean, factor, diag, target, self.mc_samples, ignore_index,
                        mean_only=epoch < self.pretrain_epochs, per_sample_weight=self.per_sample_weight)
        if self.anchor_weight:
            loss = loss + self.anchor_weight * recipe_loss(recipe)(mean, target, ignore_index)
        return loss


class SSN(PredictionModel):
    """Stochastic segmentation network (Monteiro et al. 2020), stabilised: zero-initialised covariance, mean anchored on the recipe's loss, per-sample likelihood term.

    A low-rank Gaussian over the logits, ``num_samples`` softmaxed samples at inference. Training
    minimises the Monte-Carlo marginal likelihood loss after ``pretrain_epochs`` epochs training
    only the mean (paper, appendix C.2: 5), with three departures from Monteiro et al. that make
    it train stably on data without a region of interest (module docstring; set
    ``init_std=None, anchor_weight=0, per_sample_weight=0`` for the reference training).

    Args:
        rank: rank of the covariance factor (paper: 5 for toy and LIDC, 10 for GTA5/Cityscapes).
        num_samples: samples drawn per case at inference (paper: 10); inference only.
        mc_samples: Monte-Carlo samples of the training loss (Monteiro et al.: 20, antithetic).
        pretrain_epochs: first epochs training the mean alone (the covariance switched off, as
            in Monteiro et al.'s toy problem; the ValUES code keeps the diagonal's noise, which
            starts at ``init_std`` here).
        features: channels the backbone emits for the head's three 1x1 convolutions.
        init_std: departure: the covariance starts at a zero factor and a diagonal of
            ``init_std**2``, so samples equal the mean at step 0; ``None``: PyTorch's default
            initialisation, as Monteiro et al. and the ValUES code.
        anchor_weight: departure: weight of the recipe's loss (U-Net: Dice + CE) on the mean
            logits, added to the SSN loss from the first epoch; 0: the SSN loss alone (Monteiro
            et al., the paper).
        per_sample_weight: departure: beta in ``(1 - beta) log-mean-exp + beta mean`` of the
            samples' image log-likelihoods (Rainforth et al. 2018's CIWAE combination), so that
            every sample, not only the best, must explain the labels; 0: Monteiro et al.
        optimizer, lr, weight_decay, momentum: override the recipe's when set (paper,
            GTA5/Cityscapes: RMSprop, lr 1e-4, weight decay 5e-4, momentum 0.6).
    """

    name = "ssn"
    label = "SSN"
    family = "variability"

    def __init__(
        self,
        rank: int = 5,
        num_samples: Annotated[int, Range(1, 1000)] = 10,
        mc_samples: Annotated[int, Range(1, 1000)] = 20,
        pretrain_epochs: int = 5,
        features: int = 32,
        init_std: float | None = 0.01,
        anchor_weight: float = 1.0,
        per_sample_weight: float = 0.1,
        optimizer: Literal["adam", "sgd", "rmsprop"] | None = None,
        lr: float | None = None,
        weight_decay: float | None = None,
        momentum: float | None = None,
    ):
        problems = [text for bad, text in (
            (rank < 1, f"rank >= 1 (got {rank})"),
            (num_samples < 1, f"num_samples >= 1 (got {num_samples})"),
            (mc_samples < 1, f"mc_samples >= 1 (got {mc_samples})"),
            (pretrain_epochs < 0, f"pretrain_epochs >= 0 (got {pretrain_epochs})"),
            (features < 1, f"features >= 1 (got {features})"),
            (init_std is not None and not init_std > 0, f"init_std > 0 or None (got {init_std})"),
            (not anchor_weight >= 0, f"anchor_weight >= 0 (got {anchor_weight})"),
            (not 0 <= per_sample_weight <= 1, f"0 <= per_sample_weight <= 1 (got {per_sample_weight})"),
        ) if bad]
        if problems:
            raise ValueError(f"ssn: {'; '.join(problems)} required")
        self.rank = rank
        self.num_samples = num_samples
        self.mc_samples = mc_samples
        self.pretrain_epochs = pretrain_epochs
        self.features = features
        self.init_std = init_std
        self.anchor_weight = anchor_weight
        self.per_sample_weight = per_sample_weight
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
        head = SSNHead(rank=self.rank, mc_samples=self.mc_samples, pretrain_epochs=self.pretrain_epochs,
                       features=self.features, init_std=self.init_std, anchor_weight=self.anchor_weight,
                       per_sample_weight=self.per_sample_weight)
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
