"""The recipes' training losses: Dice + cross-entropy (U-Net) and cross-entropy (HRNet), appendix C.1.

A prediction model with a loss of its own brings it with its :class:`~values_seg.engine.head.Head`
(and may anchor on the recipe's loss with :func:`recipe_loss`).
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F


def valid_pixels(target: torch.Tensor, ignore_index: int | None) -> tuple[torch.Tensor, torch.Tensor]:
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
    tgt, valid = valid_pixels(target, ignore_index)
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


#: recipe ``loss`` name -> ``(logits, target, ignore_index) -> scalar``
LOSSES: dict[str, Callable] = {"dice_ce": dice_ce_loss, "ce": ce_loss}


def recipe_loss(recipe) -> Callable:
    """The loss function a :class:`~values_seg.engine.Recipe` names."""
    try:
        return LOSSES[recipe.loss]
    except KeyError:
        raise ValueError(f"unknown loss {recipe.loss!r}; available: {', '.join(LOSSES)}") from None

