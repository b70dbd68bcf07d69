"""C1 ``prob_unet``: the Probabilistic U-Net (Kohl et al. 2018, "A Probabilistic U-Net for Segmentation
of Ambiguous Images", NeurIPS), with its own head and loss on any backbone: a prior and a posterior net
over a low-dimensional latent, a 1x1 combination head, the KL-weighted ELBO; samples from the prior.
The posterior sees the rater's label map through the engine's ``Head.training_inputs``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

import torch
import torch.nn.functional as F
from torch import nn

from values_seg import hookimpl
from values_seg.components.prediction_model import PredictionModel
from values_seg.engine.head import Head
from values_seg.engine.losses import valid_pixels
from values_seg.params import Range

_CONV = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}
_POOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}
#: log sigma of the latent Gaussians is clamped to this range (exp stays finite; the KL too)
LOG_SIGMA_RANGE = (-10.0, 10.0)


class AxisAlignedGaussianNet(nn.Module):
    """Kohl et al.'s prior / posterior net: an encoder of ``stages`` blocks (two 3x3(x3) convolutions
    with ReLU each, 2x average pooling between blocks, widths ``width * 2**i``), a global mean over
    space and a 1x1 convolution to the ``(mu, log sigma)`` of an axis-aligned Gaussian over the latent."""

    def __init__(self, dims: int, in_channels: int, latent_dim: int, width: int, stages: int):
        super().__init__()
        conv = _CONV[dims]
        self.dims = dims
        blocks, channels = [], in_channels
        for i in range(stages):
            out = width * 2**i
            blocks.append(nn.Sequential(conv(channels, out, 3, padding=1), nn.ReLU(),
                                        conv(out, out, 3, padding=1), nn.ReLU()))
            channels = out
        self.blocks = nn.ModuleList(blocks)
        self.to_gaussian = conv(channels, 2 * latent_dim, 1)
        self.latent_dim = latent_dim

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mu [B, L], log_sigma [B, L])``."""
        h = x
        for i, block in enumerate(self.blocks):
            if i and min(h.shape[2:]) >= 2:
                h = _POOL[self.dims](h, 2, ceil_mode=True)
            h = block(h)
        h = h.mean(dim=tuple(range(2, h.ndim)), keepdim=True)
        out = self.to_gaussian(h).flatten(1).float()
        mu, log_sigma = out[:, :self.latent_dim], out[:, self.latent_dim:]
        return mu, log_sigma.clamp(*LOG_SIGMA_RANGE)


