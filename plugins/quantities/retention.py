"""Per-case quantities of voxel-level retention after Shifts 2.0 (appendix C.2.1, Table 11): the
nDSC of the prediction and, per measure, the area under its nDSC retention curve, at the reference
lesion load ``evaluation.ndsc_r`` (default 0.001)."""

from __future__ import annotations

import numpy as np

from values_seg import hookimpl, metrics
from values_seg.components.quantity import Quantity


def _r(case) -> float:
    return case.settings.ndsc_r


class NDSC(Quantity):
    """nDSC of the predicted foreground against each rater, averaged over the raters."""

    name = "ndsc"
    label = "nDSC"
    needs = ("prediction", "references")

    def compute(self, case, fitted=None):
        return case_ndsc(case.prediction.numpy(), case.raters.numpy(), _r(case), case.ignore_index, case.background)


class NDSCRetentionArea(Quantity):
    """Per measure, the R-AUC of the voxel-level nDSC retention curve of its map, averaged over the raters."""

    name = "ndsc_rauc"
    label = "nDSC R-AUC"
    needs = ("maps", "prediction", "references")
    per_measure = True

    def compute(self, case, fitted=None):
        return case_ndsc_rauc(case.prediction.numpy(), case.raters.numpy(), case.maps.numpy(), _r(case),
                              case.ignore_index, case.background)


def case_ndsc(prediction: np.ndarray, raters: np.ndarray, r: float, ignore_index: int | None = None,
              background: int | None = 0) -> float:
    """The nDSC of one case (Shifts 2.0, appendix C.2.1): of the predicted foreground (every class
    but ``background``) against each rater's, averaged over the raters; pixels a rater marks
    ``ignore_index`` are left out for that rater. Without a background class: the class-mean nDSC
    (:func:`values_seg.metrics.class_ndsc`; a rater that labels nothing: 1)."""
    if background is None:
        p, out = prediction.reshape(-1), []
        for rater, keep in _rater_pixels(raters, ignore_index):
            keep, g = keep.reshape(-1), rater.reshape(-1)
            out.append(metrics.class_ndsc(p[keep], g[keep], r) if keep.any() else 1.0)
        return float(np.mean(out))
    foreground = prediction != background
    if ignore_index is None or not (raters == ignore_index).any():
        return float(np.mean([metrics.ndsc(foreground, rater != background, r) for rater in raters]))
    return float(np.mean([metrics.ndsc(foreground[keep], rater[keep] != background, r)
                          for rater, keep in _rater_pixels(raters, ignore_index)]))


def case_ndsc_rauc(prediction: np.ndarray, raters: np.ndarray, maps: np.ndarray, r: float,
                   ignore_index: int | None = None, background: int | None = 0) -> list[float]:
    """For each map ``maps[i]``, the R-AUC of its voxel-level nDSC retention curve
    (:func:`values_seg.metrics.ndsc_rauc`, Table 11 of Shifts 2.0), averaged over the raters, with
    each rater's ignored pixels left out; the class-mean version without a background class
    (:func:`values_seg.metrics.class_ndsc_rauc_many`; a rater that labels nothing: 0)."""
    if background is None:
        p, flat_maps = prediction.reshape(-1), maps.reshape(maps.shape[0], -1)
        rauc = np.zeros(maps.shape[0])
        for rater, keep in _rater_pixels(raters, ignore_index):
            keep, g = keep.reshape(-1), rater.reshape(-1)
            if keep.any():
                rauc += metrics.class_ndsc_rauc_many(p[keep], g[keep], flat_maps[:, keep], r)
        return (rauc / len(raters)).tolist()
    foreground = prediction != background
    if ignore_index is None or not (raters == ignore_index).any():  # one sort per map serves every rater
        return metrics.ndsc_rauc_many(foreground, raters != background, maps, r).mean(axis=1).tolist()
    rauc = np.zeros(maps.shape[0])
    for rater, keep in _rater_pixels(raters, ignore_index):
        p, g = foreground[keep], rater[keep] != background
        rauc += [metrics.ndsc_rauc(p, g, umap[keep], r) for umap in maps]
    return (rauc / len(raters)).tolist()


def _rater_pixels(raters: np.ndarray, ignore_index: int | None):
    """``(rater, pixels it labels)`` per rater."""
    for rater in raters:
        yield rater, (np.ones(rater.shape, dtype=bool) if ignore_index is None else rater != ignore_index)


@hookimpl
def values_seg_quantities():
    return [NDSC, NDSCRetentionArea]
