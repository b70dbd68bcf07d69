"""Pairwise Dice of the samples: 1 - the mean Dice over all pairs of the samples' segmentations
(Zenk et al., SegmentationFailures, MedIA 2025).

How it is computed: docs/design-rationale.md,
"SegmentationFailures' aggregations and the meta-aggregation".
"""

from __future__ import annotations

import torch

from values_seg import hookimpl
from values_seg.components.aggregation import Aggregation
from values_seg.numerics.labels import class_argmax


def pairwise_dice(labels: torch.Tensor, classes: list[int]) -> float:
    """Mean over the pairs ``i < j`` of the label maps ``labels [S, *spatial]`` of their Dice
    (mean over ``classes``; empty against empty: 1)."""
    S = labels.shape[0]
    flat = labels.reshape(S, -1)
    onehot = torch.stack([(flat == c) for c in classes]).double()  # [K, S, N]
    overlap = onehot @ onehot.transpose(1, 2)  # [K, S, S]
    size = onehot.sum(dim=2)  # [K, S]
    total = size[:, :, None] + size[:, None, :]
    dice = torch.where(total > 0, 2 * overlap / total.clamp(min=1), torch.ones_like(total))
    i, j = torch.triu_indices(S, S, offset=1)
    return float(dice[:, i, j].mean(dim=0).mean())


class PairwiseDiceAggregation(Aggregation):
    """1 - mean pairwise Dice between the samples' segmentations (a sample-based image score)."""

    name = "pairwise_dice"
    label = "Pairwise Dice"
    reads_samples = True

    def __init__(self, background: int | None = 0):
        self.background = background

    def __call__(self, samples, prediction=None) -> float:
        samples = torch.as_tensor(samples)
        if samples.ndim not in (4, 5):
            raise ValueError(f"pairwise_dice aggregation: expects samples [S, C, *spatial] (2D or 3D), "
                             f"got shape {tuple(samples.shape)}")
        S, C = samples.shape[:2]
        if S < 2:
            raise ValueError(f"pairwise_dice aggregation: needs at least two samples, got {S} "
                             f"(a model with one sample has no pairs to compare)")
        classes = [c for c in range(C) if c != self.background] if C > 2 or self.background is None else [1]
        return 1.0 - pairwise_dice(class_argmax(samples, dim=1), classes)


@hookimpl
def values_seg_aggregations():
    return [PairwiseDiceAggregation]