class ProbUNetNetwork(nn.Module):
    """The Probabilistic U-Net around a backbone that emits ``features`` channels.

    ``forward(x)``: ``(logits, prior_mu, prior_log_sigma)`` with the logits of the prior's mean latent
    (for the learning curve's validation Dice; it draws nothing). ``forward(x, target,
    noise)`` (training): ``(logits, prior_mu, prior_log_sigma, post_mu, post_log_sigma)`` with the logits
    of the posterior sample ``z = post_mu + exp(post_log_sigma) * noise``; the posterior net sees the
    image and the one-hot ``target`` (pixels labelled ``ignore_index`` all zero).
    """

    def __init__(self, backbone: nn.Module, dims: int, in_channels: int, num_classes: int, features: int,
                 latent_dim: int, encoder_width: int, encoder_stages: int, combination_layers: int,
                 ignore_index: int | None = None):
        super().__init__()
        if dims not in _CONV:
            raise ValueError(f"prob_unet: dims must be 1, 2 or 3, got {dims}")
        conv = _CONV[dims]
        self.backbone = backbone
        self.num_classes = num_classes
        self.latent_dim = latent_dim
        self.ignore_index = ignore_index
        self.prior = AxisAlignedGaussianNet(dims, in_channels, latent_dim, encoder_width, encoder_stages)
        self.posterior = AxisAlignedGaussianNet(dims, in_channels + num_classes, latent_dim, encoder_width,
                                                encoder_stages)
        layers: list[nn.Module] = []
        channels = features + latent_dim
        for _ in range(combination_layers - 1):
            layers += [conv(channels, features, 1), nn.ReLU()]
            channels = features
        layers.append(conv(channels, num_classes, 1))
        self.combination = nn.Sequential(*layers)

    def combine(self, features: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """Logits of the backbone's ``features [B, F, *spatial]`` fused with the latent ``z [B, L]``
        broadcast over space."""
        tiled = z.to(features.dtype).reshape(*z.shape, *(1,) * (features.ndim - 2)).expand(-1, -1, *features.shape[2:])
        return self.combination(torch.cat([features, tiled], dim=1))

    def one_hot(self, target: torch.Tensor) -> torch.Tensor:
        """``target [B, *spatial]`` one-hot ``[B, C, *spatial]`` (by comparison: vectorises in a fused
        group), ignored pixels all zero."""
        classes = torch.arange(self.num_classes, device=target.device).reshape(1, -1, *(1,) * (target.ndim - 1))
        onehot = (target.unsqueeze(1) == classes).float()
        if self.ignore_index is not None:
            onehot = onehot * (target != self.ignore_index).unsqueeze(1).float()
        return onehot

    def forward(self, x: torch.Tensor, target: torch.Tensor | None = None, noise: torch.Tensor | None = None):
        h = self.backbone(x)
        prior_mu, prior_log_sigma = self.prior(x)
        if target is None:
            return self.combine(h, prior_mu), prior_mu, prior_log_sigma
        post_mu, post_log_sigma = self.posterior(torch.cat([x, self.one_hot(target).to(x.dtype)], dim=1))
        z = post_mu + post_log_sigma.exp() * noise
        return self.combine(h, z), prior_mu, prior_log_sigma, post_mu, post_log_sigma

    @torch.no_grad()
    def sample_logits(self, x: torch.Tensor, n: int, max_batch: int = 16) -> torch.Tensor:
        """``n`` logit samples ``[n, B, C, *spatial]``, latents drawn from the prior; the backbone and
        the prior run once, the combination head once per sample (``max_batch`` at a time)."""
        h = self.backbone(x)
        mu, log_sigma = self.prior(x)
        z = mu + log_sigma.exp() * torch.randn((n, *mu.shape), dtype=mu.dtype, device=mu.device)  # [n, B, L]
        b, out = h.shape[0], []
        for chunk in torch.split(z, max(int(max_batch), 1)):
            k = chunk.shape[0]
            feats = h.unsqueeze(0).expand(k, *h.shape).reshape(k * b, *h.shape[1:])
            out.append(self.combine(feats, chunk.reshape(k * b, -1)).reshape(k, b, -1, *h.shape[2:]))
        return torch.cat(out)


def kl_diagonal(mu_q: torch.Tensor, log_sigma_q: torch.Tensor, mu_p: torch.Tensor,
                log_sigma_p: torch.Tensor) -> torch.Tensor:
    """KL(q || p) of two axis-aligned Gaussians ``[B, L]``, summed over the latent: ``[B]``."""
    var_q, var_p = (2 * log_sigma_q).exp(), (2 * log_sigma_p).exp()
    return (log_sigma_p - log_sigma_q + (var_q + (mu_q - mu_p) ** 2) / (2 * var_p) - 0.5).sum(-1)


def prob_unet_loss(logits: torch.Tensor, target: torch.Tensor, prior_mu: torch.Tensor, prior_log_sigma: torch.Tensor,
                   post_mu: torch.Tensor, post_log_sigma: torch.Tensor, beta: float = 1.0,
                   ignore_index: int | None = None) -> torch.Tensor:
    """The negative KL-weighted ELBO (Kohl et al. 2018, eq. 4): per image the cross-entropy of the
    posterior sample's reconstruction summed over its (valid) pixels plus ``beta`` x KL(posterior ||
    prior), averaged over the batch and divided by the number of pixels per image (scale only: the
    balance of the two terms is Kohl et al.'s)."""
    n_pix = math.prod(logits.shape[2:])
    tgt, valid = valid_pixels(target, ignore_index)
    ce = F.cross_entropy(logits.float(), tgt, reduction="none")
    rec = (ce * valid).flatten(1).sum(-1)  # [B]
    kl = kl_diagonal(post_mu.float(), post_log_sigma.float(), prior_mu.float(), prior_log_sigma.float())
    return ((rec + beta * kl) / n_pix).mean()


@dataclass(frozen=True)
class ProbUNetHead(Head):
    """The Probabilistic U-Net's head and loss; every field changes the weights (see :class:`ProbUNet`)."""

    name = "prob_unet"
    latent_dim: int = 6
    beta: float = 1.0
    features: int = 32
    encoder_width: int = 16
    encoder_stages: int = 4
    combination_layers: int = 3

    def out_channels(self, num_classes: int) -> int:
        return self.features

    def build(self, backbone: nn.Module, arch: dict) -> nn.Module:
        return ProbUNetNetwork(backbone, arch["dims"], arch["in_channels"], arch["num_classes"], self.features,
                               self.latent_dim, self.encoder_width, self.encoder_stages, self.combination_layers,
                               arch.get("ignore_index"))

    def training_inputs(self, target: torch.Tensor) -> tuple:
        """The rater's label map for the posterior net and the reparameterisation noise ``[B, L]``."""
        return target, torch.randn((target.shape[0], self.latent_dim), device=target.device)

    def loss(self, output, target, *, ignore_index, epoch, recipe) -> torch.Tensor:
        """:func:`prob_unet_loss` of the training forward's output."""
        if len(output) != 5:
            raise ValueError("prob_unet: the loss needs the training forward's output (called without the target?)")
        return prob_unet_loss(*output[:1], target, *output[1:], beta=self.beta, ignore_index=ignore_index)


class ProbUNet(PredictionModel):
    """Probabilistic U-Net (Kohl et al. 2018): a latent Gaussian from a prior net fused with the backbone's features; samples from the prior.

    Training: the posterior net encodes the image and the rater's label map drawn for the step into
    an axis-aligned Gaussian over a ``latent_dim``-dimensional latent; a sample of it, broadcast over
    space and concatenated with the backbone's last features, goes through ``combination_layers``
    1x1 convolutions to the logits; the loss is their cross-entropy plus ``beta`` x KL(posterior ||
    prior). Inference: ``num_samples`` latents from the prior net (which sees the image only).

    Args:
        latent_dim: dimension of the latent (Kohl et al.: 6).
        beta: weight of the KL term (Kohl et al.: 1).
        num_samples: samples drawn per case at inference; inference only.
        features: channels the backbone emits for the combination head.
        encoder_width: channels of the prior and posterior nets' first block (doubled per block).
        encoder_stages: blocks of the prior and posterior nets (average pooling between them).
        combination_layers: 1x1 convolutions of the combination head (Kohl et al.: 3).
    """

    name = "prob_unet"
    label = "PU-Net"
    family = "variability"

    def __init__(
        self,
        latent_dim: Annotated[int, Range(1, 256)] = 6,
        beta: float = 1.0,
        num_samples: Annotated[int, Range(1, 1000)] = 10,
        features: Annotated[int, Range(1, 1024)] = 32,
        encoder_width: Annotated[int, Range(1, 512)] = 16,
        encoder_stages: Annotated[int, Range(1, 8)] = 4,
        combination_layers: Annotated[int, Range(1, 8)] = 3,
    ):
        if not beta >= 0:
            raise ValueError(f"prob_unet: beta >= 0 required (got {beta})")
        self.latent_dim = latent_dim
        self.beta = beta
        self.num_samples = num_samples
        self.features = features
        self.encoder_width = encoder_width
        self.encoder_stages = encoder_stages
        self.combination_layers = combination_layers

    def head(self) -> ProbUNetHead:
        return ProbUNetHead(latent_dim=self.latent_dim, beta=float(self.beta), features=self.features,
                            encoder_width=self.encoder_width, encoder_stages=self.encoder_stages,
                            combination_layers=self.combination_layers)

    def training_specs(self, base):
        return [base.replace(head=self.head())]

    def predict(self, networks, image):
        net = networks[0]
        if not isinstance(net, ProbUNetNetwork):
            raise TypeError(f"prob_unet: expected a Probabilistic U-Net network, got {type(net).__name__}")
        logits = net.sample_logits(image[None], self.num_samples, self.max_batch)[:, 0]  # [S, C, *spatial]
        return logits.float().softmax(dim=1)


@hookimpl
def values_seg_prediction_models():
    return [ProbUNet]
