"""Training-time augmentation, drawn per sample from a seeded generator (reproducible)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from values_seg.engine.specs import Recipe


@dataclass(frozen=True)
class SamplePlan:
    """The random choices of one training sample: which case and rater, which augmentations."""

    case_index: int
    rater_u: float  # uniform in [0, 1): rater = floor(u * R)
    flips: tuple[int, ...]  # spatial axes to flip
    noise: bool
    angle: float  # radians (2D)
    scale: float


def resolve_axes(axes: tuple[int, ...] | None, dims: int) -> tuple[int, ...]:
    if axes is None:
        return tuple(range(dims))
    out = []
    for a in axes:
        if not -dims <= a < dims:
            raise ValueError(f"flip axis {a} out of range for {dims}D data")
        out.append(a % dims)
    return tuple(sorted(set(out)))


def draw_plan(rng: np.random.Generator, case_index: int, recipe: Recipe, dims: int) -> SamplePlan:
    axes = resolve_axes(recipe.flip_axes, dims)
    # Always draw the same number of numbers, whatever the recipe, so streams stay aligned.
    u = rng.random(4 + dims)
    flips = tuple(a for i, a in enumerate(axes) if u[4 + a] < recipe.flip_prob)
    noise = bool(u[1] < recipe.noise_prob) and recipe.noise_std > 0
    angle = math.radians(recipe.rotation_deg) * (2 * u[2] - 1) if recipe.rotation_deg else 0.0
    scale = 1.0
    if recipe.scale_range is not None:
        lo, hi = recipe.scale_range
        scale = float(lo + (hi - lo) * u[3])
    return SamplePlan(case_index, float(u[0]), flips, noise, float(angle), scale)


def apply(
    images: torch.Tensor,
    labels: torch.Tensor,
    plans: list[SamplePlan],
    recipe: Recipe,
    generator: torch.Generator,
    fill_label: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Augment a batch ``images [B, Cin, *sp]``, ``labels [B, *sp]`` in place of the plans."""
    if any(p.angle or p.scale != 1.0 for p in plans):
        images, labels = _affine(images, labels, plans, fill_label)
    imgs, labs = [], []
    for i, p in enumerate(plans):
        x, y = images[i], labels[i]
        if p.flips:
            x = torch.flip(x, [a + 1 for a in p.flips])
            y = torch.flip(y, list(p.flips))
        imgs.append(x)
        labs.append(y)
    images, labels = torch.stack(imgs), torch.stack(labs)
    noisy = [i for i, p in enumerate(plans) if p.noise]
    if noisy:
        noise = torch.randn(images[noisy].shape, generator=generator, device=images.device, dtype=images.dtype)
        images[noisy] = images[noisy] + recipe.noise_std * noise
    return images, labels


def _affine(images: torch.Tensor, labels: torch.Tensor, plans: list[SamplePlan], fill_label: int):
    if images.ndim != 4:
        raise ValueError("rotation and scaling augmentations are implemented for 2D data only")
    b = images.shape[0]
    theta = torch.zeros(b, 2, 3, dtype=images.dtype, device=images.device)
    for i, p in enumerate(plans):
        c, s = math.cos(p.angle) / p.scale, math.sin(p.angle) / p.scale
        theta[i, 0, 0], theta[i, 0, 1], theta[i, 1, 0], theta[i, 1, 1] = c, -s, s, c
    grid = F.affine_grid(theta, list(images.shape), align_corners=False)
    images = F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    lab = F.grid_sample(labels.unsqueeze(1).to(images.dtype), grid, mode="nearest", padding_mode="zeros", align_corners=False)
    inside = F.grid_sample(torch.ones_like(lab), grid, mode="nearest", padding_mode="zeros", align_corners=False)
    lab = torch.where(inside > 0.5, lab, torch.full_like(lab, float(fill_label)))
    return images, lab.squeeze(1).round().long()
