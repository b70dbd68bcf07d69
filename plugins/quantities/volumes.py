"""Per-case volume quantities: how large the prediction is, how large each rater draws it, how much
the model's samples (C1) disagree about it, and a probabilistic score of their volumes.

``volume``, ``rater_volume``, ``volume_cv``, ``volume_crps``: docs/design-rationale.md, "Volume quantities".
"""

from __future__ import annotations

import numpy as np

from values_seg import hookimpl
from values_seg.metrics import crps_empirical
from values_seg.components.quantity import Quantity


def _foreground(labels: np.ndarray, case) -> np.ndarray:
    out = labels != case.background if case.background is not None else np.ones(labels.shape, bool)
    if case.ignore_index is not None:
        out &= labels != case.ignore_index
    return out


def _volumes(stack: np.ndarray, case) -> np.ndarray:
    """Foreground voxel counts of each mask of ``stack`` ``[K, *spatial]``, float64."""
    return _foreground(stack, case).reshape(len(stack), -1).sum(axis=1).astype(np.float64)


def _sample_volumes(case) -> np.ndarray:
    """The samples' foreground volumes ``[S]``, once per case (``volume_cv`` and ``volume_crps`` share them)."""
    return case.shared("foreground volume of each sample", lambda: _volumes(case.sample_labels, case))


def _rater_volumes(case) -> np.ndarray:
    """The raters' foreground volumes ``[R]``, once per case (``rater_volume`` and ``volume_crps`` share them)."""
    return case.shared("foreground volume of each rater", lambda: _volumes(case.raters.numpy(), case))


class Volume(Quantity):
    """Foreground voxels of the mean prediction."""

    name = "volume"
    label = "Volume"
    needs = ("prediction",)

    def compute(self, case, fitted=None):
        return float(_volumes(case.prediction.numpy()[None], case)[0])


class RaterVolume(Quantity):
    """Foreground voxels of each rater's mask, the mean over the raters."""

    name = "rater_volume"
    label = "Rater volume"
    needs = ("references",)

    def compute(self, case, fitted=None):
        return float(_rater_volumes(case).mean())


class VolumeCV(Quantity):
    """Coefficient of variation of the samples' foreground volumes."""

    name = "volume_cv"
    label = "Volume CV"
    needs = ("samples",)

    def compute(self, case, fitted=None):
        volumes = _sample_volumes(case)
        mean = float(volumes.mean())
        return float(volumes.std() / mean) if mean > 0 else float("nan")


class VolumeCRPS(Quantity):
    """CRPS of the samples' volumes against each rater's volume, the mean over the raters."""

    name = "volume_crps"
    label = "Volume CRPS"
    needs = ("samples", "references")

    def compute(self, case, fitted=None):
        return float(np.mean(crps_empirical(_sample_volumes(case), _rater_volumes(case))))


@hookimpl
def values_seg_quantities():
    return [Volume, RaterVolume, VolumeCV, VolumeCRPS]
