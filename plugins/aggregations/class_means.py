"""Class-wise means of Aggrigator (Karg et al., CVPR 2026), over the predicted segmentation.

The definitions, and the rule for empty regions (where it departs from Aggrigator):
docs/design-rationale.md, "Aggrigator's aggregations".
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from scipy import ndimage

from values_seg import hookimpl
from values_seg.components.aggregation import Aggregation, as_map, as_prediction, region_mean

Neighbourhood = Literal["full", "star"]


def interior(mask: np.ndarray, nbhood: str, thickness: int) -> np.ndarray:
    """``mask`` eroded ``thickness`` times (border pixels eroded: outside counts as background)."""
    if thickness == 0:
        return mask
    structure = ndimage.generate_binary_structure(mask.ndim, mask.ndim if nbhood == "full" else 1)
    return ndimage.binary_erosion(mask, structure=structure, iterations=thickness, border_value=0)


class _ClassRegion(Aggregation):
    needs_prediction = True
    region = "class"

    def __init__(self, label: int = 1, thickness: int = 1, nbhood: Neighbourhood = "full",
                 empty_value: float | None = None):
        if thickness < 0:
            raise ValueError(f"{self.name} aggregation: thickness must be >= 0, got {thickness}")
        self.label, self.thickness, self.nbhood, self.empty_value = label, thickness, nbhood, empty_value

    def mask(self, labels: torch.Tensor) -> torch.Tensor:
        mask = (labels == self.label).numpy()
        inner = interior(mask, self.nbhood, self.thickness)
        return torch.from_numpy(inner if self.region == "interior" else mask & ~inner)

    def __call__(self, umap, prediction=None) -> float:
        u = as_map(umap, f"{self.name} aggregation").double()
        labels = as_prediction(prediction, u.shape, f"{self.name} aggregation")
        return region_mean(u, self.mask(labels), self.empty_value)

    @classmethod
    def score_many(cls, instances, maps, prediction=None):
        labels = as_prediction(prediction, tuple(maps.shape[1:]), f"{cls.name} aggregation")
        masks: dict = {}  # one region per distinct setting, shared by the stack
        out = []
        for inst, u in zip(instances, maps):
            key = (inst.label, inst.thickness, inst.nbhood)
            if key not in masks:
                masks[key] = inst.mask(labels)
            out.append(region_mean(u.double(), masks[key], inst.empty_value))
        return out


class ClassMeanAggregation(Aggregation):
    """Mean uncertainty over the pixels predicted as class `label` (image mean or `empty_value` if none)."""

    name = "class_mean"
    label = "Class mean"
    needs_prediction = True

    def __init__(self, label: int = 1, empty_value: float | None = None):
        self.label, self.empty_value = label, empty_value

    def __call__(self, umap, prediction=None) -> float:
        u = as_map(umap, "class_mean aggregation").double()
        labels = as_prediction(prediction, u.shape, "class_mean aggregation")
        return region_mean(u, labels == self.label, self.empty_value)

    @classmethod
    def score_many(cls, instances, maps, prediction=None):
        labels = as_prediction(prediction, tuple(maps.shape[1:]), "class_mean aggregation")
        if len({inst.label for inst in instances}) > 1:
            return super().score_many(instances, maps, prediction)
        region = (labels == instances[0].label).reshape(-1)
        if not bool(region.any()):
            return [float(u.double().mean()) if i.empty_value is None else float(i.empty_value)
                    for i, u in zip(instances, maps)]
        return maps.reshape(len(maps), -1)[:, region].double().mean(dim=1).tolist()


class ClassBoundaryMeanAggregation(_ClassRegion):
    """Mean uncertainty over the boundary (mask minus its `thickness`-fold erosion) of class `label`."""

    name = "class_boundary_mean"
    label = "Class bnd"
    region = "boundary"


class ClassInteriorMeanAggregation(_ClassRegion):
    """Mean uncertainty over the interior (`thickness`-fold erosion) of class `label`."""

    name = "class_interior_mean"
    label = "Class int"
    region = "interior"


def class_sums(maps: torch.Tensor, labels: torch.Tensor, include_background: bool):
    """Per map of the stack ``[M, *spatial]``: the float64 uncertainty sum of each predicted class
    ``[M, K]`` and the classes' pixel counts ``[K]`` (absent classes and, unless
    ``include_background``, class 0 have count 0)."""
    flat = labels.reshape(-1).long()
    k = int(flat.max()) + 1 if flat.numel() else 1
    counts = torch.bincount(flat, minlength=k).double()
    if not include_background:
        counts[0] = 0
    u = maps.reshape(len(maps), -1).double()
    sums = torch.zeros(len(maps), k, dtype=torch.float64).index_add_(1, flat, u)
    return sums, counts


class _WeightedClassMean(Aggregation):
    needs_prediction = True
    weighting = "equal"

    def __init__(self, include_background: bool = False, empty_value: float | None = None):
        self.include_background, self.empty_value = include_background, empty_value

    def __call__(self, umap, prediction=None) -> float:
        u = as_map(umap, f"{self.name} aggregation")
        return self.score_many([self], u[None], prediction=prediction)[0]

    @classmethod
    def score_many(cls, instances, maps, prediction=None):
        labels = as_prediction(prediction, tuple(maps.shape[1:]), f"{cls.name} aggregation")
        if bool((labels < 0).any()):
            raise ValueError(f"{cls.name} aggregation: the prediction has negative labels")
        out = []
        stacks = {b: class_sums(maps, labels, b) for b in {inst.include_background for inst in instances}}
        for m, (inst, u) in enumerate(zip(instances, maps)):
            sums, counts = stacks[inst.include_background]
            present = counts > 0
            if not bool(present.any()):
                out.append(float(u.double().mean()) if inst.empty_value is None else float(inst.empty_value))
                continue
            means = sums[m, present] / counts[present]
            weights = (torch.full_like(means, 1.0 / len(means)) if cls.weighting == "equal"
                       else counts[present] / counts[present].sum())
            out.append(float((means * weights).sum()))
        return out


class ClassMeanEqualAggregation(_WeightedClassMean):
    """Mean of the predicted classes' mean uncertainties, each class weighted equally."""

    name = "class_mean_equal"
    label = "Class mean (eq)"


class ClassMeanOccurrenceAggregation(_WeightedClassMean):
    """Mean of the predicted classes' mean uncertainties, weighted by their pixel counts."""

    name = "class_mean_occurrence"
    label = "Class mean (occ)"
    weighting = "occurrence"


@hookimpl
def values_seg_aggregations():
    return [ClassMeanAggregation, ClassBoundaryMeanAggregation, ClassInteriorMeanAggregation,
            ClassMeanEqualAggregation, ClassMeanOccurrenceAggregation]
