"""Training losses: Dice + cross-entropy (U-Net), cross-entropy (HRNet) and the SSN loss."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from values_seg.engine.networks import low_rank_normal


def _valid(target: torch.Tensor, ignore_index: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(target with ignored pixels mapped to 0, float mask of valid pixels)."""
    if ignore_index is None:
        return target, torch.ones_like(target, dtype=torch.float32)
    valid = target != ignore_index
    return torch.where(valid, target, torch.zeros_like(target)), valid.float()


def ce_loss(logits: torch.Tensor, target: torch.Tensor, ignore_index: int | None = None) -> torch.Tensor:
    return F.cross_entropy(logits.float(), target, ignore_index=-100 if ignore_index is None else ignore_index)


def soft_dice_loss(logits: torch.Tensor, target: torch.Tensor, ignore_index: int | None = None, smooth: float = 1e-5) -> torch.Tensor:
    """1 - mean soft Dice over the foreground classes, pooled over the batch (nnU-Net's batch Dice)."""
    c = logits.shape[1]
    probs = logits.float().softmax(1)
    tgt, valid = _valid(target, ignore_index)
    onehot = F.one_hot(tgt, c).movedim(-1, 1).float()
    valid = valid.unsqueeze(1)
    axes = [0] + list(range(2, logits.ndim))
    intersect = (probs * onehot * valid).sum(axes)
    denom = (probs * valid).sum(axes) + (onehot * valid).sum(axes)
    dice = (2 * intersect + smooth) / (denom + smooth).clamp_min(1e-8)
    if c > 1:
        dice = dice[1:]
    return 1 - dice.mean()


def dice_ce_loss(logits: torch.Tensor, target: torch.Tensor, ignore_index: int | None = None) -> torch.Tensor:
    return ce_loss(logits, target, ignore_index) + soft_dice_loss(logits, target, ignore_index)


def ssn_loss(
    mean: torch.Tensor,
    cov_factor: torch.Tensor,
    cov_diag: torch.Tensor,
    target: torch.Tensor,
    mc_samples: int,
    ignore_index: int | None = None,
    mean_only: bool = False,
) -> torch.Tensor:
    """Monteiro et al. (2020): ``-log (1/M) sum_m p(y | eta_m)`` with ``eta_m`` drawn from the
    low-rank Gaussian (antithetic pairs, as in their code), averaged over the batch and divided
    by the number of pixels per image (scale only). ``mean_only``: the same with zero covariance,
    i.e. the cross-entropy of the mean logits (mean pre-training)."""
    b, c = mean.shape[:2]
    n_pix = math.prod(mean.shape[2:])
    tgt, valid = _valid(target, ignore_index)
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
