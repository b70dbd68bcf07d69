"""Segmentation performance: the Dice score (paper appendix A.1, eq. 2-3), macro-averaged over the
foreground classes present, 1.0 for two empty masks.

The conventions every Dice in the package shares: docs/design-rationale.md, "Dice".
"""

from __future__ import annotations

import numpy as np

from values_seg.numerics import kernels
from values_seg.metrics._validation import as_labels, same_shape, stack

__all__ = ["dice", "dice_per_class", "mean_dice_over_raters", "pairwise_dice"]


def _num_classes(num_classes, arrays, valid) -> int:
    """The number of classes: given (validated >= 2) or 1 + the largest valid label (at least 2)."""
    if num_classes is not None:
        if int(num_classes) != num_classes or num_classes < 2:
            raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}")
        return int(num_classes)
    top = 1
    for a in arrays:
        v = a[valid] if valid is not None else a
        if v.size:
            top = max(top, int(v.max()))
    return top + 1


def _check_range(a: np.ndarray, valid, num_classes: int, name: str) -> None:
    v = a[valid] if valid is not None else a
    unsigned = v.dtype.kind in "ub"  # (no negative label to look for)
    if v.size and ((not unsigned and v.min() < 0) or v.max() >= num_classes):
        bad = v[(v < 0) | (v >= num_classes)]
        raise ValueError(
            f"{name}: labels must lie in [0, {num_classes}) (num_classes={num_classes}), found {int(bad[0])}"
        )


def _counts(pred: np.ndarray, ref: np.ndarray, num_classes: int, valid) -> tuple[np.ndarray, ...]:
    """Per batch row and class: true positives, predicted and reference pixel counts, each ``[B, C]``.

    ``pred``/``ref``: int64 ``[B, N]``; ``valid``: bool ``[B, N]`` or None.
    """
    B = pred.shape[0]
    C = num_classes
    if C == 2 and valid is None:  # labels in {0, 1} (checked): one compiled pass counts the 1s
        rows = pred[:1] if pred.shape[0] > 1 and pred.strides[0] == 0 else pred  # a broadcast prediction: once
        n = pred.shape[1]
        tp1, pc1, rc1 = kernels.binary_overlaps(np.ascontiguousarray(rows), np.ascontiguousarray(ref))
        tp0 = n - pc1 - rc1 + tp1
        return (np.stack([tp0, tp1], axis=1), np.stack([n - pc1, pc1], axis=1), np.stack([n - rc1, rc1], axis=1))
    offset = (np.arange(B, dtype=np.int64) * C)[:, None]
    p = pred + offset
    r = ref + offset
    hit = pred == ref
    if valid is not None:
        p_valid, r_valid, hit = p[valid], r[valid], p[valid & hit]
    else:
        p_valid, r_valid, hit = p.ravel(), r.ravel(), p[hit]
    n = B * C
    tp = np.bincount(hit, minlength=n).reshape(B, C)
    pc = np.bincount(p_valid, minlength=n).reshape(B, C)
    rc = np.bincount(r_valid, minlength=n).reshape(B, C)
    return tp, pc, rc


def _per_class(tp, pc, rc) -> np.ndarray:
    denom = (pc + rc).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, 2.0 * tp / denom, np.nan)


def _macro_foreground(per_class: np.ndarray, background: int | None = 0) -> np.ndarray:
    """Mean over the classes but ``background`` (last axis) ignoring NaN; 1.0 where all are NaN."""
    fg = per_class if background is None else np.delete(per_class, background, axis=-1)
    present = ~np.isnan(fg)
    n = present.sum(axis=-1)
    total = np.where(present, fg, 0.0).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, total / np.maximum(n, 1), 1.0)


def dice_per_class(prediction, reference, num_classes=None, ignore_index=None) -> np.ndarray:
    """Per-class Dice (eq. 2) of one case's label maps, for classes ``0 .. C-1`` (background included).

    NaN for classes absent from both prediction and reference. Pixels where ``reference ==
    ignore_index`` are excluded. Any spatial shape (2D, 3D) is accepted; shapes must match.
    """
    pred = as_labels(prediction, "prediction")
    ref = as_labels(reference, "reference")
    same_shape(pred, ref, "prediction", "reference")
    valid = (ref != ignore_index) if ignore_index is not None else None
    C = _num_classes(num_classes, (pred, ref), valid)
    _check_range(pred, valid, C, "prediction")
    _check_range(ref, valid, C, "reference")
    v = valid.reshape(1, -1) if valid is not None else None
    tp, pc, rc = _counts(pred.reshape(1, -1), ref.reshape(1, -1), C, v)
    return _per_class(tp, pc, rc)[0]


def dice(prediction, reference, num_classes=None, ignore_index=None, background: int | None = 0) -> float:
    """Dice score (eq. 2) of one case's predicted and reference label maps.

    Binary masks (labels in {0, 1}): the Dice of the foreground; two empty masks give 1.0.
    Multi-class (e.g. Cityscapes): the macro average over foreground classes ``1 .. C-1`` of the
    per-class Dice, excluding classes absent from both maps (1.0 if all are absent); pixels where
    ``reference == ignore_index`` are excluded; ``background=None``: every class counts (see the
    module docstring). See :func:`dice_per_class`.
    """
    return float(_macro_foreground(dice_per_class(prediction, reference, num_classes, ignore_index), background))


