"""Pixel data of a raw case: channels as float32, rater masks as integer label maps, checked.

Label values are checked against ``dataset.json`` (0 .. the highest label, plus the ignore
label): nnU-Net requires consecutive values, so a range check finds every offender and only the
offending voxels are listed (no ``np.unique`` over a whole volume).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from values_seg_plugins.datasets._nnunet_raw.dataset_json import DatasetInfo, LayoutError
from values_seg.runtime.progress import counted


NIFTI_ENDINGS = (".nii", ".nii.gz")


def read_array(path: Path) -> np.ndarray:
    """The pixels of one file in NumPy order (``[z,] y, x``, as ``SimpleITK.GetArrayFromImage``
    returns them), with the values the file holds: NIfTI through nibabel, the rest through SimpleITK.

    SimpleITK's NIfTI reader (nifti_clib's ``nifti_read_buffer``) replaces every NaN and ±inf of
    float data by 0 while reading, so a broken image would pass as a valid one; nibabel reads them."""
    if str(path).lower().endswith(NIFTI_ENDINGS):
        return _read_nifti(path)
    import SimpleITK as sitk

    try:
        return sitk.GetArrayFromImage(sitk.ReadImage(os.fspath(path)))
    except RuntimeError as e:
        raise ValueError(f"{path}: SimpleITK cannot read it ({str(e).strip().splitlines()[-1]})") from None


def _read_nifti(path: Path) -> np.ndarray:
    """A NIfTI file's voxels (scaled by ``scl_slope``/``scl_inter`` as SimpleITK does), in
    NumPy order; trailing axes of length 1 beyond the third are dropped, as SimpleITK drops them."""
    import nibabel

    try:
        array = np.asanyarray(nibabel.load(os.fspath(path)).dataobj)
    except Exception as e:  # noqa: BLE001 - nibabel raises many kinds on a broken file
        raise ValueError(f"{path}: nibabel cannot read it ({type(e).__name__}: {e})") from None
    while array.ndim > 3 and array.shape[-1] == 1:
        array = array[..., 0]
    return np.ascontiguousarray(array.T)


def nonfinite_problem(path: Path, array: np.ndarray) -> str | None:
    """What is wrong with an image's values (NaN or ±inf, counted), or ``None``."""
    if not np.issubdtype(array.dtype, np.floating) or np.isfinite(array).all():
        return None
    n_nan, n_inf = int(np.isnan(array).sum()), int(np.isinf(array).sum())
    return f"{path}: {n_nan} NaN and {n_inf} infinite value(s); values-seg needs finite image values " \
           "(fix the file, or remove its case)"


def read_image(paths) -> np.ndarray:
    """The channels ``[C, *spatial]`` (float32) of one case; non-finite values are an error."""
    channels = []
    for path in paths:
        array = read_array(path).astype(np.float32, copy=False)  # (float64 beyond float32's range: inf)
        problem = nonfinite_problem(path, array)
        if problem:
            raise ValueError(problem)
        channels.append(array)
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


def check_files(entries, progress: bool = True) -> int:
    """Read every image and label file of ``entries`` (:class:`~.plan.CaseEntry`) once; one
    :class:`LayoutError` listing every file with non-finite image values or labels that
    ``dataset.json`` does not declare. Returns the number of files read."""
    problems, n = [], 0
    for e in counted(entries, len(entries), "checking files", progress):
        for path in e.raw.images:
            n += 1
            try:
                problem = nonfinite_problem(path, read_array(path).astype(np.float32, copy=False))
            except ValueError as err:
                problem = str(err)
            if problem:
                problems.append(problem)
        for path in e.raw.raters:
            n += 1
            try:
                check_label(path, read_array(path), e.folder.info)
            except ValueError as err:
                problems.append(str(err))
    if problems:
        more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
        raise LayoutError(f"{len(problems)} file(s) of the data set cannot be used:\n  " + "\n  ".join(problems[:10])
                          + more)
    return n
