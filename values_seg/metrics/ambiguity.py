"""Ambiguity modelling (paper appendix A.6): rater variance (eq. 13), NCC (eq. 12), GED (eq. 14)."""

from __future__ import annotations

import numpy as np

from values_seg.numerics import kernels
from values_seg.metrics._validation import as_float, as_real, as_labels, same_shape, stack, stacked
from values_seg.metrics.segmentation import _check_range, _num_classes, pairwise_dice

__all__ = ["rater_variance", "ncc", "ncc_many", "ged"]


def rater_variance(raters, num_classes=None, ignore_index=None) -> np.ndarray:
    """Per-pixel population variance over N raters (eq. 13); raters stacked on axis 0.

    Binary masks (labels in {0, 1}, ``num_classes`` None or 2): exactly eq. 13, ``p (1 - p)`` with
    ``p`` the fraction of raters marking the pixel. Multi-class label maps (``num_classes > 2`` or
    labels above 1): the eq. 13 variance of each class's one-hot indicator, summed over all
    classes, ``sum_c p_c (1 - p_c)``. Returns a float64 map ``[*spatial]``. With ``ignore_index``,
    a pixel any rater marks as ignored has variance 0 (no evidence of disagreement there); leave
    such pixels out of the NCC (``ncc(..., mask=)``), as the fused evaluation does.
    """
    r = stacked(as_labels(stack(raters, "raters"), "raters"), "rater_variance: raters")
    if ignore_index is not None:
        ignored = (r == ignore_index).any(axis=0)
        if ignored.any():
            return np.where(ignored, 0.0, rater_variance(np.where(ignored, 0, r), num_classes))
    C = _num_classes(num_classes, (r,), None)
    _check_range(r, None, C, "raters")
    if C == 2:  # p (1 - p) of the number of raters marking a pixel: one lookup table of n + 1 values
        n = r.shape[0]
        marked = r.sum(axis=0, dtype=np.uint16 if n < 2**16 else np.int64)
        p = np.arange(n + 1) / n
        return np.take(p * (1.0 - p), marked)  # (twice as fast as indexing with ``[marked]``)
    n = r.shape[0]
    flat = r.reshape(n, -1)
    n_pix = flat.shape[1]
    # fraction of raters per (pixel, class) via one bincount
    counts = np.bincount((np.arange(n_pix)[None, :] * C + flat).ravel(), minlength=n_pix * C)
    p = counts.reshape(n_pix, C) / n
    return (p * (1.0 - p)).sum(axis=1).reshape(r.shape[1:])


def ncc(reference_map, predicted_map, mask=None) -> float:
    """Normalised cross-correlation (eq. 12) of two maps with population means and stds.

    ``mean((a - mu_a)(b - mu_b)) / (sigma_a sigma_b)``, e.g. ``a`` the raters' variance
    (:func:`rater_variance`) and ``b`` a predicted uncertainty map. Undefined when either map is
    constant (sigma = 0): returns ``nan`` then, so callers average with ``np.nanmean``.
    ``mask`` (boolean, the maps' shape): only these pixels count (e.g. leave out the pixels a rater
    marks with the ignore label, whose variance says nothing); none left: ``nan``.
    """
    b = as_real(predicted_map, "ncc: predicted_map")
    return float(ncc_many(reference_map, b[None], mask)[0])


def ncc_many(reference_map, predicted_maps, mask=None) -> np.ndarray:
    """:func:`ncc` of one reference map against each of a stack of maps ``[M, *spatial]``.

    Two compiled passes (means, then centred products) in float64
    (:func:`values_seg.numerics.kernels.centred_products`), so a float32 stack is never copied (with a
    ``mask``, its pixels are copied out first).
    """
    a = as_float(reference_map, "ncc: reference_map")
    b = as_real(predicted_maps, "ncc: predicted_maps", finite=mask is not None)  # else: checked by the sums
    same_shape(a, b[0], "ncc: reference_map", "ncc: predicted_map")
    if mask is not None:
        keep = np.asarray(mask)
        if keep.dtype != np.bool_ or keep.shape != a.shape:
            raise ValueError(f"ncc: mask must be a boolean map of shape {a.shape}, got {keep.dtype} {keep.shape}")
        if not keep.any():
            return np.full(b.shape[0], np.nan)
        a, b = a[keep], b[:, keep]
    flat = np.ascontiguousarray(b.reshape(b.shape[0], -1))
    n = a.size
    aa, bb, ab, constant_a, constant = kernels.centred_products(np.ascontiguousarray(a.reshape(-1)), flat)
    if not np.isfinite(bb).all():  # a NaN or infinity of a map reaches its float64 sums
        as_real(predicted_maps, "ncc: predicted_maps")  # raises, counting them
    if constant_a:
        return np.full(b.shape[0], np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = (ab / n) / (np.sqrt(aa / n) * np.sqrt(bb / n))
    return np.where(constant, np.nan, np.clip(value, -1.0, 1.0))


def compact_labels(labels: np.ndarray) -> np.ndarray:
    """Integer labels as ``uint8`` when they all lie in [0, 256) (e.g. int64 from an argmax), else
    unchanged: an eighth of the memory to stack, compare and count."""
    if labels.dtype == np.uint8 or labels.dtype == np.bool_:
        return labels
    if labels.min() >= 0 and labels.max() < 256:
        return labels.astype(np.uint8)
    return labels


def ged(predicted_masks, reference_masks, num_classes=None, ignore_index=None, background: int | None = 0) -> float:
    """Squared generalised energy distance (eq. 14) with ``d = 1 - Dice``.

    ``2 E[d(y, ŷ)] - E[d(y, y')] - E[d(ŷ, ŷ')]`` with masks stacked on the first axis
    (``[P, *spatial]`` predictions, ``[R, *spatial]`` references, or lists of maps). Each
    expectation is the mean over ALL ordered pairs, including ``i = j`` (d = 0 there), as in Kohl
    et al. (2018)'s implementation. The Dice is :func:`values_seg.metrics.dice`'s (multi-class:
    macro average over present foreground classes; two empty masks: 1). With ``ignore_index``,
    pixels where any reference equals it are excluded from every pair. Pairwise Dice come from
    one matrix product of the flattened masks per foreground class.
    """
    pred = stacked(as_labels(stack(predicted_masks, "predicted_masks"), "predicted_masks"), "ged: predicted_masks")
    ref = stacked(as_labels(stack(reference_masks, "reference_masks"), "reference_masks"), "ged: reference_masks")
    if pred.shape[1:] != ref.shape[1:]:
        raise ValueError(
            f"ged: predicted and reference masks must have the same spatial shape, "
            f"got {pred.shape[1:]} and {ref.shape[1:]}"
        )
    valid = None
    if ignore_index is not None:
        valid = (ref != ignore_index).all(axis=0)
    P = pred.shape[0]
    d = 1.0 - pairwise_dice(np.concatenate([compact_labels(pred), compact_labels(ref)]), num_classes, valid, background)
    cross = d[:P, P:].mean()
    within_ref = d[P:, P:].mean()
    within_pred = d[:P, :P].mean()
    return float(2.0 * cross - within_ref - within_pred)
