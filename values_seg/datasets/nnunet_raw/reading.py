"""Pixel data of a raw case: channels as float32, rater masks as integer label maps, checked.

Label values are checked against ``dataset.json`` (0 .. the highest label, plus the ignore
label): nnU-Net requires consecutive values, so a range check finds every offender and only the
offending voxels are listed (no ``np.unique`` over a whole volume).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from values_seg.datasets.nnunet_raw.dataset_json import DatasetInfo, LayoutError


def read_array(path: Path) -> np.ndarray:
    import SimpleITK as sitk

    try:
        return sitk.GetArrayFromImage(sitk.ReadImage(os.fspath(path)))
    except RuntimeError as e:
        raise ValueError(f"{path}: SimpleITK cannot read it ({str(e).strip().splitlines()[-1]})") from None


def read_image(paths) -> np.ndarray:
    """The channels ``[C, *spatial]`` (float32) of one case; non-finite values are an error."""
    channels = [read_array(p).astype(np.float32, copy=False) for p in paths]
    for path, channel in zip(paths, channels):
        if not np.isfinite(channel).all():
            raise ValueError(f"{path}: contains NaN or infinite values")
    return np.stack(channels)


def label_dtype(info: DatasetInfo) -> type:
    return np.uint8 if info.max_label < 256 else np.int32


def check_label(path: Path, label: np.ndarray, info: DatasetInfo) -> np.ndarray:
    """``label`` as integers if every value is one ``dataset.json`` declares; else LayoutError naming ``path``."""
    if not np.issubdtype(label.dtype, np.integer):
        if not np.isfinite(label).all() or (label != np.round(label)).any():
            raise LayoutError(f"{path}: label values must be integers (found non-integer values)")
    low, high = label.min(initial=0), label.max(initial=0)
    if low < 0 or high > info.max_label:
        bad = np.unique(label[(label < 0) | (label > info.max_label)])
        allowed = f"0..{info.max_label}" + (f" (ignore = {info.ignore_label})" if info.ignore_label is not None else "")
        shown = ", ".join(str(v.item() if hasattr(v, "item") else v) for v in bad[:10])
        raise LayoutError(f"{path}: label value(s) {shown} are not declared in {info.path} (labels {allowed}: "
                          f"{', '.join(info.class_names)})")
    return label.astype(label_dtype(info), copy=False)


def read_raters(paths, info: DatasetInfo) -> np.ndarray:
    """The raters' label maps ``[R, *spatial]``, each checked against ``dataset.json``."""
    return np.stack([check_label(p, read_array(p), info) for p in paths])