def dice_over_raters(prediction, raters, num_classes=None, ignore_index=None, background: int | None = 0) -> np.ndarray:
    """Dice between one prediction and each of N rater masks, ``[N]`` (the terms of eq. 3).

    ``raters`` are stacked on the first axis (``[N, *spatial]``, or a list of maps); each rater's
    own ``ignore_index`` pixels are excluded from its Dice. Computed in one batched pass.
    """
    pred = as_labels(prediction, "prediction")
    refs = as_labels(stack(raters, "raters"), "raters")
    if refs.ndim != pred.ndim + 1 or refs.shape[1:] != pred.shape:
        raise ValueError(
            f"raters must be stacked on the first axis with the prediction's shape {pred.shape}, "
            f"got {refs.shape}"
        )
    R = refs.shape[0]
    refs = refs.reshape(R, -1)
    preds = np.broadcast_to(pred.reshape(1, -1), refs.shape)
    valid = (refs != ignore_index) if ignore_index is not None else None
    C = _num_classes(num_classes, (preds, refs), valid)
    _check_range(preds, valid, C, "prediction")
    _check_range(refs, valid, C, "raters")
    tp, pc, rc = _counts(preds, refs, C, valid)
    return _macro_foreground(_per_class(tp, pc, rc), background)



def mean_dice_over_raters(prediction, raters, num_classes=None, ignore_index=None, background: int | None = 0) -> float:
    """Mean Dice between one prediction and each of N rater masks (eq. 3).

    Use the mean prediction (the arg-max of the mean probabilities) as ``prediction``, as in the
    paper. See :func:`dice_over_raters`.
    """
    return float(dice_over_raters(prediction, raters, num_classes, ignore_index, background).mean())


def pairwise_dice(masks, num_classes=None, valid=None, background: int | None = 0) -> np.ndarray:
    """Dice (same convention as :func:`dice`) between every ordered pair of masks, ``[M, M]``.

    ``masks``: label maps stacked on the first axis ``[M, *spatial]``; ``valid``: optional boolean
    map ``[*spatial]`` of pixels to count (e.g. where no reference is ``ignore_index``). Computed
    with one matrix product of the flattened one-hot masks per foreground class; the diagonal is 1.
    """
    m = as_labels(stack(masks, "masks"), "masks")
    if m.ndim < 2:
        raise ValueError(f"masks must be stacked on the first axis ([M, *spatial]), got shape {m.shape}")
    M = m.shape[0]
    m = m.reshape(M, -1)
    if valid is not None:
        valid = np.asarray(valid, dtype=bool).reshape(-1)
        if valid.shape[0] != m.shape[1]:
            raise ValueError(f"valid must have the masks' spatial size {m.shape[1]}, got {valid.shape[0]}")
        vmask = np.broadcast_to(valid, m.shape)
    else:
        vmask = None
    C = _num_classes(num_classes, (m,), vmask)
    _check_range(m, vmask, C, "masks")
    if vmask is not None:
        m = np.where(vmask, m, np.int64(-1))  # excluded pixels belong to no class (signed result)
    total = np.zeros((M, M))
    n_present = np.zeros((M, M), dtype=np.int64)
    for c in range(C):
        if c == background:
            continue
        # two classes in bytes, checked above: the labels are the class-1 mask (no pass to compare them)
        is_c = m.view(np.bool_) if C == 2 and c == 1 and vmask is None and m.dtype == np.uint8 else m == c
        if not is_c.any():  # absent from every mask: adds nothing
            continue
        inter = intersections(is_c)
        size = np.diag(inter)
        denom = size[:, None] + size[None, :]
        present = denom > 0
        total += np.where(present, 2.0 * inter / np.where(present, denom, 1.0), 0.0)
        n_present += present
    return np.where(n_present > 0, total / np.maximum(n_present, 1), 1.0)


def intersections(masks: np.ndarray) -> np.ndarray:
    """``|A_i ∩ A_j|`` for every pair of boolean masks ``[M, N]``, as a float64 ``[M, M]`` (exact counts).

    Up to 16 masks: each pixel's membership pattern as one bit-packed 16-bit code, counted in one
    compiled pass, and the pairwise counts summed over the patterns that occur
    (:func:`values_seg.numerics.kernels.pattern_intersections`; ~10x faster than the matrix product for 13 masks
    of 64^3 pixels). More masks: one matrix product (float32 counts exactly below 2**24 pixels).
    """
    M, N = masks.shape
    if M > 16:
        x = masks.astype(np.float32 if N < 2**24 else np.float64)
        return (x @ x.T).astype(np.float64)
    return kernels.pattern_intersections(np.ascontiguousarray(masks, dtype=np.bool_))
