import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from values_seg import hookimpl, Head, PredictionModel
from values_seg.engine.losses import valid_pixels


@dataclass(frozen=True)
class DirichletHead(Head):
    """Evidence = softplus(logits), alpha = evidence + 1 (Sensoy et al. 2018); loss eq. 5 + annealed KL."""

    name = "dirichlet"
    annealing_epochs: int = 10

    def build(self, backbone, arch):
        return nn.Sequential(backbone, nn.Softplus())

    def loss(self, output, target, *, ignore_index, epoch, recipe):
        alpha = output.float() + 1
        target, valid = valid_pixels(target, ignore_index)
        y = F.one_hot(target, alpha.shape[1]).movedim(-1, 1).float()
        strength = alpha.sum(1, keepdim=True)
        fit = (y * (torch.digamma(strength) - torch.digamma(alpha))).sum(1)  # expected cross-entropy
        kl = kl_to_uniform(y + (1 - y) * alpha)  # evidence for the wrong classes only
        weight = min(1.0, epoch / max(self.annealing_epochs, 1))
        return ((fit + weight * kl) * valid).sum() / valid.sum().clamp_min(1)


def kl_to_uniform(alpha: torch.Tensor) -> torch.Tensor:
    """KL(Dir(alpha) || Dir(1, ..., 1)) over the class axis 1."""
    s = alpha.sum(1)
    return (torch.lgamma(s) - math.lgamma(alpha.shape[1]) - torch.lgamma(alpha).sum(1)
            + ((alpha - 1) * (torch.digamma(alpha) - torch.digamma(s).unsqueeze(1))).sum(1))


class Evidential(PredictionModel):
    """Evidential deep learning: a per-pixel Dirichlet over the class probabilities; samples drawn from it."""

    name = "evidential"
    label = "EDL"
    family = "bayesian"

    def __init__(self, num_samples: int = 10, annealing_epochs: int = 10):
        if num_samples < 1 or annealing_epochs < 0:
            raise ValueError("evidential: num_samples >= 1 and annealing_epochs >= 0 required")
        self.num_samples = num_samples
        self.annealing_epochs = annealing_epochs

    def training_specs(self, base):
        return [base.replace(head=DirichletHead(self.annealing_epochs))]

    def predict(self, networks, image):
        alpha = networks[0](image[None])[0].float() + 1  # [C, *spatial]
        samples = torch.distributions.Dirichlet(alpha.movedim(0, -1)).sample((self.num_samples,))
        return samples.movedim(-1, 1)  # [S, C, *spatial]


@hookimpl
def values_seg_prediction_models():
    return [Evidential]
